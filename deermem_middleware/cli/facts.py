"""``deermem fact add|edit|rm``: changes by hand, compare-and-set, marked manual."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Fact, Memory
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope

from deermem_middleware.cli.common import (
    UsageError,
    _checked_text,
    _compare_and_set,
    _find_fact,
    _now,
    _opened,
    _who,
)

__all__: list[str] = []  # private: the command is the interface


def _fact_add(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.document import Fact, new_fact_id
    from deermem_middleware.memory.facts import normalize_fact_text

    text = _checked_text(args.text)
    key = normalize_fact_text(text)
    fact_id = new_fact_id()

    def change(memory: Memory) -> Memory:
        for known in memory.facts:
            if known.status == "active" and normalize_fact_text(known.content) == key:
                raise UsageError(
                    f"an equal fact exists: {known.id} ({known.content!r}); use `deermem fact "
                    "edit` to change it"
                )
        now = _now()
        fact = Fact(
            id=fact_id,
            content=text,
            category=args.category,
            confidence=args.confidence,
            createdAt=now,
            updatedAt=now,
            sourceKind="stated",
            manual=True,
            eventAt=args.date or None,
            validUntil=args.until or None,
        )
        return memory.model_copy(update={"facts": (*memory.facts, fact), "lastUpdated": now})

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        _, _, revision = _compare_and_set(middleware.storage, scope, change)
        middleware.selector.forget(scope)
    print(f"added {fact_id} to the memory of {_who(scope)} (revision {revision}): {text}")
    return 0


def _fact_edit(args: argparse.Namespace) -> int:
    if all(getattr(args, k) is None for k in ("text", "category", "confidence", "date", "until")):
        raise UsageError(
            "fact edit: nothing to change: give --text, --category, --confidence, --date or --until"
        )
    text = _checked_text(args.text) if args.text is not None else None

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)

        def change(memory: Memory) -> Memory:
            old = _find_fact(memory, args.id, scope)
            update: dict[str, Any] = {"manual": True, "updatedAt": _now()}
            if text is not None:
                update["content"] = text
            if args.category is not None:
                update["category"] = args.category
            if args.confidence is not None:
                update["confidence"] = args.confidence
            if args.date is not None:
                update["eventAt"] = args.date or None
            if args.until is not None:
                update["validUntil"] = args.until or None
            facts = tuple(f.model_copy(update=update) if f is old else f for f in memory.facts)
            return memory.model_copy(update={"facts": facts, "lastUpdated": update["updatedAt"]})

        before, after, revision = _compare_and_set(middleware.storage, scope, change)
        old = _find_fact(before, args.id, scope)
        new = _find_fact(after, args.id, scope)
        if middleware.selector.embeddings is not None and old.content != new.content:
            middleware.selector.embeddings.forget([old.content])
        middleware.selector.forget(scope)
    print(f"edited {args.id} in the memory of {_who(scope)} (revision {revision}):")
    for name in ("content", "category", "confidence", "eventAt", "validUntil"):
        was, now = getattr(old, name), getattr(new, name)
        if was != now:
            print(f"  {name}: {was!r} -> {now!r}")
    return 0


def _remove_fact(middleware: MemoryService, scope: MemoryScope, fact_id: str) -> tuple[Fact, int]:
    def change(memory: Memory) -> Memory:
        _find_fact(memory, fact_id, scope)
        return memory.model_copy(
            update={
                "facts": tuple(f for f in memory.facts if f.id != fact_id),
                "lastUpdated": _now(),
            }
        )

    before, _, revision = _compare_and_set(middleware.storage, scope, change)
    removed = _find_fact(before, fact_id, scope)
    if middleware.selector.embeddings is not None:
        middleware.selector.embeddings.forget([removed.content])
    middleware.selector.forget(scope)
    return removed, revision


def _fact_rm(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        removed, revision = _remove_fact(middleware, scope, args.id)
    print(
        f"removed {removed.id} from the memory of {_who(scope)} (revision {revision}): "
        f"{removed.content}"
    )
    return 0

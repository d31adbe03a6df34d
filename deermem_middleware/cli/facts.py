"""``deermem fact add|edit|rm``: changes by hand, compare-and-set, marked manual."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Fact, Memory
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope

from deermem_middleware.cli.common import (
    UsageError,
    _checked_text,
    _no_fact,
    _now,
    _opened,
    _who,
)

__all__: list[str] = []  # private: the command is the interface


def _fact_add(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.document import new_fact_id
    from deermem_middleware.memory.manual import DuplicateFactError, add_fact

    text = _checked_text(args.text)
    fact_id = new_fact_id()

    def change(memory: Memory) -> Memory:
        return add_fact(
            memory,
            text,
            fact_id=fact_id,
            now=_now(),
            category=args.category,
            confidence=args.confidence,
            event_at=args.date,
            valid_until=args.until,
        )

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        try:
            _, _, revision = middleware.change(scope, change)
        except DuplicateFactError as exc:
            raise UsageError(
                f"an equal fact exists: {exc.fact.id} ({exc.fact.content!r}); use `deermem fact "
                "edit` to change it"
            ) from None
    print(f"added {fact_id} to the memory of {_who(scope)} (revision {revision}): {text}")
    return 0


def _fact_edit(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.manual import UnknownFactError, edit_fact, find_fact

    if all(getattr(args, k) is None for k in ("text", "category", "confidence", "date", "until")):
        raise UsageError(
            "fact edit: nothing to change: give --text, --category, --confidence, --date or --until"
        )
    text = _checked_text(args.text) if args.text is not None else None

    def change(memory: Memory) -> Memory:
        return edit_fact(
            memory,
            args.id,
            now=_now(),
            content=text,
            category=args.category,
            confidence=args.confidence,
            event_at=args.date,
            valid_until=args.until,
            unique=False,  # the command has always allowed an edit to equal another fact
        )

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        try:
            before, after, revision = middleware.change(scope, change)
        except UnknownFactError:
            raise UsageError(_no_fact(args.id, scope)) from None
        old, new = find_fact(before, args.id), find_fact(after, args.id)
    print(f"edited {args.id} in the memory of {_who(scope)} (revision {revision}):")
    for name in ("content", "category", "confidence", "eventAt", "validUntil"):
        was, now = getattr(old, name), getattr(new, name)
        if was != now:
            print(f"  {name}: {was!r} -> {now!r}")
    return 0


def _remove_fact(middleware: MemoryService, scope: MemoryScope, fact_id: str) -> tuple[Fact, int]:
    from deermem_middleware.memory.manual import UnknownFactError, find_fact, remove_fact

    try:
        before, _, revision = middleware.change(
            scope,
            lambda memory: remove_fact(memory, fact_id, now=_now()),
        )
    except UnknownFactError:
        raise UsageError(_no_fact(fact_id, scope)) from None
    return find_fact(before, fact_id), revision


def _fact_rm(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        removed, revision = _remove_fact(middleware, scope, args.id)
    print(
        f"removed {removed.id} from the memory of {_who(scope)} (revision {revision}): "
        f"{removed.content}"
    )
    return 0

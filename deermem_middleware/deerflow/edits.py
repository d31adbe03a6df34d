"""DeerFlow's fact operations (``create_fact``, ``delete_fact``, ``update_fact`` and, with
DeerFlow PR #4885, ``batch_update_facts``, ``batch_delete_facts``) as changes of one document,
for :meth:`MemoryService.change`'s compare-and-set loop. Pure: each builds the change the
manager hands to the engine. DeerFlow is never imported here.

A batch is one change: its values are checked when it is built, every id when it runs, before
anything changes; the first wrong one raises and the document is stored as it was (a batch that
names a missing fact changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from deermem_middleware.memory import manual
from deermem_middleware.memory.document import Memory, utc_now_iso

__all__ = [
    "MAX_BATCH",
    "UPDATE_FIELDS",
    "FactEdit",
    "adding",
    "checked_edit",
    "editing",
    "editing_many",
    "removing",
    "removing_many",
]

Change = Callable[[Memory], Memory]

MAX_BATCH: Final = 100
"""Facts one batch may name: DeerFlow's gateway refuses more (422) before the backend is asked."""
UPDATE_FIELDS: Final = frozenset({"fact_id", "content", "category", "confidence"})
"""The keys of one ``batch_update_facts`` item (DeerFlow's ``BatchFactUpdateRequest``)."""


def adding(content: str, fact_id: str, category: str, confidence: float) -> Change:
    """Add a fact by hand (``manual``; the text, category and confidence checked by it)."""

    def add(memory: Memory) -> Memory:
        return manual.add_fact(
            memory,
            content,
            fact_id=fact_id,
            now=utc_now_iso(),
            category=category,
            confidence=confidence,
        )

    return add


def removing(fact_id: str) -> Change:
    """Remove one fact (KeyError when the document has none with this id)."""

    def remove(memory: Memory) -> Memory:
        return manual.remove_fact(memory, fact_id, now=utc_now_iso())

    return remove


def editing(
    fact_id: str, content: str | None, category: str | None, confidence: float | None
) -> Change:
    """Change the given fields of one fact. The values are checked here, before the fact is
    looked up (ValueError ``"content"``/``"confidence"``)."""
    text = manual.checked_text(content) if content is not None else None
    number = manual.checked_confidence(confidence) if confidence is not None else None

    def edit(memory: Memory) -> Memory:
        return manual.edit_fact(
            memory, fact_id, now=utc_now_iso(), content=text, category=category, confidence=number
        )

    return edit


@dataclass(frozen=True)
class FactEdit:
    """One checked item of a batch update: the fact and its new values (None: kept)."""

    fact_id: str
    content: str | None = None
    category: str | None = None
    confidence: float | None = None


def checked_edit(item: Any, position: int) -> FactEdit:
    """One ``batch_update_facts`` item checked: a mapping of :data:`UPDATE_FIELDS` with a
    non-blank ``fact_id``. ValueError naming the field (``"fact_id"``, ``"content"``,
    ``"confidence"`` or the unknown key) and the item's position."""
    if not isinstance(item, Mapping):
        raise ValueError("fact_id", f"update {position}: expected a mapping, got {item!r}")
    unknown = sorted(str(key) for key in item if key not in UPDATE_FIELDS)
    if unknown:
        raise ValueError(unknown[0], f"update {position}: unknown field(s) {unknown}")
    fact_id = item.get("fact_id")
    if not isinstance(fact_id, str) or not fact_id.strip():
        raise ValueError("fact_id", f"update {position}: empty fact_id")
    content, category, confidence = (item.get(k) for k in ("content", "category", "confidence"))
    try:
        return FactEdit(
            fact_id,
            manual.checked_text(content) if content is not None else None,
            manual.checked_category(category) if category is not None else None,
            manual.checked_confidence(confidence) if confidence is not None else None,
        )
    except manual.InvalidFactError as exc:
        raise manual.InvalidFactError(exc.field, f"update {position} ({fact_id}): {exc}") from None


def _checked_size(items: Sequence[Any], name: str) -> None:
    if not items:
        raise ValueError(name, f"{name}: at least one is needed")
    if len(items) > MAX_BATCH:
        raise ValueError(name, f"{name}: {len(items)} given, at most {MAX_BATCH} per batch")


def editing_many(updates: Sequence[Any]) -> Change:
    """Change the given fields of several facts, in the order given (a fact named twice gets
    both). Every item is checked here (:func:`checked_edit`; 1 to :data:`MAX_BATCH` of them);
    every id, when the change runs, before any fact changes (KeyError: the first missing)."""
    _checked_size(updates, "updates")
    edits = [checked_edit(item, n) for n, item in enumerate(updates, start=1)]

    def edit(memory: Memory) -> Memory:
        for item in edits:
            manual.find_fact(memory, item.fact_id)
        now = utc_now_iso()
        for item in edits:
            memory = manual.edit_fact(
                memory,
                item.fact_id,
                now=now,
                content=item.content,
                category=item.category,
                confidence=item.confidence,
            )
        return memory

    return edit


def removing_many(fact_ids: Sequence[str]) -> Change:
    """Remove several facts (an id named twice is removed once). 1 to :data:`MAX_BATCH` ids,
    each a non-blank text (ValueError ``"fact_ids"``); every id is looked up before any fact
    is removed (KeyError: the first missing)."""
    _checked_size(fact_ids, "fact_ids")
    for n, fact_id in enumerate(fact_ids, start=1):
        if not isinstance(fact_id, str) or not fact_id.strip():
            raise ValueError("fact_ids", f"fact id {n}: expected a non-blank text, got {fact_id!r}")
    wanted = list(dict.fromkeys(fact_ids))

    def remove(memory: Memory) -> Memory:
        return manual.remove_facts(memory, wanted, now=utc_now_iso())

    return remove

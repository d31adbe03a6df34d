"""DeerFlow's fact operations (``create_fact``, ``delete_fact``, ``update_fact``) as changes of
one document, for :meth:`MemoryService.change`'s compare-and-set loop. Pure: each builds the
change the manager hands to the engine. DeerFlow is never imported here.
"""

from __future__ import annotations

from collections.abc import Callable

from deermem_middleware.memory import manual
from deermem_middleware.memory.document import Memory, utc_now_iso

__all__ = ["adding", "editing", "removing"]

Change = Callable[[Memory], Memory]


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

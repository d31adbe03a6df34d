"""Changes a person makes by hand: add, edit, remove and find facts (pure).

The ``deermem fact`` commands and DeerFlow's memory API (through
:class:`~deermem_middleware.deerflow.manager.DeermemMemoryManager`) both change facts with these
functions, each under its storage's compare-and-set loop; each adapter turns the errors below into
its own (a one-line usage error, the gateway's ``ValueError``/``KeyError``). The clock and the new
fact's id are passed in.

A fact added or edited by hand is ``manual``: extraction never changes or removes it. One added by
hand has no ``source`` thread: it is stored without the key (never ``null``: DeerFlow types
``source`` as a string, and its v2.0.0 API rejects a ``null``), and DeerFlow's formats write
``"manual"`` for it (:func:`deermem_middleware.formats.deerflow.deerflow_fact`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, Final

from deermem_middleware.memory.document import MAX_FACT_CHARS, Fact, Memory, is_invisible
from deermem_middleware.memory.facts import normalize_fact_text
from deermem_middleware.memory.values import MAX_CATEGORY_CHARS, cap_text

__all__ = [
    "DEFAULT_CATEGORY",
    "ChangeRecord",
    "DuplicateFactError",
    "InvalidFactError",
    "UnknownFactError",
    "add_fact",
    "checked_category",
    "checked_confidence",
    "checked_text",
    "duplicate_of",
    "edit_fact",
    "find_fact",
    "gone_contents",
    "remove_fact",
    "remove_facts",
]

DEFAULT_CATEGORY: Final = "context"


class InvalidFactError(ValueError):
    """A value given for a fact is wrong: ``field`` names it (``content``, ``confidence``),
    the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class DuplicateFactError(ValueError):
    """An active fact with the same text (after :func:`normalize_fact_text`) exists: ``fact``."""

    def __init__(self, fact: Fact) -> None:
        super().__init__(f"an equal fact exists: {fact.id} ({fact.content!r})")
        self.fact = fact


class UnknownFactError(KeyError):
    """The document has no fact with the id ``fact_id``."""

    def __init__(self, fact_id: str) -> None:
        super().__init__(fact_id)
        self.fact_id = fact_id

    def __str__(self) -> str:
        return f"no fact {self.fact_id!r}"


# -- checks ---------------------------------------------------------------------------------------


def checked_text(content: Any) -> str:
    """The fact text, single-spaced; :class:`InvalidFactError` (``content``) when it is not
    text, is blank (invisible characters only) or is longer than ``MAX_FACT_CHARS``."""
    text = " ".join(content.split()) if isinstance(content, str) else ""
    if not text or is_invisible(text):
        raise InvalidFactError("content", "the fact text is blank")
    if len(text) > MAX_FACT_CHARS:
        raise InvalidFactError(
            "content", f"the fact text has {len(text)} characters; at most {MAX_FACT_CHARS}"
        )
    return text


def checked_confidence(value: Any) -> float:
    """A number from 0 to 1 (not a boolean, not NaN); :class:`InvalidFactError`
    (``confidence``) otherwise."""
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -1
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidFactError("confidence", f"expected a number from 0 to 1, got {value!r}")
    return number


def checked_category(value: Any) -> str:
    """The category single-spaced and capped like extracted ones; blank or not text:
    :data:`DEFAULT_CATEGORY`."""
    text = " ".join(value.split()) if isinstance(value, str) else ""
    return cap_text(text, MAX_CATEGORY_CHARS) if text else DEFAULT_CATEGORY


# -- lookups --------------------------------------------------------------------------------------


def find_fact(memory: Memory, fact_id: str) -> Fact:
    """The fact with this id (any status); :class:`UnknownFactError` when there is none."""
    for fact in memory.facts:
        if fact.id == fact_id:
            return fact
    raise UnknownFactError(fact_id)


def duplicate_of(memory: Memory, text: str, *, besides: str | None = None) -> Fact | None:
    """The active fact whose text equals ``text`` once normalised (other than ``besides``)."""
    key = normalize_fact_text(text)
    for known in memory.facts:
        active = known.id != besides and known.status == "active"
        if active and normalize_fact_text(known.content) == key:
            return known
    return None


def gone_contents(before: Memory, after: Memory) -> list[str]:
    """Fact texts ``before`` has and ``after`` no longer has (sorted): what an embedding cache
    may forget after a change."""
    return sorted({f.content for f in before.facts} - {f.content for f in after.facts})


# -- changes --------------------------------------------------------------------------------------


def add_fact(
    memory: Memory,
    content: str,
    *,
    fact_id: str,
    now: str,
    category: str = DEFAULT_CATEGORY,
    confidence: float = 0.5,
    event_at: str | None = None,
    valid_until: str | None = None,
) -> Memory:
    """``memory`` with a new manual fact (the user ``stated`` it; no ``source`` thread) at the
    end; :class:`InvalidFactError` for a bad text or confidence, :class:`DuplicateFactError`
    when an equal active fact exists."""
    text = checked_text(content)
    number = checked_confidence(confidence)
    known = duplicate_of(memory, text)
    if known is not None:
        raise DuplicateFactError(known)
    fact = Fact(
        id=fact_id,
        content=text,
        category=checked_category(category),
        confidence=number,
        createdAt=now,
        updatedAt=now,
        sourceKind="stated",
        manual=True,
        eventAt=event_at or None,
        validUntil=valid_until or None,
    )
    return memory.model_copy(update={"facts": (*memory.facts, fact), "lastUpdated": now})


def edit_fact(
    memory: Memory,
    fact_id: str,
    *,
    now: str,
    content: str | None = None,
    category: str | None = None,
    confidence: float | None = None,
    event_at: str | None = None,
    valid_until: str | None = None,
    unique: bool = True,
) -> Memory:
    """``memory`` with the given fields of one fact changed and the others kept; the fact
    becomes ``manual``, its ``updatedAt`` is ``now``. None keeps a field; for ``event_at`` and
    ``valid_until`` an empty text clears it.

    :class:`UnknownFactError` when the fact is missing, :class:`InvalidFactError` for a bad text
    or confidence, :class:`DuplicateFactError` when ``unique`` and the new text equals another
    active fact's.
    """
    old = find_fact(memory, fact_id)
    update: dict[str, Any] = {"manual": True, "updatedAt": now}
    if content is not None:
        text = checked_text(content)
        known = duplicate_of(memory, text, besides=fact_id) if unique else None
        if known is not None:
            raise DuplicateFactError(known)
        update["content"] = text
    if category is not None:
        update["category"] = checked_category(category)
    if confidence is not None:
        update["confidence"] = checked_confidence(confidence)
    if event_at is not None:
        update["eventAt"] = event_at or None
    if valid_until is not None:
        update["validUntil"] = valid_until or None
    facts = tuple(f.model_copy(update=update) if f is old else f for f in memory.facts)
    return memory.model_copy(update={"facts": facts, "lastUpdated": now})


def remove_fact(memory: Memory, fact_id: str, *, now: str) -> Memory:
    """``memory`` without the fact ``fact_id``; :class:`UnknownFactError` when it has none."""
    return remove_facts(memory, (fact_id,), now=now)


def remove_facts(memory: Memory, fact_ids: Iterable[str], *, now: str) -> Memory:
    """``memory`` without the facts ``fact_ids``, all or none: every id is looked up first
    (:class:`UnknownFactError` for the first missing one, and nothing is removed)."""
    gone: set[str] = set()
    for fact_id in fact_ids:
        find_fact(memory, fact_id)
        gone.add(fact_id)
    facts = tuple(f for f in memory.facts if f.id not in gone)
    return memory.model_copy(update={"facts": facts, "lastUpdated": now})


class ChangeRecord:
    """A change to hand to a compare-and-set loop (``storage.update``), which may call it more
    than once (after a lost race): remembers the last document it got and what it made of it,
    the ones that were saved."""

    def __init__(self, change: Callable[[Memory], Memory]) -> None:
        self._change = change
        self._seen: tuple[Memory, Memory] | None = None

    def __call__(self, current: Memory) -> Memory:
        changed = self._change(current)
        self._seen = (current, changed)
        return changed

    @property
    def before(self) -> Memory:
        """The document the saved change was made to."""
        return self._result()[0]

    @property
    def after(self) -> Memory:
        """The document saved."""
        return self._result()[1]

    def _result(self) -> tuple[Memory, Memory]:
        if self._seen is None:
            raise RuntimeError("the change was never applied")
        return self._seen

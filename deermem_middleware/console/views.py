"""What the console shows, as plain JSON: facts with their status, scores and counts, the
profile, filters, sorting and pages — pure functions of a document, the clock passed in.

**A fact's version.** An edit or delete names the version of the fact the person saw
(:func:`fact_version`: a digest of what a person edits — text, category, confidence, status,
dates). If an agent's update changed any of it in the meantime the write is refused with a 409
and the current fact, never applied over it. Counters the agent bumps on every model call
(injections, last used) are not part of it: a fact that was merely injected again is not "changed"
and an edit of it goes through.

**Cost.** The facts page is the console's hot call. For a user with 5,000 facts it filters and
sorts the cached, frozen document and builds views only for the page it returns (scores
included): see ``benchmarks/console_api.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

from deermem_middleware.memory.decay import effective_confidence
from deermem_middleware.memory.document import SECTION_FIELDS, Fact, Memory

__all__ = [
    "SORTS",
    "STATUSES",
    "counts",
    "fact_version",
    "fact_view",
    "filter_facts",
    "page",
    "paged",
    "profile_view",
    "sort_facts",
]

T = TypeVar("T")

STATUSES: Final = ("all", "active", "superseded", "archived")
_VERSIONED: Final = (
    "content",
    "category",
    "confidence",
    "status",
    "supersededBy",
    "eventAt",
    "validUntil",
    "manual",
)


def fact_version(fact: Fact) -> str:
    """A short digest of what a person edits in ``fact`` (see the module docstring)."""
    data = [getattr(fact, name) for name in _VERSIONED]
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fact_view(
    fact: Fact, now: datetime, half_lives: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """A fact as the console shows it: every stored field, plus ``score`` (the confidence as
    ranking uses it today: decayed since the fact was last confirmed, used or injected) and
    ``version``."""
    return {
        "id": fact.id,
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "score": round(effective_confidence(fact, now, half_lives), 4),
        "status": fact.status,
        "manual": fact.manual,
        "sourceKind": fact.sourceKind,
        "source": fact.source,
        "createdAt": fact.createdAt,
        "updatedAt": fact.updatedAt,
        "eventAt": fact.eventAt,
        "validUntil": fact.validUntil,
        "confirmations": fact.confirmations,
        "lastConfirmedAt": fact.lastConfirmedAt,
        "injections": fact.injections,
        "lastInjectedAt": fact.lastInjectedAt,
        "supersededBy": fact.supersededBy,
        "version": fact_version(fact),
    }


def filter_facts(
    facts: Iterable[Fact],
    *,
    status: str = "all",
    category: str | None = None,
    text: str | None = None,
) -> list[Fact]:
    """The facts with this status (``all``: any) and category, whose text, category or id
    contains ``text`` (case-insensitive)."""
    needle = text.casefold() if text else None
    out = []
    for fact in facts:
        if status != "all" and fact.status != status:
            continue
        if category and fact.category != category:
            continue
        if needle is not None and not (
            needle in fact.content.casefold()
            or needle in fact.category.casefold()
            or needle == fact.id.casefold()
        ):
            continue
        out.append(fact)
    return out


SORTS: Final[dict[str, Callable[[Fact], Any]]] = {
    "updated": lambda f: f.updatedAt or f.createdAt or "",
    "created": lambda f: f.createdAt or "",
    "confidence": lambda f: f.confidence,
    "injections": lambda f: f.injections,
    "confirmations": lambda f: f.confirmations,
}
"""Sort keys of the facts page; each is newest/largest first."""


def sort_facts(facts: list[Fact], sort: str) -> list[Fact]:
    return sorted(facts, key=SORTS[sort], reverse=True)


def page(items: Sequence[T], offset: int, limit: int) -> list[T]:
    return list(items[offset : offset + limit])


def paged(
    name: str, items: Sequence[T], offset: int, limit: int, view: Callable[[T], Any]
) -> dict[str, Any]:
    """One page of ``items`` as a listing answers it: ``total``, ``offset``, ``limit`` and the
    page's views under ``name``."""
    return {
        "total": len(items),
        "offset": offset,
        "limit": limit,
        name: [view(item) for item in page(items, offset, limit)],
    }


def profile_view(memory: Memory) -> dict[str, Any]:
    """The six summaries, each ``{summary, updatedAt}``."""
    return {
        name: {"summary": memory.section(name).summary, "updatedAt": memory.section(name).updatedAt}
        for name in SECTION_FIELDS
    }


def counts(memory: Memory) -> dict[str, Any]:
    """Facts in all, by status, by category, and how many are manual."""
    by_status: dict[str, int] = {}
    by_category: dict[str, int] = {}
    manual = 0
    for fact in memory.facts:
        by_status[fact.status] = by_status.get(fact.status, 0) + 1
        by_category[fact.category] = by_category.get(fact.category, 0) + 1
        manual += fact.manual
    return {
        "facts": len(memory.facts),
        "byStatus": dict(sorted(by_status.items())),
        "byCategory": dict(sorted(by_category.items())),
        "manual": manual,
    }

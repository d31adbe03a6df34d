"""What one stored memory document holds, in numbers: the per-scope item of ``deermem stats`` and
the web console's overview.

Facts leave a memory two ways behind the user's back: archived (expired, or decayed below the
opt-in ``archive_floor``; kept, counted by status, and as ``archived``) and trimmed by capacity
(``max_facts``; deleted, so counted in the document's ``trimmed`` counter:
:mod:`~deermem_middleware.memory.capacity`). Both are shown, so neither goes unnoticed.

Counting is cheap and read-only, but a document may be unreadable (a hand-edited file, a
half-migrated database row): one bad scope must not hide every other one, so it becomes an item
with an ``error`` instead of an exception.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from deermem_middleware.storage.base import (
    RESERVED_USER,
    CorruptedMemoryError,
    MemoryScope,
    MemoryStorage,
)
from deermem_middleware.storage.journal import PendingJournal

__all__ = ["describe_hit_rate", "hit_rate", "scope_stats", "stats_items"]


def hit_rate(used: int, injections: int) -> float | None:
    """The memory's hit rate: facts used / facts injected (None before any injection)."""
    return used / injections if injections > 0 else None


def describe_hit_rate(used: int, injections: int) -> str:
    """``"hit rate 42 % (21 used / 50 injected)"``; ``"hit rate n/a (nothing injected yet)"``."""
    rate = hit_rate(used, injections)
    if rate is None:
        return "hit rate n/a (nothing injected yet)"
    return f"hit rate {100 * rate:.0f} % ({used:,} used / {injections:,} injected)"


def stats_items(
    storage: MemoryStorage,
    journal: PendingJournal | None,
    *,
    user: str | None = None,
    agent: str | None = None,
    visible: Callable[[str], bool] | None = None,
) -> list[dict[str, Any]]:
    """:func:`scope_stats` of every scope with a document or a pending capture, sorted; only
    ``user``'s and ``agent``'s when given, only users ``visible(user_id)`` accepts, never the
    console's own documents (:data:`RESERVED_USER`)."""
    pending: Counter[MemoryScope] = Counter()
    if journal is not None:
        pending.update(e.scope for e in journal.entries())
    scopes = sorted(
        s
        for s in {*storage.list_scopes(), *pending}
        if s.user_id != RESERVED_USER
        and (user is None or s.user_id == user)
        and (agent is None or s.agent_name == agent)
        and (visible is None or visible(s.user_id))
    )
    return [scope_stats(storage, s, pending[s]) for s in scopes]


def scope_stats(storage: MemoryStorage, scope: MemoryScope, pending: int) -> dict[str, Any]:
    """The numbers of ``scope``'s document: ``user``, ``agent``, ``location`` (the storage's
    description), ``pending`` (captures waiting in the journal, counted by the caller, who holds
    the journal), then ``revision``, ``lastUpdated``, ``bytes``, ``facts``, ``byStatus``,
    ``byCategory`` (both sorted by name), ``manual``, ``confidence`` (min, median, max; None
    without facts), ``injections``, ``used`` (injections whose turn's answer used the fact:
    the usage signal), ``hitRate`` (``used / injections``, None before any injection),
    ``archived`` (facts of that status), ``trimmed`` (facts ``max_facts`` deleted, in all) and
    ``lastTrimmedAt`` (None when never); or, when the document cannot be read, ``error`` in
    their place.

    ``bytes`` is the file's size for a JSON-file storage (what is on disk, indentation included),
    else the size of the document as compact UTF-8 JSON.
    """
    from deermem_middleware.storage.json_file import JSONFileStorage

    item: dict[str, Any] = {
        "user": scope.user_id,
        "agent": scope.agent_name,
        "location": storage.describe(scope),
        "pending": pending,
    }
    try:
        stored = storage.load(scope)
    except CorruptedMemoryError as exc:
        return {**item, "error": str(exc)}
    facts = stored.memory.facts
    trimmed = stored.memory.trimmed
    injections = sum(f.injections for f in facts)
    used = sum(min(f.used, f.injections) for f in facts)
    confidences = sorted(f.confidence for f in facts)
    size = len(json.dumps(stored.memory.to_json_dict(), ensure_ascii=False).encode())
    backend = storage.innermost
    if isinstance(backend, JSONFileStorage):
        with contextlib.suppress(OSError):
            size = backend.path_for(scope).stat().st_size
    item.update(
        {
            "revision": stored.revision,
            "lastUpdated": stored.memory.lastUpdated,
            "bytes": size,
            "facts": len(facts),
            "byStatus": dict(sorted(Counter(f.status for f in facts).items())),
            "byCategory": dict(sorted(Counter(f.category for f in facts).items())),
            "manual": sum(1 for f in facts if f.manual),
            "confidence": (
                {
                    "min": confidences[0],
                    "median": statistics.median(confidences),
                    "max": confidences[-1],
                }
                if confidences
                else None
            ),
            "injections": injections,
            "used": used,
            "hitRate": hit_rate(used, injections),
            "archived": sum(1 for f in facts if f.status == "archived"),
            "trimmed": trimmed.count if trimmed is not None else 0,
            "lastTrimmedAt": (trimmed.lastAt or None) if trimmed is not None else None,
        }
    )
    return item

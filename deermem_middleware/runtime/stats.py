"""What one stored memory document holds, in numbers: the per-scope item of ``deermem stats`` and
the web console's overview.

Counting is cheap and read-only, but a document may be unreadable (a hand-edited file, a
half-migrated database row): one bad scope must not hide every other one, so it becomes an item
with an ``error`` instead of an exception.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections import Counter
from typing import Any

from deermem_middleware.storage.base import CorruptedMemoryError, MemoryScope, MemoryStorage

__all__ = ["scope_stats"]


def scope_stats(storage: MemoryStorage, scope: MemoryScope, pending: int) -> dict[str, Any]:
    """The numbers of ``scope``'s document: ``user``, ``agent``, ``location`` (the storage's
    description), ``pending`` (captures waiting in the journal, counted by the caller, who holds
    the journal), then ``revision``, ``lastUpdated``, ``bytes``, ``facts``, ``byStatus``,
    ``byCategory`` (both sorted by name), ``manual``, ``confidence`` (min, median, max; None
    without facts) and ``injections``; or, when the document cannot be read, ``error`` in their
    place.

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
    confidences = sorted(f.confidence for f in facts)
    size = len(json.dumps(stored.memory.to_json_dict(), ensure_ascii=False).encode())
    if isinstance(storage, JSONFileStorage):
        with contextlib.suppress(OSError):
            size = storage.path_for(scope).stat().st_size
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
            "injections": sum(f.injections for f in facts),
        }
    )
    return item

"""``deermem stats``: per user and agent, facts by status and category, confidences, sizes, pending
work."""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.storage.base import MemoryScope

from deermem_middleware.cli.common import _dump, _opened, _storage_where

__all__: list[str] = []  # private: the command is the interface


def _stats(args: argparse.Namespace) -> int:
    from deermem_middleware.storage.base import CorruptedMemoryError
    from deermem_middleware.storage.json_file import JSONFileStorage

    with _opened(args) as middleware:
        storage = middleware.storage
        agent_name = middleware.agent_name if args.agent is not None else None
        pending: Counter[MemoryScope] = Counter()
        if middleware.journal is not None:
            pending.update(e.scope for e in middleware.journal.entries())
        scopes = sorted({*storage.list_scopes(), *pending})
        scopes = [
            s
            for s in scopes
            if (args.user is None or s.user_id == args.user)
            and (agent_name is None or s.agent_name == agent_name)
        ]
        items: list[dict[str, Any]] = []
        for scope in scopes:
            item: dict[str, Any] = {
                "user": scope.user_id,
                "agent": scope.agent_name,
                "location": storage.describe(scope),
                "pending": pending[scope],
            }
            try:
                stored = storage.load(scope)
            except CorruptedMemoryError as exc:
                items.append({**item, "error": str(exc)})
                continue
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
            items.append(item)
        where = _storage_where(storage)
    if args.json:
        print(_dump(items))
        return 0
    if not items:
        who = f" for user {args.user!r}" if args.user is not None else ""
        print(f"no memory stored{who} in {where}")
        return 0
    for item in items:
        print(f"user {item['user']!r}, agent {item['agent']!r}: {item['location']}")
        if "error" in item:
            print(f"  unreadable: {item['error']}")
            continue
        statuses = ", ".join(f"{k} {v}" for k, v in item["byStatus"].items()) or "none"
        categories = ", ".join(f"{k} {v}" for k, v in item["byCategory"].items()) or "none"
        conf = item["confidence"]
        print(
            f"  revision {item['revision']}, {item['bytes']:,} bytes, last updated "
            f"{item['lastUpdated'] or 'never'}, {item['pending']} pending capture(s)"
        )
        print(f"  facts {item['facts']} ({statuses}; {item['manual']} manual)")
        print(f"  by category: {categories}")
        if conf is not None:
            print(
                f"  confidence min {conf['min']:.2f}, median {conf['median']:.2f}, "
                f"max {conf['max']:.2f}; injections {item['injections']}"
            )
    return 0

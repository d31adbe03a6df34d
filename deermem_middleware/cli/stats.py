"""``deermem stats``: per user and agent, facts by status and category, confidences, sizes, pending
work, the hit rate of the usage signal — facts used / facts injected — and what left the memory
without anyone asking: archived facts (in the status counts) and the facts ``max_facts`` deleted
(``trimmed``, counted in the document). The items are
:func:`~deermem_middleware.runtime.stats.stats_items`."""

from __future__ import annotations

import argparse

from deermem_middleware.cli.common import _dump, _opened

__all__: list[str] = []  # private: the command is the interface


def _stats(args: argparse.Namespace) -> int:
    from deermem_middleware.runtime.stats import describe_hit_rate

    with _opened(args) as middleware:
        agent_name = middleware.agent_name if args.agent is not None else None
        items = middleware.stats(user=args.user, agent=agent_name)
        where = middleware.location()
        selection = middleware.selection
    if args.json:
        print(_dump(items))
        return 0
    print(f"selection: {selection}")
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
        print(f"  {_describe_trimmed(item['trimmed'], item['lastTrimmedAt'])}")
        if conf is not None:
            print(
                f"  confidence min {conf['min']:.2f}, median {conf['median']:.2f}, "
                f"max {conf['max']:.2f}; injections {item['injections']}"
            )
            print(f"  {describe_hit_rate(item['used'], item['injections'])}")
    return 0


def _describe_trimmed(count: int, last: str | None) -> str:
    """``"trimmed: 150 fact(s) deleted by max_facts, the last at 2026-06-01T12:00:00Z"``."""
    if not count:
        return "trimmed: none (no fact deleted by max_facts)"
    when = f", the last at {last}" if last else ""
    return f"trimmed: {count:,} fact(s) deleted by max_facts{when}"

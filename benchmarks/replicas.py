"""Several replicas on one PostgreSQL: extraction calls per burst, lost and duplicated facts,
take-over of a killed replica's work, and the capture's cost on one replica — in one run.

Each replica is a process running a real ``create_agent`` agent with ``MemoryMiddleware`` on the
shared PostgreSQL and a shared PostgreSQL checkpointer, as a stateless server behind a load
balancer (``tests/integration_tests/workers/replica.py``); every turn carries a marker and the
extraction model (a marker model: counted, not judged) turns each marker into one fact.

1. **Calls per burst**: ``--threads`` threads × ``--turns`` turns, the turns of a round sent in
   parallel; a thread's turns all on one replica (1 replica), on the next replica each turn
   (round robin), or each thread on its own replica (sticky). A burst is one thread's turns.
2. **Take-over**: ``--kill-threads`` threads (10) × 3 turns on the same replicas, each thread's
   last turn on the replica that is then killed (SIGKILL) — seconds until the survivors stored
   every turn, against the promise ``2 × debounce + lease``.
3. **Capture on one replica**: ``MemoryService.capture`` (filtering, the journal write, the
   enqueue), p50 over ``--captures`` calls, with the journal's capture (one statement that keeps
   a claim) against the plain ``put`` the capture used before replicas shared bursts, interleaved
   in the same run — on PostgreSQL and on the JSON-file default.

What must hold (``benchmarks/floors.toml``): round robin costs no more calls per burst than one
replica, nothing is lost or stored twice, the take-over keeps its promise, and the capture stays
within a bound of the plain write's p50 (a ratio: absolute times say nothing on a shared machine).

    python benchmarks/replicas.py [--smoke] [--dsn postgresql://...] [--json-out PATH]

``--smoke``: 6 threads × 3 turns per row, 5 threads killed, 200 captures (same debounce and
lease).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the replica worker and its driver live with the tests

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from report import Table, add_arguments, save  # noqa: E402

from deermem_middleware import MemoryConfig  # noqa: E402
from deermem_middleware.config import StorageConfig  # noqa: E402
from deermem_middleware.runtime.service import MemoryService  # noqa: E402
from deermem_middleware.storage.file_journal import FileJournal  # noqa: E402
from deermem_middleware.storage.journal import new_version  # noqa: E402
from deermem_middleware.storage.pending import JournalEntry  # noqa: E402
from deermem_middleware.storage.store_journal import StoreJournal  # noqa: E402
from tests.integration_tests.fleet import (  # noqa: E402
    Traffic,
    everything_stored,
    fleet,
    open_memory,
    round_robin,
    setup_checkpointer,
    sticky,
    stored_markers,
    wait_until,
)


def fleet_settings(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    """The replicas' settings, with a namespace of their own in the database."""
    prefix = f"b{uuid.uuid4().hex[:10]}"
    return {"dsn": dsn, "prefix": prefix, "debounce": args.debounce, "lease": args.lease}


def calls_of(replicas: list[Any]) -> int:
    return sum(int(r.ask(op="stats")["calls"]) for r in replicas)


ROUTES = {  # key in the results: the row, as the README's table names it
    "one_replica": "1 replica",
    "round_robin": "3 replicas, round robin",
    "sticky": "3 replicas, sticky",
}


def bursts(args: argparse.Namespace, storage: Any, replicas: list[Any]) -> dict[str, Any]:
    """Part 1: the same traffic on 1 replica, 3 round robin, 3 sticky."""
    rows: dict[str, Any] = {}
    routes = {
        "one_replica": lambda number, turn: 0,
        "round_robin": round_robin(3),
        "sticky": sticky(3),
    }
    for name, route in routes.items():
        traffic = Traffic(args.threads, args.turns)
        before = calls_of(replicas)
        started = time.monotonic()
        captures = traffic.play(replicas, route)
        took = wait_until(everything_stored(storage, traffic, replicas), 120)
        calls = calls_of(replicas) - before
        found = stored_markers(storage, traffic.users())
        expected = traffic.markers()
        rows[name] = {
            "threads": traffic.threads,
            "turns": traffic.turns,
            "extraction_calls": calls,
            "calls_per_burst": round(calls / traffic.threads, 2),
            "lost": sum(1 for m in expected if found[m] == 0),
            "duplicated": sum(1 for m in expected if found[m] > 1),
            "stored_s_after_last_turn": None if took is None else round(took, 1),
            "capture_p50_ms": round(statistics.median(captures), 2),
            "seconds": round(time.monotonic() - started, 1),
        }
    single = rows["one_replica"]["extraction_calls"]
    for row in rows.values():
        row["calls_vs_1_replica"] = round(row["extraction_calls"] / single, 2) if single else None
    return rows


def take_over(args: argparse.Namespace, storage: Any, replicas: list[Any]) -> dict[str, Any]:
    """Part 2: the replica holding the newest capture of ``--kill-threads`` threads is killed."""
    traffic = Traffic(threads=args.kill_threads, turns=3)
    traffic.play(replicas, lambda number, turn: turn % 3)
    replicas[2].signal(signal.SIGKILL)
    killed = time.monotonic()
    replicas[2].process.wait(timeout=10)
    took = wait_until(everything_stored(storage, traffic, replicas[:2]), 120, step=0.05)
    seconds = time.monotonic() - killed if took is not None else None
    found = stored_markers(storage, traffic.users())
    return {
        "threads": traffic.threads,
        "stored_s_after_kill": None if seconds is None else round(seconds, 2),
        "promise_s": 2 * args.debounce + args.lease,
        "lost": sum(1 for m in traffic.markers() if found[m] == 0),
        "duplicated": sum(1 for m in traffic.markers() if found[m] > 1),
    }


def on_a_fleet(args: argparse.Namespace, dsn: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parts 1 and 2 on one fleet of 3 replicas (started once: their start is not measured)."""
    settings = fleet_settings(args, dsn)
    storage = open_memory(dsn, settings["prefix"])
    try:
        with fleet(3, settings) as replicas:
            return bursts(args, storage, replicas), take_over(args, storage, replicas)
    finally:
        storage.close()


class PlainPutStoreJournal(StoreJournal):
    """The capture as it was before replicas shared bursts: one plain ``put`` of the entry."""

    def capture(self, entry: JournalEntry) -> None:
        namespace, key = self._where(entry.scope, entry.thread_id)
        value = entry.to_json()
        value["v"] = new_version()
        self._storage.store.put(namespace, key, value, index=False)


class BlindFileJournal(FileJournal):
    """The file capture as it was: a temp file renamed over the entry, no lock, no read."""

    def capture(self, entry: JournalEntry) -> None:
        path, folder = self._where(entry.scope, entry.thread_id)
        folder.mkdir(parents=True, exist_ok=True)
        self._write(path, entry)


def conversation(turns: int) -> list[Any]:
    messages: list[Any] = []
    for number in range(turns // 2):
        messages += [
            HumanMessage(f"My project code is P1-C{number:06d}; please keep it in mind."),
            AIMessage(f"Noted: your project code is P1-C{number:06d}."),
        ]
    return messages


def capture_cost(args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    """Part 3: ``MemoryService.capture`` p50 with the shared-burst journal against the plain
    write of before, interleaved (same engine, same storage, same conversation)."""
    results: dict[str, Any] = {}
    targets: list[tuple[str, MemoryConfig]] = [
        (
            "file",
            MemoryConfig(
                storage_path=tempfile.mkdtemp(prefix="deermem-replicas-"),
                debounce_seconds=3600,
                max_wait_seconds=None,
                flush_on_exit_seconds=None,
                embeddings="none",
            ),
        )
    ]
    if dsn:
        storage = StorageConfig(
            backend="postgres", dsn=dsn, prefix=f"c{uuid.uuid4().hex[:10]}", pool_max_size=4
        )
        targets.append(
            (
                "postgres",
                MemoryConfig(
                    storage=storage,
                    debounce_seconds=3600,
                    max_wait_seconds=None,
                    flush_on_exit_seconds=None,
                    embeddings="none",
                ),
            )
        )
    messages = conversation(20)
    for name, config in targets:
        service = MemoryService(config)
        shared = service._journal
        assert shared is not None
        if name == "file":
            assert isinstance(shared, FileJournal)
            before: Any = BlindFileJournal(shared.root)
        else:
            assert isinstance(shared, StoreJournal)
            before = PlainPutStoreJournal(shared._storage)
        samples: dict[str, list[int]] = {"now": [], "before": []}
        for number in range(args.captures + 20):
            for label, journal in (("now", shared), ("before", before)):
                service._journal = journal
                thread = f"{label}-{number % 50}"
                started = time.perf_counter_ns()
                service.capture(messages, user_id="bench", thread_id=thread)
                if number >= 20:  # warm-up: pool connections, first files
                    samples[label].append(time.perf_counter_ns() - started)
        service._journal = shared
        service.close(timeout=0)
        now, was = (statistics.median(samples[k]) / 1e6 for k in ("now", "before"))
        results[name] = {
            "capture_p50_ms": round(now, 3),
            "plain_write_p50_ms": round(was, 3),
            "ratio": round(now / was, 3),
        }
    return results


def tables(result: dict[str, Any]) -> dict[str, Table]:
    bursts_table = Table(
        ("replicas", "extraction calls", "per burst", "vs 1 replica", "facts lost", "duplicated"),
        [
            (
                ROUTES[name],
                f"{row['extraction_calls']}",
                f"{row['calls_per_burst']:.1f}",
                "n/a" if row["calls_vs_1_replica"] is None else f"{row['calls_vs_1_replica']:.1f}×",
                f"{row['lost']}",
                f"{row['duplicated']}",
            )
            for name, row in result["bursts"].items()
        ],
        "lrrrrr",
    )
    kill = result["take_over"]
    stored = kill["stored_s_after_kill"]
    take_over_table = Table(
        ("replica killed (SIGKILL)", "all stored after the kill", "promise", "lost", "duplicated"),
        [
            (
                f"holding the newest capture of {kill['threads']} threads",
                "never" if stored is None else f"{stored:.1f} s",
                f"≤ {kill['promise_s']:g} s (2 × debounce + lease)",
                f"{kill['lost']}",
                f"{kill['duplicated']}",
            )
        ],
        "lrrrr",
    )
    labels = {"file": "JSON files", "postgres": "PostgreSQL"}
    capture_table = Table(
        ("`MemoryService.capture` on one replica", "p50", "p50 plain write (before)", "ratio"),
        [
            (
                labels[name],
                f"{row['capture_p50_ms']:.3f} ms",
                f"{row['plain_write_p50_ms']:.3f} ms",
                f"{row['ratio']:.2f}×",
            )
            for name, row in result["capture"].items()
        ],
        "lrrr",
    )
    return {"bursts": bursts_table, "take_over": take_over_table, "capture": capture_table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DEERMEM_TEST_DSN"))
    parser.add_argument("--threads", type=int, help="per row (20; --smoke: 6)")
    parser.add_argument("--turns", type=int, help="per thread (6; --smoke: 3)")
    parser.add_argument("--kill-threads", type=int, help="in the take-over (10; --smoke: 5)")
    parser.add_argument("--debounce", type=float, default=3.0)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--captures", type=int, help="per journal (1,000; --smoke: 200)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("needs a PostgreSQL: --dsn or $DEERMEM_TEST_DSN")
    for name, full, smoke in (
        ("threads", 20, 6),
        ("turns", 6, 3),
        ("kill_threads", 10, 5),
        ("captures", 1000, 200),
    ):
        if getattr(args, name) is None:
            setattr(args, name, smoke if args.smoke else full)
    setup_checkpointer(args.dsn)
    burst_rows, kill = on_a_fleet(args, args.dsn)
    result = {
        "settings": {
            k: getattr(args, k)
            for k in ("threads", "turns", "kill_threads", "debounce", "lease", "captures")
        },
        "bursts": burst_rows,
        "take_over": kill,
        "capture": capture_cost(args, args.dsn),
    }
    made = tables(result)
    print(
        f"debounce {args.debounce:g} s, lease {args.lease:g} s; "
        f"{args.threads} threads × {args.turns} turns per row\n"
    )
    print(made["bursts"].markdown(), end="\n\n")
    print(made["take_over"].markdown(), end="\n\n")
    print(made["capture"].markdown())
    print(f"\nresults: {save(__file__, args, result, made, argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

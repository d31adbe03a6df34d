"""Storage backends under load: updates per second and injection latency, files vs PostgreSQL.

Each update is the real write path of a memory update — load the document, apply an extracted
update (one new fact, instant: no LLM), advance the thread watermark, compare-and-set save,
reload and re-apply on conflict — by 1 and by 4 processes against the *same* user (the worst
case: every writer contends for one document); the 4 processes are started once, before the
first measure, so their start-up is not timed. Injection latency is ``render_memory`` (load +
select + render) for a user with 100 facts.

What must hold (``benchmarks/floors.toml``): every update's fact is stored (a lost update is a
save that did not compare and set), and 4 contending processes keep a share of 1 process's rate
(a retry storm or a lock held too long shows as a collapse of that ratio).

    python benchmarks/storage.py [--smoke] [--dsn postgresql://...] [--updates N] [--json-out PATH]

Without ``--dsn`` (or ``$DEERMEM_TEST_DSN``) only the file backend is measured; ``--smoke`` (30
updates per process, 100 injection calls) needs PostgreSQL and fails without it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import uuid
from typing import Any

from langchain_core.messages import HumanMessage
from report import Table, add_arguments, save

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.config import StorageConfig
from deermem_middleware.extraction.extractor import ExtractionResult
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.factory import open_storage


class InstantExtractor:
    """Stands in for the LLM: one new fact per update, no waiting (storage is what we measure)."""

    def extract(self, memory: Any, turns: Any, **_: Any) -> ExtractionResult:
        text = turns[-2].text
        update = MemoryUpdate(newFacts=[NewFact(content=f"noted {text}", confidence=0.9)])
        return ExtractionResult(update=update, method="json_schema")


def config_for(backend: str, location: str, prefix: str) -> MemoryConfig:
    if backend == "file":
        storage = StorageConfig()
    else:
        storage = StorageConfig(backend="postgres", dsn=location, prefix=prefix, pool_max_size=2)
    return MemoryConfig(
        storage_path=location if backend == "file" else "/nonexistent",
        storage=storage,
        max_facts=100_000,
        embeddings="none",
        journal=False,
    )


def worker(args: tuple[str, str, str, int, int, Any]) -> dict[str, Any]:
    backend, location, prefix, proc, updates, barrier = args
    config = config_for(backend, location, prefix)
    storage = open_storage(config)
    updater = MemoryUpdater(storage, InstantExtractor, config)  # type: ignore[arg-type]
    scope = MemoryScope("bench-user", "__default__")
    barrier.wait()
    started = time.perf_counter()
    conflicts = 0
    for i in range(updates):
        marker = f"p{proc}-u{i}"
        turns = (Turn("user", marker, f"{marker}-q"), Turn("assistant", "ok", f"{marker}-a"))
        outcome = updater.run(CaptureJob(scope, f"thread-{marker}", turns))
        conflicts += outcome.conflicts
    seconds = time.perf_counter() - started
    storage.close()  # the pool's processes live on: no connection left open
    return {"updates": updates, "seconds": seconds, "conflicts": conflicts, "started": started}


def throughput(
    pool: Any, manager: Any, backend: str, location: str, procs: int, updates: int
) -> dict[str, Any]:
    """``procs`` of the pool's processes, each ``updates`` updates, started together."""
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    barrier = manager.Barrier(procs)  # the pool has 4: each blocks here until all have a task
    started = time.perf_counter()
    results = pool.map(
        worker, [(backend, location, prefix, p, updates, barrier) for p in range(procs)], 1
    )
    wall = time.perf_counter() - started
    slowest = max(r["seconds"] for r in results)
    storage = open_storage(config_for(backend, location, prefix))
    facts = len(storage.load(MemoryScope("bench-user", "__default__")).memory.facts)
    storage.close()
    total = sum(r["updates"] for r in results)
    return {
        "processes": procs,
        "updates": total,
        "updates_per_s": round(total / slowest, 1),
        "conflicts": sum(r["conflicts"] for r in results),
        "facts_stored": facts,
        "wall_s": round(wall, 1),
    }


def injection_latency(backend: str, location: str, calls: int = 300) -> dict[str, float]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    config = config_for(backend, location, prefix)
    mw = MemoryMiddleware(config, model=None)
    updater = MemoryUpdater(mw.service._storage, InstantExtractor, config)  # type: ignore[arg-type]
    scope = MemoryScope("reader", "__default__")
    for i in range(100):
        turns = (
            Turn("user", f"fact {i} about postgres", f"q{i}"),
            Turn("assistant", "ok", f"a{i}"),
        )
        updater.run(CaptureJob(scope, f"t{i}", turns))
    samples = []
    for i in range(calls):
        message = [HumanMessage(f"question {i} about postgres and go")]
        start = time.perf_counter()
        mw.render_memory(message, user_id="reader")
        samples.append((time.perf_counter() - start) * 1000)
    mw.close()
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(0.95 * len(samples)) - 1], 3),
    }


def location(backend: str, dsn: str | None) -> str:
    return tempfile.mkdtemp(prefix="deermem-bench-") if backend == "file" else str(dsn)


LABELS = {"file": "JSON files", "postgres": "PostgreSQL"}


def table(rows: dict[str, Any]) -> Table:
    return Table(
        (
            "backend",
            "1 process: updates/s",
            "4 processes: updates/s",
            "conflicts (4 processes)",
            "facts stored (4 processes)",
            "injection p50",
            "p95",
        ),
        [
            (
                LABELS[backend],
                f"{row['procs_1']['updates_per_s']:.0f}",
                f"{row['procs_4']['updates_per_s']:.0f}",
                f"{row['procs_4']['conflicts']}",
                f"{row['procs_4']['facts_stored']}/{row['procs_4']['updates']}",
                f"{row['injection']['p50_ms']:.2f} ms",
                f"{row['injection']['p95_ms']:.2f} ms",
            )
            for backend, row in rows.items()
        ],
        "lrrrrrr",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DEERMEM_TEST_DSN"))
    parser.add_argument("--updates", type=int, help="per process (default 100; --smoke: 30)")
    parser.add_argument("--calls", type=int, help="injection calls (default 300; --smoke: 100)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.smoke and not args.dsn:
        parser.error("--smoke measures PostgreSQL too: pass --dsn or set $DEERMEM_TEST_DSN")
    updates = args.updates or (30 if args.smoke else 100)
    calls = args.calls or (100 if args.smoke else 300)
    backends = ["file"] + (["postgres"] if args.dsn else [])
    rows: dict[str, Any] = {}
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(4) as pool:  # started once: startup is not measured
        throughput(pool, manager, "file", location("file", None), 4, 3)  # warm-up: imports
        for backend in backends:
            rows[backend] = {  # each measure on a new folder (or a new prefix in the database)
                "procs_1": throughput(
                    pool, manager, backend, location(backend, args.dsn), 1, updates
                ),
                "procs_4": throughput(
                    pool, manager, backend, location(backend, args.dsn), 4, updates
                ),
            }
    for backend in backends:
        rows[backend]["injection"] = injection_latency(backend, location(backend, args.dsn), calls)
    results = {"updates_per_process": updates, "injection_calls": calls, "backends": rows}
    tables = {"load": table(rows)}
    print(f"Same user, every writer contending; {updates} updates per process\n")
    print(tables["load"].markdown())
    if not args.dsn:
        print("\npostgres: not measured (no --dsn or $DEERMEM_TEST_DSN)")
    print(f"\nresults: {save(__file__, args, results, tables, argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

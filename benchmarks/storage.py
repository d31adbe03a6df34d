"""Storage backends under load: updates per second and injection latency, files vs PostgreSQL.

Each update is the real write path of a memory update — load the document, apply an extracted
update (one new fact, instant: no LLM), advance the thread watermark, compare-and-set save,
reload and re-apply on conflict — by 1 and by 4 processes against the *same* user (the worst
case: every writer contends for one document). Injection latency is ``render_memory`` (load +
select + render) for a user with 100 facts.

    python benchmarks/storage.py [--dsn postgresql://...] [--updates N] [--json-out PATH]

Without ``--dsn`` (or ``$DEERMEM_TEST_DSN``) only the file backend is measured.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import HumanMessage

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
    stop = getattr(storage, "stop", None)
    if callable(stop):
        stop()
    return {"updates": updates, "seconds": seconds, "conflicts": conflicts, "started": started}


def throughput(backend: str, location: str, procs: int, updates: int) -> dict[str, Any]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(procs)
        with ctx.Pool(procs) as pool:
            started = time.perf_counter()
            results = pool.map(
                worker, [(backend, location, prefix, p, updates, barrier) for p in range(procs)]
            )
            wall = time.perf_counter() - started
    slowest = max(r["seconds"] for r in results)
    storage = open_storage(config_for(backend, location, prefix))
    facts = len(storage.load(MemoryScope("bench-user", "__default__")).memory.facts)
    stop = getattr(storage, "stop", None)
    if callable(stop):
        stop()
    total = sum(r["updates"] for r in results)
    return {
        "processes": procs,
        "updates": total,
        "updates_per_s": round(total / slowest, 1),
        "conflicts": sum(r["conflicts"] for r in results),
        "facts_stored": facts,
        "wall_s_with_startup": round(wall, 1),
    }


def injection_latency(backend: str, location: str, calls: int = 300) -> dict[str, float]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    config = config_for(backend, location, prefix)
    mw = MemoryMiddleware(config, model=None)
    updater = MemoryUpdater(mw.storage, InstantExtractor, config)  # type: ignore[arg-type]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DEERMEM_TEST_DSN"))
    parser.add_argument("--updates", type=int, default=100, help="per process")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    backends = [("file", tempfile.mkdtemp(prefix="deermem-bench-"))]
    if args.dsn:
        backends.append(("postgres", args.dsn))
    rows: dict[str, Any] = {}
    for backend, location in backends:
        if backend == "file":
            location = tempfile.mkdtemp(prefix="deermem-bench-")
        rows[backend] = {
            "1": throughput(backend, location, 1, args.updates),
            "4": throughput(
                backend, location if backend != "file" else tempfile.mkdtemp(), 4, args.updates
            ),
            "injection": injection_latency(
                backend, location if backend != "file" else tempfile.mkdtemp()
            ),
        }
    print(
        f"Same user, every writer contending; {args.updates} updates per process; "
        f"{platform.machine()}, {os.cpu_count()} cores, {datetime.now(UTC):%Y-%m-%d}\n"
    )
    print(
        "| backend | 1 process: updates/s | 4 processes: updates/s | conflicts (4 proc) | "
        "facts stored (4 proc) | injection p50 | p95 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for backend, row in rows.items():
        print(
            f"| {backend} | {row['1']['updates_per_s']} | {row['4']['updates_per_s']} | "
            f"{row['4']['conflicts']} | {row['4']['facts_stored']}/{row['4']['updates']} | "
            f"{row['injection']['p50_ms']:.2f} ms | {row['injection']['p95_ms']:.2f} ms |"
        )
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump({"backends": rows, "machine": platform.platform()}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The memory console's hot call over real HTTP: the facts page of a user with 5,000 facts.

A console app (:func:`~deermem_middleware.console.create_console_app`) is served by uvicorn in a
background thread on 127.0.0.1; an ``httpx`` client with a kept-alive connection calls it, in
the same run and interleaved round-robin (so drift hits every case alike):

- ``session``: ``GET api/session``, the cheapest authenticated call — the baseline: what HTTP,
  routing, the credential check and JSON cost with no memory work;
- ``facts``: ``GET api/facts?user=u&limit=50`` (default sort, newest first) — load the document,
  filter, sort 5,000 facts, build 50 views (scores and versions included);
- ``facts_q``: the same with a text search (a different word each request, cycling);
- ``facts_status_active``: the same filtered to active facts.

Per backend: the JSON files (always) and PostgreSQL (``--dsn``, or ``$DEERMEM_TEST_DSN`` /
``$DEERMEM_POSTGRES_URL``; ``eval "$(.ci/postgres.sh start)"`` starts one). Latencies are
client-side wall time per request (p50/p95/p99, ms) after a warm-up; ``p50 / baseline`` is the
ratio of each p50 to the baseline's p50. The acceptance target is p95 ≤ 50 ms for the facts page.
What must hold (``benchmarks/floors.toml``): the facts page returns its 50 facts of the right
total, and its p50 stays within a bound of the baseline's (absolute times say nothing on a shared
machine; the ratio is the memory work).

    python benchmarks/console_api.py [--smoke] [--facts 5000] [--requests 300] [--dsn URL]
        [--json-out PATH]

``--smoke``: 2,000 facts, 60 requests per case after 10 of warm-up; it needs PostgreSQL and
fails without it.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import uvicorn
from injection_latency import make_memory as synthetic_memory  # benchmarks/ is on sys.path
from report import Table, add_arguments, save

from deermem_middleware.config import MemoryConfig, StorageConfig
from deermem_middleware.console import create_console_app
from deermem_middleware.memory.document import Memory
from deermem_middleware.runtime.service import MemoryService

TARGET_P95_MS = 50.0
TOKEN = "bench-token"
USER = "u"
WORDS = ["tea", "Lisbon", "kafka", "note 1", "marathon", "vim", "PostgreSQL", "zzz-no-match"]


def make_memory(n: int, seed: int = 1) -> Memory:
    """``n`` synthetic facts (the injection benchmark's, same texts), then 80% active, 15%
    superseded, 5% archived, a few used and confirmed: what a year-old memory's page shows."""
    rng = random.Random(seed)
    facts = []
    made = synthetic_memory(n, seed)  # a Memory, or (Memory, parts) in its newer form
    for fact in (made[0] if isinstance(made, tuple) else made).facts:
        roll = rng.random()
        facts.append(
            fact.model_copy(
                update={
                    "status": "active"
                    if roll < 0.80
                    else "superseded"
                    if roll < 0.95
                    else "archived",
                    "injections": rng.choice([0, 0, 0, 1, 4]),
                    "confirmations": rng.choice([0, 0, 1]),
                }
            )
        )
    return Memory(facts=tuple(facts))


def listen(listener: str) -> socket.socket:
    """A loopback socket on a free port: as uvicorn binds its own (``uvicorn``), or as the
    ``deermem console`` command does (``deermem-console``)."""
    if listener == "deermem-console":
        from deermem_middleware.cli.console import _listen

        return _listen("127.0.0.1", 0)
    # proto IPPROTO_TCP, as uvicorn's own bind has it: asyncio sets TCP_NODELAY on accepted
    # sockets only then, and without it every response (headers, then body: two writes) waits
    # ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(app: Any, listener: str = "uvicorn") -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port, in a background thread; its base URL."""
    sock = listen(listener)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def percentiles(samples: list[float]) -> dict[str, float]:
    p50, p95, p99 = np.percentile(samples, [50, 95, 99])
    return {
        "p50_ms": round(float(p50), 3),
        "p95_ms": round(float(p95), 3),
        "p99_ms": round(float(p99), 3),
    }


CASES: dict[str, str] = {  # key in the results: the call, as the README's table names it
    "session": "`GET api/session` (baseline: the cheapest authenticated call)",
    "facts": "`GET api/facts?user=u&limit=50`",
    "facts_q": "… with `q=` text search",
    "facts_status_active": "… with `status=active`",
}


def cases() -> dict[str, Callable[[int], tuple[str, dict[str, Any]]]]:
    return {
        "session": lambda i: ("api/session", {}),
        "facts": lambda i: ("api/facts", {"user": USER, "limit": 50}),
        "facts_q": lambda i: (
            "api/facts",
            {"user": USER, "limit": 50, "q": WORDS[i % len(WORDS)]},
        ),
        "facts_status_active": lambda i: (
            "api/facts",
            {"user": USER, "limit": 50, "status": "active"},
        ),
    }


def measure(
    service: MemoryService, n_facts: int, requests: int, warmup: int, listener: str = "uvicorn"
) -> dict[str, Any]:
    scope = service.scope(USER)
    memory = make_memory(n_facts)
    service.change(scope, lambda _m: memory)
    # a large write is derived in the background (64 facts inline, then steps of 256): the
    # page is measured once that is done, not while it rewrites the document
    service.flush(timeout=600)
    app = create_console_app(service, tokens={TOKEN: ("bench", "read")})
    samples: dict[str, list[float]] = {name: [] for name in cases()}
    sizes: dict[str, int] = {}
    with (
        serve(app, listener) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
    ):
        for i in range(warmup + requests):
            for name, call in cases().items():
                path, params = call(i)
                start = time.perf_counter()
                response = client.get(path, params=params)
                elapsed = (time.perf_counter() - start) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
                if i >= warmup:
                    samples[name].append(elapsed)
                sizes[name] = len(response.content)
        check = client.get("api/facts", params={"user": USER, "limit": 50}).json()
    base = percentiles(samples["session"])["p50_ms"]
    rows: dict[str, Any] = {}
    for name, values in samples.items():
        row: dict[str, Any] = percentiles(values)
        row["vs_session"] = round(row["p50_ms"] / base, 2) if base else None
        row["bytes"] = sizes[name]
        rows[name] = row
    # checked by the floors: the page holds what it should (a fast wrong answer is no speed)
    rows["page"] = {"facts": n_facts, "total": check["total"], "returned": len(check["facts"])}
    return rows


def file_service(folder: str) -> MemoryService:
    return MemoryService(
        MemoryConfig(storage_path=folder, enabled=False, embeddings="none", max_facts=100_000)
    )


def postgres_service(dsn: str) -> MemoryService:
    storage = StorageConfig(backend="postgres", dsn=dsn, prefix=f"bench{uuid.uuid4().hex[:10]}")
    config = MemoryConfig(
        storage_path="/nonexistent",
        storage=storage,
        enabled=False,
        embeddings="none",
        max_facts=100_000,
        journal=False,
    )
    return MemoryService(config)


LABELS = {"json_files": "JSON files", "postgres": "PostgreSQL"}


def table(backends: dict[str, dict[str, Any]]) -> Table:
    rows = [
        (
            LABELS[backend],
            label,
            f"{row[name]['p50_ms']:.2f}",
            f"{row[name]['p95_ms']:.2f}",
            f"{row[name]['p99_ms']:.2f}",
            f"{row[name]['vs_session']:.1f}×",
        )
        for backend, row in backends.items()
        for name, label in CASES.items()
    ]
    return Table(("backend", "call", "p50", "p95", "p99", "p50 / baseline"), rows, "llrrrr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, help="default 5,000 (--smoke: 2,000)")
    parser.add_argument("--requests", type=int, help="measured, per case (300; --smoke: 60)")
    parser.add_argument("--warmup", type=int, help="per case, not measured (30; --smoke: 10)")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("DEERMEM_TEST_DSN") or os.environ.get("DEERMEM_POSTGRES_URL"),
    )
    parser.add_argument(
        "--listener",
        choices=["uvicorn", "deermem-console"],
        default="deermem-console",
        help="the listening socket: as uvicorn binds one, or as `deermem console` does",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.smoke and not args.dsn:
        parser.error(
            "--smoke measures PostgreSQL too: pass --dsn or set $DEERMEM_TEST_DSN "
            "(or $DEERMEM_POSTGRES_URL)"
        )
    n_facts = args.facts or (2000 if args.smoke else 5000)
    requests = args.requests or (60 if args.smoke else 300)
    warmup = args.warmup if args.warmup is not None else (10 if args.smoke else 30)
    logging.getLogger("deermem_middleware").setLevel(logging.WARNING)
    backends: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        service = file_service(folder)
        try:
            backends["json_files"] = measure(service, n_facts, requests, warmup, args.listener)
        finally:
            service.close()
    if args.dsn:
        service = postgres_service(args.dsn)
        try:
            backends["postgres"] = measure(service, n_facts, requests, warmup, args.listener)
        finally:
            service.forget_user(USER)
            service.close()
    seconds = time.perf_counter() - started
    worst = max(
        row[name]["p95_ms"] for row in backends.values() for name in CASES if name != "session"
    )
    results = {
        "facts": n_facts,
        "requests": requests,
        "warmup": warmup,
        "listener": args.listener,
        "target_p95_ms": TARGET_P95_MS,
        "worst_facts_p95_ms": worst,
        "backends": backends,
    }
    tables = {"speed": table(backends)}
    print(
        f"Console API over loopback HTTP (uvicorn + httpx, keep-alive): {n_facts:,} facts, "
        f"{requests} requests per case after {warmup} warm-up, ms; listener: {args.listener}\n"
    )
    print(tables["speed"].markdown())
    if not args.dsn:
        print("\npostgres: not measured (no --dsn, $DEERMEM_TEST_DSN or $DEERMEM_POSTGRES_URL)")
    verdict = "met" if worst <= TARGET_P95_MS else "NOT met"
    print(
        f"\ntarget p95 ≤ {TARGET_P95_MS:.0f} ms for the facts page: {verdict} "
        f"(worst facts p95 {worst:.2f} ms); run took {seconds:.0f} s"
    )
    print(f"results: {save(__file__, args, results, tables, argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

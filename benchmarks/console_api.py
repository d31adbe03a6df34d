"""The memory console's hot call over real HTTP: the facts page of a user with 5,000 facts.

A console app (:func:`~deermem_middleware.console.create_console_app`) is served by uvicorn in a
background thread on 127.0.0.1; an ``httpx`` client with a kept-alive connection calls it, in
the same run and interleaved round-robin (so drift hits every case alike):

- ``session``: ``GET api/session``, the cheapest authenticated call — the baseline: what HTTP,
  routing, the credential check and JSON cost with no memory work;
- ``facts``: ``GET api/facts?user=u&limit=50`` (default sort, newest first) — load the document,
  filter, sort 5,000 facts, build 50 views (scores and versions included);
- ``facts q=``: the same with a text search (a different word each request, cycling);
- ``facts status=active``: the same filtered to active facts.

Per backend: the JSON files (always) and PostgreSQL (``--dsn``, or ``$DEERMEM_TEST_DSN`` /
``$DEERMEM_POSTGRES_URL``; ``eval "$(.ci/postgres.sh start)"`` starts one). Latencies are
client-side wall time per request (p50/p95/p99, ms) after a warm-up; ``/ session`` is the ratio
of each p50 to the baseline's p50. The acceptance target is p95 ≤ 50 ms for the facts page.

    python benchmarks/console_api.py [--facts 5000] [--requests 300] [--dsn URL] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import uvicorn
from injection_latency import make_memory as synthetic_memory  # benchmarks/ is on sys.path

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
    for fact in synthetic_memory(n, seed).facts:
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


def cases() -> dict[str, Callable[[int], tuple[str, dict[str, Any]]]]:
    return {
        "session (baseline)": lambda i: ("api/session", {}),
        "facts": lambda i: ("api/facts", {"user": USER, "limit": 50}),
        "facts q=": lambda i: (
            "api/facts",
            {"user": USER, "limit": 50, "q": WORDS[i % len(WORDS)]},
        ),
        "facts status=active": lambda i: (
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
        if check["total"] != n_facts or len(check["facts"]) != 50:
            raise RuntimeError(f"unexpected facts page: total {check['total']}")
    base = percentiles(samples["session (baseline)"])["p50_ms"]
    rows = {}
    for name, values in samples.items():
        row = percentiles(values)
        row["vs_session"] = round(row["p50_ms"] / base, 1) if base else None
        row["bytes"] = sizes[name]
        rows[name] = row
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=300, help="measured, per case")
    parser.add_argument("--warmup", type=int, default=30, help="per case, not measured")
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
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    logging.getLogger("deermem_middleware").setLevel(logging.WARNING)
    backends: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        service = file_service(folder)
        try:
            backends["json files"] = measure(
                service, args.facts, args.requests, args.warmup, args.listener
            )
        finally:
            service.close()
    if args.dsn:
        service = postgres_service(args.dsn)
        try:
            backends["postgres"] = measure(
                service, args.facts, args.requests, args.warmup, args.listener
            )
        finally:
            service.forget_user(USER)
            service.close()
    seconds = time.perf_counter() - started
    print(
        f"Console API over loopback HTTP (uvicorn + httpx, keep-alive): {args.facts:,} facts, "
        f"{args.requests} requests per case after {args.warmup} warm-up, ms; "
        f"listener: {args.listener}; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d}\n"
    )
    print("| backend | call | p50 | p95 | p99 | p50 / session | response bytes |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for backend, rows in backends.items():
        for name, row in rows.items():
            print(
                f"| {backend} | {name} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | "
                f"{row['p99_ms']:.2f} | {row['vs_session']:.1f}× | {row['bytes']:,} |"
            )
    if not args.dsn:
        print("\npostgres: not measured (no --dsn, $DEERMEM_TEST_DSN or $DEERMEM_POSTGRES_URL)")
    worst = max(
        row["p95_ms"]
        for rows in backends.values()
        for n, row in rows.items()
        if n != "session (baseline)"
    )
    verdict = "met" if worst <= TARGET_P95_MS else "NOT met"
    print(
        f"\ntarget p95 ≤ {TARGET_P95_MS:.0f} ms for the facts page: {verdict} "
        f"(worst facts p95 {worst:.2f} ms); run took {seconds:.0f} s"
    )
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "facts": args.facts,
                    "requests": args.requests,
                    "listener": args.listener,
                    "backends": backends,
                    "target_p95_ms": TARGET_P95_MS,
                    "machine": platform.platform(),
                },
                handle,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""DeerFlow as the host: what building the middleware per request costs, on DeerFlow's own config.

DeerFlow builds every ``extensions.middlewares`` entry with no arguments for every agent it
assembles, so ``MemoryMiddleware()`` runs once per request: it finds the config
(``$DEER_FLOW_CONFIG_PATH`` here), reads its ``memory:`` block and joins the process's shared
engine. The config is DeerFlow's own ``config.example.yaml`` (HEAD, 2,600 lines) when the pinned
copy is next to the repository (``--config`` to name one), else the fixture we wrote in its shape.

Measured in one run, each ``--constructions`` times (default 1,000):

1. ``MemoryMiddleware()`` with no arguments (config discovery, YAML, the shared engine);
2. the same with the parsed-file cache emptied and PyYAML's pure-Python loader before each
   construction — what every construction cost before the cache (the baseline);
3. ``MemoryMiddleware(config)`` with a config object (no YAML at all);
4. a trivial ``AgentMiddleware`` (the floor);

then one request end to end — ``create_agent`` with DeerFlow's own-named ``MemoryMiddleware``
stand-in and ours, one turn invoked — against the same agent without ours. Reported: median and
p95 per construction, threads and RSS before and after, and the ratios.

    python benchmarks/deerflow_host.py [--smoke] [--constructions N] [--config PATH]
        [--json-out PATH]

``--smoke`` (CI): 100 constructions (20 uncached, 20 requests each way). Its floors
(``benchmarks/floors.toml``) are ratios within the run: a construction on the cached config costs
a small fraction of the uncached baseline, and the constructions start no threads (one shared
engine).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from report import Table, add_arguments, save

from deermem_middleware import MemoryMiddleware
from deermem_middleware.config import load_memory_config
from deermem_middleware.config import yaml_source as config_loading
from deermem_middleware.testing import RecordingAgentModel, ScriptedChatModel, update_json

REPO = Path(__file__).resolve().parents[1]
PINNED = REPO.parent / "shared" / "deerflow" / "head" / "config.example.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "deerflow_config" / "head_shape.yaml"
ENV = ("DEER_FLOW_HOME", "DEER_FLOW_CONFIG_PATH", "DEERMEM_CONFIG")
EXTRACTOR = ScriptedChatModel(answers=[update_json()])
"""One extraction model for every construction (DeerFlow passes none: the engine would use the
agent's scripted model, which answers no JSON); the same object, so the engine is shared."""


def build() -> MemoryMiddleware:
    """What DeerFlow's ``extensions.middlewares`` does per agent: no config argument."""
    return MemoryMiddleware(model=EXTRACTOR)


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(
    build: Callable[[], Any], n: int, before: Callable[[], None] | None = None
) -> list[float]:
    """Seconds per call of ``build``, ``n`` times (``before`` runs untimed before each)."""
    samples = []
    for _ in range(n):
        if before is not None:
            before()
        start = time.perf_counter()
        build()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000,
    }


def milliseconds(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def ratio(value: float) -> str:
    return f"{value:.4f}×" if value >= 0.0001 else "< 0.0001×"


class DeerFlowsMemoryMiddleware(AgentMiddleware):
    """Stands in for DeerFlow's own middleware: the class name ``MemoryMiddleware``."""

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


DeerFlowsMemoryMiddleware.__name__ = "MemoryMiddleware"


def one_request(with_ours: bool) -> float:
    """Build the agent (as DeerFlow does per request) and run one turn; seconds."""
    start = time.perf_counter()
    middleware: list[AgentMiddleware] = [DeerFlowsMemoryMiddleware()]
    if with_ours:
        middleware.append(build())
    agent = create_agent(
        RecordingAgentModel(), [], middleware=middleware, checkpointer=InMemorySaver()
    )
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1"}},
        context={"user_id": "alice"},
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--constructions", type=int, default=None, help="default 1,000 (smoke 100)")
    parser.add_argument("--config", type=Path, default=PINNED if PINNED.is_file() else FIXTURE)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n = args.constructions or (100 if args.smoke else 1000)
    repeats = max(20, n // 20)

    saved_env = {k: os.environ.get(k) for k in ENV}
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ["DEER_FLOW_HOME"] = home
            os.environ["DEER_FLOW_CONFIG_PATH"] = str(args.config)
            os.environ.pop("DEERMEM_CONFIG", None)
            first = build()
            config = first.config.model_copy(update={"flush_on_exit_seconds": None})
            threads_before, rss_before = threading.active_count(), rss_mib()

            cached = timed(build, n)
            threads_after = threading.active_count()

            fast_loader = config_loading._LOADER

            def cold() -> None:
                config_loading._PARSED.clear()
                config_loading._LOADER = yaml.SafeLoader

            try:
                uncached = timed(build, repeats, before=cold)
            finally:
                config_loading._LOADER = fast_loader
            from_object = timed(lambda: MemoryMiddleware(config, model=EXTRACTOR), n)
            floor = timed(DeerFlowsMemoryMiddleware, n)
            rss_after = rss_mib()

            one_request(True)  # warm both paths once
            one_request(False)
            with_ours = [one_request(True) for _ in range(repeats)]
            without = [one_request(False) for _ in range(repeats)]
            loaded = load_memory_config(args.config)
            first.service.close(timeout=30)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    rows = {
        "cached": {"label": "`MemoryMiddleware()` on DeerFlow's config", **summary(cached)},
        "uncached": {
            "label": "baseline, same run: no cache, pure-Python YAML (each construction before "
            "the cache)",
            **summary(uncached),
        },
        "from_object": {
            "label": "`MemoryMiddleware(config)` with a config object",
            **summary(from_object),
        },
        "trivial": {"label": "a trivial `AgentMiddleware` (the floor)", **summary(floor)},
    }
    base = rows["uncached"]["median_ms"]
    req_ours, req_base = statistics.median(with_ours) * 1000, statistics.median(without) * 1000
    config_lines = len(args.config.read_text(encoding="utf-8").splitlines())
    results = {
        "constructions": n,
        "uncached_constructions": repeats,
        "config": args.config.name,
        "config_lines": config_lines,
        "rows": rows,
        "threads_before": threads_before,
        "threads_after": threads_after,
        "threads_added": threads_after - threads_before,
        "rss_mib": [round(rss_before, 1), round(rss_after, 1)],
        "requests": repeats,
        "request_ms": {"with_ours": req_ours, "without": req_base},
    }
    tables = {
        "constructions": Table(
            ("construction", "median", "p95", "vs baseline"),
            [
                (
                    row["label"],
                    milliseconds(row["median_ms"]),
                    milliseconds(row["p95_ms"]),
                    ratio(row["median_ms"] / base),
                )
                for row in rows.values()
            ],
            "lrrr",
        ),
        "host": Table(
            ("measure", "figure"),
            [
                ("config", f"`{args.config.name}`, {config_lines:,} lines"),
                ("constructions (baseline: uncached)", f"{n:,} ({repeats:,})"),
                (
                    f"threads before / after the {n:,} constructions",
                    f"{threads_before} / {threads_after}",
                ),
                ("RSS before / after all constructions", f"{rss_before:.1f} / {rss_after:.1f} MiB"),
                (
                    "one request (build `create_agent`, one turn): with ours / without",
                    f"{req_ours:.2f} / {req_base:.2f} ms ({req_ours / req_base:.2f}×)",
                ),
            ],
            "lr",
        ),
    }
    print(
        f"# DeerFlow host: {n:,} constructions; config {args.config.name} "
        f"({config_lines:,} lines), storage {Path(loaded.storage_path).name}/"
    )
    print(
        f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {sys.platform}"
    )
    print()
    print(tables["constructions"].markdown())
    print()
    print(tables["host"].markdown())
    save(__file__, args, results, tables, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Seconds, tokens and what comes back per extraction on the offline model (SmolLM2-135M).

    python benchmarks/local_extraction.py [--smoke] [--runs 5] [--gguf PATH] [--server-threads N]
        [--max-tokens N] [--json-out PATH]

Each run is one real ``MemoryExtractor.extract`` call over HTTP (``ChatOpenAI`` ->
``llama-server``, ``json_schema`` structured output) on the same 4-turn conversation, against an
empty memory and against a memory holding 50 facts. Reported per memory: medians of seconds and
tokens, and whether each answer parsed into an update and proposed anything (facts, summary
sections, removals). A run that raises is counted, not fatal, so the results say what broke.

``--smoke`` (CI): one run against the empty memory, output capped at 256 tokens, a
single-threaded server (on a shared machine a multi-threaded llama.cpp stalls at every step).
Its floors
(``benchmarks/floors.toml``) hold that every answer parsed and that the model proposed something
— never timings, which depend on the machine (the server needs the ``deermem local-llm install``
of the README).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

from report import Table, add_arguments, save

from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.extraction.local_llm import LocalLLMServer
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.update import SECTION_FIELDS, MemoryUpdate

TURNS = [
    Turn("user", "Hi, I'm Maya, a backend engineer at a fintech startup in Lyon. I write Go.", "1"),
    Turn("assistant", "Nice to meet you, Maya! Go is a great fit for payment services.", "2"),
    Turn("user", "We're moving our payments service from MySQL to PostgreSQL this month.", "3"),
    Turn("assistant", "Good plan. Tools like golang-migrate or Atlas can help.", "4"),
]
MEMORIES = {"empty_memory": "empty memory", "facts_50": "50 facts"}


def _memory_with_facts(n: int) -> Memory:
    facts = tuple(
        Fact(id=f"fact_{i:04d}", content=f"The user mentioned topic number {i}", confidence=0.8)
        for i in range(n)
    )
    return Memory(facts=facts)


def proposed(update: MemoryUpdate) -> dict[str, int]:
    return {
        "facts": len(update.newFacts),
        "sections": sum(1 for name in SECTION_FIELDS if update.section(name).shouldUpdate),
        "removals": len(update.factsToRemove),
    }


def measure(extractor: MemoryExtractor, memory: Memory, runs: int) -> dict[str, Any]:
    seconds: list[float] = []
    tokens_in: list[int] = []
    tokens_out: list[int] = []
    facts: list[int] = []
    methods: set[str] = set()
    errors: list[str] = []
    parsed = nonempty = sections = rejected = 0
    for _ in range(runs):
        started = time.perf_counter()
        try:
            result = extractor.extract(memory, TURNS)
        except Exception as exc:  # counted: the floors say what broke
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            continue
        seconds.append(time.perf_counter() - started)
        tokens_in.append(result.input_tokens)
        tokens_out.append(result.output_tokens)
        methods.add(result.method)
        counts = proposed(result.update)
        parsed += 1
        nonempty += not result.update.is_empty
        facts.append(counts["facts"])
        sections += counts["sections"]
        rejected += len(result.rejected)
    median = statistics.median
    return {
        "runs": runs,
        "parsed": parsed,
        "proposed_something": nonempty,
        "facts_proposed_median": median(facts) if facts else 0,
        "facts_proposed_total": sum(facts),
        "sections_proposed_total": sections,
        "items_rejected_total": rejected,
        "errors": errors,
        "seconds_median": round(median(seconds), 2) if seconds else None,
        "seconds_min": round(min(seconds), 2) if seconds else None,
        "seconds_max": round(max(seconds), 2) if seconds else None,
        "input_tokens_median": median(tokens_in) if tokens_in else None,
        "output_tokens_median": median(tokens_out) if tokens_out else None,
        "output_tokens_per_second": (
            round(median(tokens_out) / median(seconds), 1) if seconds and median(seconds) else None
        ),
        "methods": sorted(methods),
    }


def table(rows: dict[str, dict[str, Any]]) -> Table:
    def cell(value: Any, fmt: str = "{}") -> str:
        return "–" if value is None else fmt.format(value)

    return Table(
        (
            "memory",
            "runs (parsed)",
            "median s",
            "min–max s",
            "input tok",
            "output tok",
            "out tok/s",
            "facts / sections proposed",
            "path",
        ),
        [
            (
                MEMORIES[key],
                f"{r['runs']} ({r['parsed']})",
                cell(r["seconds_median"]),
                f"{cell(r['seconds_min'])}–{cell(r['seconds_max'])}",
                cell(r["input_tokens_median"], "{:,.0f}"),
                cell(r["output_tokens_median"], "{:,.0f}"),
                cell(r["output_tokens_per_second"]),
                f"{r['facts_proposed_total']} / {r['sections_proposed_total']}",
                ", ".join(f"`{m}`" for m in r["methods"]) or "–",
            )
            for key, r in rows.items()
        ],
        "lrrrrrrrl",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="per memory; default 5 (smoke 1)")
    parser.add_argument("--gguf", default=None)
    parser.add_argument(
        "--server-threads",
        type=int,
        default=None,
        help="llama-server's threads (default: the server's; smoke 1: a shared CI machine's "
        "other load stalls a multi-threaded llama.cpp at every step)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="output cap per extraction (default: the product's 1,024; smoke 256 — the small "
        "model fills any cap, and a cut answer keeps its complete items)",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.smoke else 5)

    memories = {"empty_memory": Memory()}
    if not args.smoke:  # smoke: the empty memory only (one extraction, well under a minute)
        memories["facts_50"] = _memory_with_facts(50)
    threads = args.server_threads or (1 if args.smoke else None)
    with LocalLLMServer(gguf=args.gguf, threads=threads) as server:
        max_tokens = args.max_tokens or (256 if args.smoke else None)
        options = {} if max_tokens is None else {"max_tokens": max_tokens}
        extractor = MemoryExtractor(server.chat_model(**options))
        rows = {key: measure(extractor, memory, runs) for key, memory in memories.items()}
    model = args.gguf or "bundled SmolLM2-135M-Instruct Q4_1"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
    out = table(rows)
    print(f"Local extraction ({model}; {machine})\n")
    print(out.markdown())
    for key, r in rows.items():
        for error in r["errors"]:
            print(f"  {MEMORIES[key]}: {error}")
    results = {
        "model": model,
        "runs": runs,
        "runs_total": sum(r["runs"] for r in rows.values()),
        "parsed": sum(r["parsed"] for r in rows.values()),
        "proposed_something": sum(r["proposed_something"] for r in rows.values()),
        "memories": rows,
    }
    save(__file__, args, results, {"extraction": out}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

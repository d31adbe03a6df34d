"""Extraction cost per conversation: LLM calls and prompt tokens, against the seed's design.

A deterministic (seeded) workload of users and 40-turn threads whose turns arrive in bursts —
a few turns seconds apart, then minutes of pause — is replayed in *simulated* time through the
package's real pieces: the debounce bookkeeping the scheduler runs (``DebounceTable``, explicit
clock), the real ``MemoryUpdater`` (watermarks, apply, compare-and-set storage) and the real
``MemoryExtractor`` prompt. The extraction model is a counting ``BaseChatModel`` that answers a
small update and records each prompt's size in tokens (the package's offline counter).

Configurations, in the same run:

- ``no_debounce``: one extraction per turn, the whole thread each time (the seed without its timer);
- ``seed_debounce``: the seed's 30 s debounce per thread, no max wait, the whole thread resent;
- ``deermem``: as shipped — 30 s debounce, ``max_wait_seconds`` 120, per-thread watermark (only new
  turns are sent).

Also the memory injected per model call (profile + top 15 facts, tokens) at 100 and 1,000 facts,
beside injecting every fact.

    python benchmarks/extraction_cost.py [--smoke] [--users N] [--threads N] [--turns N]
        [--json-out PATH]

``--smoke`` (CI): 2 users × 1 thread (the steady workload: 1 thread). Its floors
(``benchmarks/floors.toml``) hold deermem's prompt tokens to a fraction of the seed's debounce
(the watermark: only new turns are sent), its calls to a fraction of one per turn (the debounce
merges a burst), and the update delay under steady traffic to ``max_wait_seconds`` (simulated
time, so exact).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage
from report import Table, add_arguments, save

from deermem_middleware import MemoryConfig
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.injection.render import render_memory
from deermem_middleware.injection.tokens import char_token_count
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, History, Memory, Section, UserContext
from deermem_middleware.retrieval.selector import FactSelector
from deermem_middleware.runtime.scheduler import DebounceTable
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import InMemoryStorage, MemoryScope, StoredMemory
from deermem_middleware.testing import ScriptedChatModel

WORDS = [
    "service",
    "deploy",
    "latency",
    "database",
    "index",
    "migration",
    "query",
    "cache",
    "team",
    "review",
    "design",
    "budget",
    "release",
    "customer",
    "ticket",
    "backlog",
    "sprint",
    "roadmap",
    "metric",
    "alert",
    "incident",
    "postgres",
    "go",
    "python",
    "kubernetes",
    "cluster",
    "pipeline",
    "schema",
    "contract",
    "weekend",
    "family",
    "trip",
    "marathon",
    "training",
    "recipe",
    "garden",
    "book",
    "concert",
    "daughter",
    "school",
    "apartment",
    "lease",
    "bike",
    "commute",
    "coffee",
    "morning",
    "plan",
]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    out: list[str] = []
    while sum(len(s.split()) for s in out) < target:
        out.append(sentence(rng, rng.randint(6, 16)))
    return " ".join(out)


@dataclass
class ThreadPlan:
    user: str
    thread: str
    arrivals: list[float]  # simulated seconds at which each turn (user + answer) completes
    turns: list[Turn]  # two per turn: user, assistant


def workload(users: int, threads: int, turns: int, seed: int = 42) -> list[ThreadPlan]:
    """Bursts of several (3–6) turns 3–15 s apart, separated by 2–20 minutes of quiet.

    The calls a debounce saves are ``1 - 1 / mean burst length``: the burst sizes are printed
    with the results so that dependence stays visible."""
    rng = random.Random(seed)
    plans = []
    for u in range(users):
        for t in range(threads):
            clock = rng.uniform(0, 600)
            arrivals: list[float] = []
            convo: list[Turn] = []
            while len(arrivals) < turns:
                for _ in range(min(rng.randint(3, 6), turns - len(arrivals))):
                    clock += rng.uniform(3, 15)
                    arrivals.append(clock)
                    i = len(convo)
                    convo.append(Turn("user", text(rng, 12, 60), f"u{u}t{t}m{i}"))
                    convo.append(Turn("assistant", text(rng, 120, 380), f"u{u}t{t}m{i + 1}"))
                clock += rng.uniform(120, 1200)
            plans.append(ThreadPlan(f"user{u}", f"u{u}-t{t}", arrivals, convo))
    return plans


def steady_workload(users: int, turns: int, seed: int = 7) -> list[ThreadPlan]:
    """Steady traffic: a turn every 10–25 s, never 30 s of quiet (a debounce alone starves)."""
    rng = random.Random(seed)
    plans = []
    for u in range(users):
        clock = rng.uniform(0, 60)
        arrivals: list[float] = []
        convo: list[Turn] = []
        for i in range(turns):
            clock += rng.uniform(10, 25)
            arrivals.append(clock)
            convo.append(Turn("user", text(rng, 12, 60), f"s{u}m{2 * i}"))
            convo.append(Turn("assistant", text(rng, 120, 380), f"s{u}m{2 * i + 1}"))
        plans.append(ThreadPlan(f"steady{u}", f"s{u}", arrivals, convo))
    return plans


def one_fact_answer() -> Any:
    """An extraction answer function: every call adds one new fact and rewrites topOfMind."""
    calls = [0]

    def answer(messages: list[BaseMessage]) -> str:
        calls[0] += 1
        n = calls[0]
        return json.dumps(
            {
                "user": {
                    "topOfMind": {"shouldUpdate": True, "summary": sentence(random.Random(n), 20)}
                },
                "history": {},
                "newFacts": [
                    {"content": f"User detail number {n}", "category": "context", "confidence": 0.9}
                ],
                "factsToRemove": [],
            }
        )

    return answer


def prompt_tokens(model: ScriptedChatModel) -> list[int]:
    """The prompt tokens of each call the model received."""
    return [sum(char_token_count(str(m.content)) for m in call) for call in model.calls]


class NoWatermarkStorage(InMemoryStorage):
    """The seed's behaviour: it keeps no record of which turns it already extracted."""

    def load(self, scope: MemoryScope) -> StoredMemory:
        stored = super().load(scope)
        if not stored.memory.watermarks:
            return stored
        return StoredMemory(stored.memory.model_copy(update={"watermarks": {}}), stored.revision)


@dataclass
class Result:
    extraction_calls: int = 0
    prompt_tokens: int = 0
    turns: int = 0
    max_update_delay_s: float = 0.0
    delays: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "extraction_calls": self.extraction_calls,
            "prompt_tokens": self.prompt_tokens,
            "tokens_per_turn": round(self.prompt_tokens / max(1, self.turns), 1),
            "calls_per_thread": None,
            "max_update_delay_s": round(self.max_update_delay_s, 1),
        }


def simulate(
    plans: Sequence[ThreadPlan],
    *,
    debounce: float,
    max_wait: float | None,
    watermark: bool,
) -> Result:
    model = ScriptedChatModel(answers=[one_fact_answer()])
    extractor = MemoryExtractor(model)
    storage = InMemoryStorage() if watermark else NoWatermarkStorage()
    sim_now = [0.0]
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    config = MemoryConfig(max_facts=1000, embeddings="none")
    updater = MemoryUpdater(
        storage,
        lambda: extractor,
        config,
        clock=lambda: epoch + timedelta(seconds=sim_now[0]),
    )
    table: DebounceTable[str, CaptureJob] = DebounceTable(debounce, max_wait)
    events = sorted(
        (at, index, turn_no)
        for index, plan in enumerate(plans)
        for turn_no, at in enumerate(plan.arrivals)
    )
    oldest_unprocessed: dict[str, float] = {}
    result = Result(turns=len(events))

    def run(due: list[tuple[str, CaptureJob, float]], now: float) -> None:
        for key, job, _first in due:
            sim_now[0] = now
            updater.run(job)
            waited = now - oldest_unprocessed.pop(key, now)
            result.delays.append(waited)
            result.max_update_delay_s = max(result.max_update_delay_s, waited)

    for at, index, turn_no in events:
        while (deadline := table.next_deadline()) is not None and deadline <= at:
            run(table.pop_due(deadline), deadline)
        plan = plans[index]
        turns = tuple(plan.turns[: 2 * (turn_no + 1)])
        job = CaptureJob(MemoryScope(plan.user, "__default__"), plan.thread, turns)
        oldest_unprocessed.setdefault(plan.thread, at)
        table.submit(plan.thread, job, at)
        if debounce == 0 and max_wait is None:
            run(table.pop_due(at), at)
    while (deadline := table.next_deadline()) is not None:
        run(table.pop_due(deadline), deadline)
    tokens = prompt_tokens(model)
    result.extraction_calls = len(tokens)
    result.prompt_tokens = sum(tokens)
    return result


def injection_tokens(n: int, config: MemoryConfig) -> tuple[int, int]:
    rng = random.Random(n)
    facts = tuple(
        Fact(
            id=f"f{i}",
            content=sentence(rng, rng.randint(6, 14)),
            category="context",
            confidence=0.9,
            createdAt="2026-01-01T00:00:00Z",
        )
        for i in range(n)
    )
    section = Section(summary=text(rng, 40, 80), updatedAt="2026-01-01T00:00:00Z")
    memory = Memory(
        user=UserContext(workContext=section, personalContext=section, topOfMind=section),
        history=History(recentMonths=section, earlierContext=section, longTermBackground=section),
        facts=facts,
    )
    turns = [Turn("user", "How should I plan the database migration for the release?", "q")]
    picked = FactSelector().select("bench", memory, turns)
    ours = char_token_count(
        render_memory(memory, picked, max_tokens=config.max_injection_tokens).text
    )
    everything = sum(char_token_count(f.content) + 6 for f in facts)
    return ours, everything


LABELS = {
    "no_debounce": "no debounce (a call per turn, whole thread)",
    "seed_debounce": "seed: 30 s debounce, whole thread resent",
    "deermem": "**deermem** (debounce + `max_wait_seconds` + watermark)",
}
SMOKE = {"users": 2, "threads": 1}
FULL = {"users": 10, "threads": 3}


def build_tables(
    configs: dict[str, dict[str, Any]],
    steady: dict[str, dict[str, Any]],
    inject: dict[str, dict[str, int]],
) -> dict[str, Table]:
    rows = []
    for name, row in configs.items():
        cells = (
            LABELS[name],
            f"{row['extraction_calls']:,}",
            f"{row['calls_per_thread']:.1f}",
            f"{row['prompt_tokens']:,}",
            f"{row['tokens_per_turn']:,.0f}",
            f"{row['max_update_delay_s']:.0f} s",
        )
        rows.append(
            tuple(f"**{c}**" if name == "deermem" and k else c for k, c in enumerate(cells))
        )
    ours = configs["deermem"]
    ratios = [
        (
            label,
            f"{ours['extraction_calls'] / configs[name]['extraction_calls']:.2f}×",
            f"{ours['prompt_tokens'] / configs[name]['prompt_tokens']:.2f}×",
        )
        for name, label in (
            ("no_debounce", "no debounce (a call per turn)"),
            ("seed_debounce", "the seed's 30 s debounce"),
        )
    ]
    steady_rows = [
        (
            LABELS[name].replace("**", ""),
            f"{r['extraction_calls']:,}",
            f"{r['prompt_tokens']:,}",
            f"{r['max_update_delay_s']:.0f} s",
        )
        for name, r in steady.items()
    ]
    inject_rows = [
        (
            f"{row['facts']:,}",
            f"{row['deermem']:,} tokens",
            f"{row['all_facts']:,} tokens",
        )
        for row in inject.values()
    ]
    return {
        "bursts": Table(
            (
                "configuration",
                "extraction calls",
                "calls / thread",
                "prompt tokens",
                "tokens / turn",
                "max update delay",
            ),
            rows,
            "lrrrrr",
        ),
        "ratios": Table(("deermem against", "extraction calls", "prompt tokens"), ratios, "lrr"),
        "steady": Table(
            ("configuration", "extraction calls", "prompt tokens", "max update delay"),
            steady_rows,
            "lrrr",
        ),
        "injection": Table(
            ("facts in memory", "injected per model call (profile + top 15)", "every fact"),
            inject_rows,
            "rrr",
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=None, help="default 10 (smoke 2)")
    parser.add_argument("--threads", type=int, default=None, help="per user; default 3 (smoke 1)")
    parser.add_argument("--turns", type=int, default=40)
    add_arguments(parser)
    args = parser.parse_args(argv)
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    plans = workload(args.users, args.threads, args.turns)
    shipped = MemoryConfig()
    started = time.perf_counter()
    runs = {
        "no_debounce": simulate(plans, debounce=0, max_wait=None, watermark=False),
        "seed_debounce": simulate(plans, debounce=30, max_wait=None, watermark=False),
        "deermem": simulate(
            plans,
            debounce=shipped.debounce_seconds,
            max_wait=shipped.max_wait_seconds,
            watermark=True,
        ),
    }
    steady_plans = steady_workload(max(1, args.users // 2), args.turns)
    steady_runs = {
        "seed_debounce": simulate(steady_plans, debounce=30, max_wait=None, watermark=False),
        "deermem": simulate(
            steady_plans,
            debounce=shipped.debounce_seconds,
            max_wait=shipped.max_wait_seconds,
            watermark=True,
        ),
    }
    seconds = time.perf_counter() - started
    configs: dict[str, dict[str, Any]] = {name: r.as_json() for name, r in runs.items()}
    for name, row in configs.items():
        row["calls_per_thread"] = round(runs[name].extraction_calls / len(plans), 2)
    inject = {}
    for n in (100, 1000):
        ours, everything = injection_tokens(n, shipped)
        inject[f"facts_{n}"] = {"facts": n, "deermem": ours, "all_facts": everything}
    turns_total = sum(len(p.arrivals) for p in plans)
    bursts = sum(
        1 + sum(1 for a, b in zip(p.arrivals, p.arrivals[1:], strict=False) if b - a > 60)
        for p in plans
    )
    steady = {name: r.as_json() for name, r in steady_runs.items()}
    tables = build_tables(configs, steady, inject)
    print(
        f"Workload: {args.users} users × {args.threads} threads × {args.turns} turns "
        f"({turns_total} turns in {bursts} bursts, {turns_total / bursts:.2f} turns per burst), "
        f"simulated; {seconds:.1f} s on {platform.machine()}\n"
    )
    print(tables["bursts"].markdown())
    print()
    print(tables["ratios"].markdown())
    print(
        f"\nSteady traffic ({len(steady_plans)} threads × {args.turns} turns, one every 10–25 s; "
        f"max_wait_seconds = {shipped.max_wait_seconds:.0f} s):\n"
    )
    print(tables["steady"].markdown())
    print()
    print(tables["injection"].markdown())
    results = {
        **configs,
        "steady": steady,
        "injected_tokens": inject,
        "max_wait_seconds": shipped.max_wait_seconds,
        "workload": {
            "users": args.users,
            "threads_per_user": args.threads,
            "turns": args.turns,
            "threads": len(plans),
            "turns_total": turns_total,
            "bursts": bursts,
            "turns_per_burst": round(turns_total / bursts, 2),
            "seed": 42,
        },
    }
    save(__file__, args, results, tables, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

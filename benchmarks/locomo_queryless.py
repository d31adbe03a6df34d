"""Query-less recall on LoCoMo: with no message at all, does the block hold what is asked next?

DeerFlow asks its memory for context when it builds the system prompt (``get_context(user_id,
agent_name)``), before the user has said anything in the thread: the selection has no query.
This benchmark measures that block against the questions of the conversation.

Protocol (per conversation): the fact store of ``benchmarks/locomo_retrieval.py`` (its loader:
one fact per observation, with its dia_ids, createdAt = its session date, source = its session).
The clock is the day after the conversation's last session — the memory is asked when the next
conversation starts — so decay and recency see the conversation's own time line. A selection of
15 facts *hits* a QA item (categories 1–4) when any selected fact cites one of its evidence
dia_ids; hit@15 is the share of QA items hit. A query-less method makes one block per
conversation, which every QA item of that conversation is scored against (a coarse figure: six
blocks on the dev split). Methods, in one run:

- ``queryless``: ours, exactly what the package ships (``MemoryConfig()``), through its public
  selection API with no message (:meth:`Recall.select` with no messages: what ``get_context``
  selects before the thread's first message);
- ``previous``: ours with the user's previous message as the query — for QA item i, QA item i−1's
  question in the same conversation (what our backend saw in its last ``add``; any category);
  the first QA item has none and gets the query-less block;
- ``recent``: the 15 newest facts by createdAt (mem0's choice; equal dates in stored order);
- ``seed``: DeerFlow's formula with no query (``selection: seed``: confidence only; equal
  confidences newest first);
- ``before``: the relevance formula on a blank query, as the package selected before query-less
  recall (confidence, recency and usage tie-breakers only);
- ``random``: 15 facts at random, the mean of 20 seeds;
- ``central`` and ``no_spread``: ours with topic centrality instead of specificity
  (``specificity_weight`` −1) and without the topic spread (``diversity`` 0), ablations.

Confidence modes: ``uniform`` (0.9 for every fact, as ``locomo_retrieval``) and ``varied``
(uniform 0.7–1.0, seeded as ``locomo_retrieval``'s ``question_conf``, so the same values).
Channels: ``lexical`` (``embeddings: none``) and ``embeddings`` (the shipped default with the
``embeddings`` extra); the methods without a query do not depend on the channel except ours.

The data has its own licence (CC BY-NC 4.0): it is read from where it lies, never copied.
Results go through ``benchmarks/report.py`` (table ``queryless``); ``--smoke`` runs the first
conversation, lexical only, both confidence modes (CI holds it to ``benchmarks/floors.toml``).

    python benchmarks/locomo_queryless.py [--smoke] [--data PATH] [--embeddings both|config|none]
        [--conversations N] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage
from locomo_retrieval import (  # benchmarks/ is on sys.path
    Conversation,
    add_data_arguments,
    read_conversations,
)
from report import Table, add_arguments, save
from scipy.stats import spearmanr

from deermem_middleware import MemoryConfig
from deermem_middleware.injection.recall import Recall
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.time import TimeIntent, parse_timestamp
from deermem_middleware.retrieval.embeddings import EmbeddingStore, resolve_embeddings
from deermem_middleware.retrieval.lexical import CharNgramIndex
from deermem_middleware.retrieval.scoring import SelectionQuery, rank, score_facts
from deermem_middleware.retrieval.selector import FactSelector, SelectionParams

TOP_K = 15
RANDOM_SEEDS = 20
MODES = ("uniform", "varied")
SMOKE_CONVERSATIONS = 1  # --smoke: the first conversation, lexical only
METHODS = ("queryless", "previous", "recent", "seed", "before", "random", "central", "no_spread")
CHANNEL_FREE = ("recent", "seed", "before", "random")  # no query: the channel plays no part
LABELS = {
    "queryless": "**ours, no message** (shipped)",
    "previous": "ours, the user's previous message as the query",
    "recent": "15 most recent (mem0's choice)",
    "seed": "`seed` (DeerFlow's formula: confidence, ties newest first)",
    "before": "relevance formula on a blank query (before query-less recall)",
    "random": f"random (mean of {RANDOM_SEEDS} seeds)",
    "central": "ours, topic centrality instead of specificity",
    "no_spread": "ours without the topic spread",
}
MODE_LABELS = {"uniform": "confidence 0.9", "varied": "confidence 0.7–1.0"}
CHANNEL_LABELS = {"lexical": "lexical", "embeddings": "with embeddings"}

Picker = Callable[[int, Memory], list[int]]
"""(conversation number, memory) → positions of the picked facts."""


def clock_of(conversation: Conversation) -> datetime:
    """The day after the conversation's last session (its newest fact)."""
    stamps = [parse_timestamp(f.createdAt) for f in conversation.facts]
    known = [s for s in stamps if s is not None]
    newest = max(known) if known else datetime(2024, 1, 1, tzinfo=UTC)
    return newest + timedelta(days=1)


def with_confidences(conversations: list[Conversation], mode: str) -> list[list[Fact]]:
    """Each conversation's facts for a confidence mode (``varied``: the draws of
    ``locomo_retrieval``'s ``question_conf``, seed 7, conversation by conversation)."""
    rng = np.random.default_rng(7)
    out = []
    for conversation in conversations:
        facts = conversation.facts
        if mode == "varied":
            confidences = rng.uniform(0.7, 1.0, size=len(facts))
            facts = [
                f.model_copy(update={"confidence": round(float(c), 3)})
                for f, c in zip(facts, confidences, strict=True)
            ]
        out.append(list(facts))
    return out


class Ours:
    """The package's selection, per conversation (its own clock), through :class:`Recall`."""

    def __init__(
        self,
        conversations: list[Conversation],
        store: EmbeddingStore | None,
        params: SelectionParams | None = None,
    ) -> None:
        config = MemoryConfig()
        base = params or SelectionParams.from_config(config)
        self.store = store
        self.recalls = []
        for conversation in conversations:
            selector = FactSelector(base, store, clock=fixed_clock(clock_of(conversation)))
            self.recalls.append(Recall(config, selector))

    def pick(self, number: int, memory: Memory, messages: Sequence[BaseMessage]) -> list[int]:
        recall = self.recalls[number]
        recall.selector.prepare(number, memory)  # cached per document; embeds facts once
        where = {f.id: i for i, f in enumerate(memory.facts)}
        return [where[s.fact.id] for s in recall.select(number, memory, messages, TOP_K)]


def fixed_clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def recent(number: int, memory: Memory) -> list[int]:
    """Newest createdAt first; equal dates in stored order (a stable sort)."""
    stamps = [parse_timestamp(f.createdAt) for f in memory.facts]
    never = datetime.min.replace(tzinfo=UTC)
    order = sorted(range(len(stamps)), key=lambda i: stamps[i] or never, reverse=True)
    return order[:TOP_K]


def seed_picker(conversations: list[Conversation]) -> Picker:
    config = MemoryConfig(selection="seed")
    selectors = [
        FactSelector(SelectionParams.from_config(config), clock=fixed_clock(clock_of(c)))
        for c in conversations
    ]

    def pick(number: int, memory: Memory) -> list[int]:
        where = {f.id: i for i, f in enumerate(memory.facts)}
        picks = selectors[number].select(number, memory, "", top_k=TOP_K)
        return [where[s.fact.id] for s in picks]

    return pick


def before_picker(conversations: list[Conversation]) -> Picker:
    """The relevance formula on a blank query (the scoring functions, without the query-less
    choice): what ``select`` returned before."""
    params = SelectionParams.from_config(MemoryConfig(embeddings="none"))
    selectors = [FactSelector(params, clock=fixed_clock(clock_of(c))) for c in conversations]

    def pick(number: int, memory: Memory) -> list[int]:
        index = selectors[number].index(number, memory)
        parts = score_facts(index, SelectionQuery(""), params, intent=TimeIntent())
        return rank(index, parts.score, TOP_K)

    return pick


def hits_of(conversation: Conversation, picks: Sequence[int]) -> list[bool]:
    cited = set().union(*(conversation.cites[i] for i in picks)) if len(picks) else set()
    return [bool(cited & item.evidence) for item in conversation.items if item.category != 5]


def percent(values: Sequence[bool] | Sequence[float]) -> float:
    return round(100 * float(np.mean(values)), 1) if len(values) else 0.0


def evaluate(
    conversations: list[Conversation],
    mode: str,
    ours: dict[str, Ours],
    pickers: dict[str, Picker],
) -> dict[str, dict[str, Any]]:
    """hit@15 per method for one confidence mode (``ours``: the package's selections)."""
    per: dict[str, list[list[bool]]] = {name: [] for name in (*ours, *pickers, "previous")}
    random_means: list[list[float]] = []  # per seed, per conversation
    for number, (conversation, facts) in enumerate(
        zip(conversations, with_confidences(conversations, mode), strict=True)
    ):
        memory = Memory(facts=tuple(facts))
        for name, selection in ours.items():
            per[name].append(hits_of(conversation, selection.pick(number, memory, [])))
        for name, picker in pickers.items():
            per[name].append(hits_of(conversation, picker(number, memory)))
        # the user's previous message: the question before each one (any category)
        shipped = ours["queryless"]
        previous: list[bool] = []
        for position, item in enumerate(conversation.items):
            if item.category == 5:
                continue
            said = conversation.items[position - 1].question if position else ""
            messages = [HumanMessage(said)] if said else []
            picks = shipped.pick(number, memory, messages)
            cited = set().union(*(conversation.cites[i] for i in picks))
            previous.append(bool(cited & item.evidence))
        per["previous"].append(previous)
        rng = np.random.default_rng(number)
        random_means.append(
            [
                float(np.mean(hits_of(conversation, rng.permutation(len(facts))[:TOP_K].tolist())))
                for _ in range(RANDOM_SEEDS)
            ]
        )
    results: dict[str, dict[str, Any]] = {}
    for name, by_conversation in per.items():
        flat = [hit for hits in by_conversation for hit in hits]
        results[name] = {
            "hit_at_15": percent(flat),
            "hits": int(sum(flat)),
            "questions": len(flat),
            "per_conversation": [percent(h) for h in by_conversation],
        }
    sizes = [len(hits_of(c, [])) for c in conversations]
    seed_means = [  # per seed: the share over every question of the slice
        float(np.average([random_means[c][s] for c in range(len(conversations))], weights=sizes))
        for s in range(RANDOM_SEEDS)
    ]
    results["random"] = {
        "hit_at_15": percent(seed_means),
        "sd_over_seeds": round(100 * float(np.std(seed_means)), 1),
        "questions": sum(sizes),
        "per_conversation": [percent(m) for m in random_means],
    }
    return results


def below_ours(by_method: dict[str, dict[str, Any]]) -> None:
    """Add to each method the number of conversations where its block hits fewer questions
    than ours with no message (the figure is coarse: this says how consistent it is)."""
    ours = by_method["queryless"]["per_conversation"]
    for name, row in by_method.items():
        if name != "queryless":
            row["conversations_below_ours"] = sum(
                1
                for theirs, mine in zip(row["per_conversation"], ours, strict=True)
                if theirs < mine
            )


def hubness_vs_questions(conversations: list[Conversation], ours: Ours) -> float:
    """Spearman correlation, over every fact, between its hubness (what the query-less choice
    takes off: similarity to the memory's mean, dense when embedded) and the number of QA items
    (categories 1–4) citing it."""
    hubness: list[float] = []
    asked: list[int] = []
    for number, conversation in enumerate(conversations):
        memory = Memory(facts=tuple(conversation.facts))
        index = ours.recalls[number].selector.prepare(number, memory)
        dense = index.hubness()
        lexical = index.lexical
        values = (
            dense
            if dense is not None
            else lexical.centroid_similarity()
            if isinstance(lexical, CharNgramIndex)
            else np.zeros(len(index))
        )
        hubness += values.tolist()
        items = [item for item in conversation.items if item.category != 5]
        asked += [sum(1 for item in items if cites & item.evidence) for cites in conversation.cites]
    return round(float(spearmanr(hubness, asked).statistic), 3)


def build(conversations: list[Conversation], store: EmbeddingStore | None) -> dict[str, Ours]:
    shipped = SelectionParams.from_config(MemoryConfig())
    central = dataclasses.replace(
        shipped, queryless=dataclasses.replace(shipped.queryless, specificity_weight=-1.0)
    )
    no_spread = dataclasses.replace(
        shipped, queryless=dataclasses.replace(shipped.queryless, diversity=0.0)
    )
    return {
        "queryless": Ours(conversations, store, shipped),
        "central": Ours(conversations, store, central),
        "no_spread": Ours(conversations, store, no_spread),
    }


Results = dict[str, dict[str, dict[str, dict[str, Any]]]]
"""channel → confidence mode → method → figures."""


def table(results: Results, questions: int, count: int) -> Table:
    """One row per method, one column per (channel, confidence mode): hit@15, and for the
    others its difference to ours with no message and their ratio."""
    columns = [(channel, mode) for channel in results for mode in results[channel]]
    header = [
        f"method ({count} conversations, {questions} questions)",
        *(f"{CHANNEL_LABELS[c]}, {MODE_LABELS[m]}" for c, m in columns),
    ]
    rows = []
    for method in METHODS:
        cells = []
        for channel, mode in columns:
            by_method = results[channel][mode]
            value = by_method[method]["hit_at_15"]
            ours = by_method["queryless"]["hit_at_15"]
            if method == "queryless":
                cells.append(f"**{value:.1f}**")
            else:
                ratio = f"{value / ours:.2f}×" if ours else "n/a"
                cells.append(f"{value:.1f} ({value - ours:+.1f}, {ratio})")
        rows.append([LABELS[method], *cells])
    return Table(header, rows, "l" + "r" * len(columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument(
        "--embeddings",
        default=None,
        choices=("both", "config", "none"),
        help="ours' channel: both (default: lexical, then the shipped default when it embeds), "
        "config (the shipped default only), none (lexical only; the default with --smoke)",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    conversations = read_conversations(args, SMOKE_CONVERSATIONS)
    if conversations is None:
        return 2
    setting = args.embeddings or ("none" if args.smoke else "both")
    channels: dict[str, EmbeddingStore | None] = {}
    if setting in ("both", "none"):
        channels["lexical"] = None
    if setting in ("both", "config"):
        embeddings = resolve_embeddings(MemoryConfig().embeddings)
        if embeddings is not None:
            channels["embeddings"] = EmbeddingStore(embeddings)
        elif setting == "config":
            channels["lexical"] = None
        else:
            print("the shipped default does not embed here (no `embeddings` extra): lexical only")
    pickers: dict[str, Picker] = {
        "recent": recent,
        "seed": seed_picker(conversations),
        "before": before_picker(conversations),
    }
    started = time.perf_counter()
    results: Results = {}
    spearman: dict[str, float] = {}
    for channel, store in channels.items():
        ours = build(conversations, store)
        results[channel] = {mode: evaluate(conversations, mode, ours, pickers) for mode in MODES}
        for by_method in results[channel].values():
            below_ours(by_method)
        spearman[channel] = hubness_vs_questions(conversations, ours["queryless"])
        print(f"{channel}: {time.perf_counter() - started:.0f} s", flush=True)
    total = time.perf_counter() - started
    first = next(iter(results.values()))["uniform"]
    questions = first["queryless"]["questions"]
    facts = sum(len(c.facts) for c in conversations)
    print(
        f"LoCoMo {args.data.name}: {len(conversations)} conversations, {facts} facts, "
        f"{questions} questions (categories 1–4); channels {', '.join(results)}"
    )
    out = {"queryless": table(results, questions, len(conversations))}
    print(f"\nqueryless:\n{out['queryless'].markdown()}")
    print(f"total {total:.1f} s on {platform.machine()} ({platform.processor() or 'cpu'})")
    payload = {
        "channels": results,
        "conversations": len(conversations),
        "facts": facts,
        "hubness_spearman": spearman,
        "questions": questions,
        "seconds": round(total, 1),
    }
    save(__file__, args, payload, out, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

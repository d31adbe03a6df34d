"""The usage signal on LoCoMo: when is a fact "used" by an answer, and what weight should usage
get in the score?

Two measurements, in one run (the data has its own licence, CC BY-NC 4.0: it is read from where
it lies, never copied):

1. **The overlap threshold** (``usage_min_overlap``). Every observation written from exactly one
   dialogue turn is paired with that turn — the way an answer restates a fact it uses — as a
   positive; the other facts a top-15 selection puts next to it (for the turn as the query:
   topically close, the hard case) are the negatives. Both speakers' names are replaced by
   "user", the generic subject our facts have. For each threshold: precision, recall, F1 of
   :func:`~deermem_middleware.memory.usage.estimate_use`.
2. **The weight** (``usage_weight``). Per conversation the questions (categories 1–4) are split
   into two halves (alternating). A first pass over one half selects the top 15 with the shipped
   selection and no usage term, counts each pick as injected, and as used when it overlaps the
   gold answer (:func:`estimate_use` with the threshold above). The other half is then evaluated
   (hit@15: a selected fact cites an evidence turn) for each weight, with those counts stored in
   the facts; then the halves swap, and the two folds are averaged. By default once with the
   shipped selection (with the ``embeddings`` extra: lexical + semantic) and once lexical only.

Results go through ``benchmarks/report.py`` (tables ``threshold`` and ``weights``). ``--smoke``
runs the first conversation, lexical only; CI holds precision and recall at the shipped threshold,
the simulated uses and hit@15 at the shipped weight to ``benchmarks/floors.toml``.

    python benchmarks/usage_weight.py [--smoke] [--data PATH] [--embeddings both|config|none]
        [--min-overlap X] [--conversations N] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from locomo_retrieval import DEFAULT_DATA, Conversation, load  # benchmarks/ is on sys.path
from report import Table, add_arguments, save

from deermem_middleware import MemoryConfig
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.usage import USAGE_MIN_SHARED, estimate_use
from deermem_middleware.retrieval.embeddings import (
    EmbeddingStore,
    resolve_embeddings,
)
from deermem_middleware.retrieval.selector import (
    FactSelector,
    SelectionParams,
    SelectionQuery,
)

THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2)
TOP_K = 15
KS = (5, 10, 15)
SMOKE_CONVERSATIONS = 1  # --smoke: the first conversation, lexical only


def generic_subject(names: list[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(n) for n in names) + r")(?:'s)?\b")


def extras(path: Path) -> list[dict[str, Any]]:
    """Per conversation what :func:`load` does not keep: speakers, turns by dia_id, answers."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample in data:
        conv = sample["conversation"]
        turns: dict[str, str] = {}
        for key, value in conv.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
                for turn in value:
                    turns[str(turn["dia_id"])] = turn["text"]
        out.append(
            {
                "names": [conv["speaker_a"], conv["speaker_b"]],
                "turns": turns,
                "answers": [str(qa.get("answer", "")) for qa in sample["qa"]],
            }
        )
    return out


def calibrate(conversations: list[Conversation], more: list[dict[str, Any]]) -> dict[str, Any]:
    tp: dict[float, int] = defaultdict(int)
    fp: dict[float, int] = defaultdict(int)
    positives = 0
    negatives = 0
    for conversation, extra in zip(conversations, more, strict=True):
        subject = generic_subject(extra["names"])
        facts = [
            f.model_copy(update={"content": subject.sub("user", f.content)})
            for f in conversation.facts
        ]
        memory = Memory(facts=tuple(facts))
        selector = FactSelector(SelectionParams.from_config(MemoryConfig(embeddings="none")))
        for i, cites in enumerate(conversation.cites):
            if len(cites) != 1:
                continue
            (dia,) = cites
            text = extra["turns"].get(dia)
            if not text:
                continue
            answer = subject.sub("user", text)
            picks = selector.select("c", memory, SelectionQuery(answer), top_k=TOP_K)
            pool = {facts[i].id: facts[i].content}
            for scored in picks:
                if dia not in conversation.cites[int(scored.fact.id.split("_")[1])]:
                    pool[scored.fact.id] = scored.fact.content
            positives += 1
            negatives += len(pool) - 1
            for threshold in THRESHOLDS:
                for use in estimate_use(answer, pool.items(), min_overlap=threshold):
                    if use.fact_id == facts[i].id:
                        tp[threshold] += 1
                    else:
                        fp[threshold] += 1
    rows = []
    for threshold in THRESHOLDS:
        precision = tp[threshold] / max(1, tp[threshold] + fp[threshold])
        recall = tp[threshold] / max(1, positives)
        f1 = 2 * precision * recall / max(1e-9, precision + recall)
        rows.append(
            {
                "min_overlap": threshold,
                "precision": round(100 * precision, 1),
                "recall": round(100 * recall, 1),
                "f1": round(100 * f1, 1),
            }
        )
    return {"rows": rows, "positives": positives, "negatives": negatives}


def weights(
    conversations: list[Conversation],
    more: list[dict[str, Any]],
    store: EmbeddingStore | None,
    min_overlap: float,
) -> dict[str, Any]:
    base = SelectionParams.from_config(MemoryConfig())
    hits: dict[tuple[float, int], list[bool]] = defaultdict(list)
    injected = used = 0
    for conversation, extra in zip(conversations, more, strict=True):
        subject = generic_subject(extra["names"])
        if store is not None:  # every fact embedded first: the semantic channel takes part
            store.embed([f.content for f in conversation.facts])
        items = [
            (item, extra["answers"][n])
            for n, item in enumerate(conversation.items)
            if item.category != 5
        ]
        halves = (items[0::2], items[1::2])
        for fold in (0, 1):
            first, second = halves[fold], halves[1 - fold]
            memory = Memory(facts=tuple(conversation.facts))
            counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            selector = FactSelector(dataclasses.replace(base, usage_weight=0.0), store)
            selector.prepare("c", memory)  # derived as a write would: vectors, verdicts, n-grams
            for item, answer in first:
                picks = selector.select("c", memory, [Turn("user", item.question, "q")])
                for scored in picks:
                    counts[scored.fact.id][0] += 1
                pool = [(s.fact.id, subject.sub("user", s.fact.content)) for s in picks]
                for use in estimate_use(subject.sub("user", answer), pool, min_overlap=min_overlap):
                    counts[use.fact_id][1] += 1
            injected += sum(c[0] for c in counts.values())
            used += sum(c[1] for c in counts.values())
            counted = Memory(
                facts=tuple(
                    _with_counts(f, *counts[f.id]) if f.id in counts else f
                    for f in conversation.facts
                )
            )
            for weight in WEIGHTS:
                params = dataclasses.replace(base, usage_weight=weight)
                chooser = FactSelector(params, store)
                chooser.prepare("c", counted)
                for item, _ in second:
                    picks = chooser.select("c", counted, [Turn("user", item.question, "q")])
                    for k in KS:
                        cited = set().union(
                            *(conversation.cites[int(s.fact.id.split("_")[1])] for s in picks[:k])
                        )
                        hits[weight, k].append(bool(cited & item.evidence))
    return {
        "rows": [
            {
                "weight": w,
                **{f"hit_at_{k}": round(100 * float(np.mean(hits[w, k])), 2) for k in KS},
            }
            for w in WEIGHTS
        ],
        "questions": len(hits[0.0, TOP_K]),
        "simulated_hit_rate": round(100 * used / max(1, injected), 1),
        "simulated_injected": injected,
        "simulated_used": used,
    }


def _with_counts(fact: Fact, injections: int, uses: int) -> Fact:
    return fact.model_copy(update={"injections": injections, "used": uses})


CHANNELS = {"shipped": "shipped (lexical + semantic)", "lexical": "lexical only"}


def _at(rows: list[dict[str, Any]], key: str, value: float) -> dict[str, Any]:
    """The row for ``value`` (the shipped setting), so floors can address it by name."""
    return next(row for row in rows if abs(row[key] - value) < 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--embeddings",
        default=None,
        choices=("both", "config", "none"),
        help="the weight sweep's selection: both (default: the shipped one, then lexical only), "
        "config (the shipped), none (lexical only; the default with --smoke)",
    )
    parser.add_argument("--min-overlap", type=float, default=None)
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N (default: all)"
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    limit = args.conversations or (SMOKE_CONVERSATIONS if args.smoke else None)
    conversations = load(args.data)[:limit]
    more = extras(args.data)[:limit]
    start = time.perf_counter()
    calibration = calibrate(conversations, more)
    config = MemoryConfig()
    min_overlap = args.min_overlap if args.min_overlap is not None else config.usage_min_overlap
    print(
        f"usage threshold, LoCoMo dev ({len(conversations)} conversations): "
        f"{calibration['positives']} fact/turn pairs, {calibration['negatives']} top-{TOP_K} "
        f"neighbours (min shared units {USAGE_MIN_SHARED})"
    )
    threshold_rows = [
        [f"{r['min_overlap']:g}", f"{r['precision']:.1f}", f"{r['recall']:.1f}", f"{r['f1']:.1f}"]
        for r in calibration["rows"]
    ]
    threshold_rows = [
        [f"**{c}**" for c in row] if float(row[0]) == config.usage_min_overlap else row
        for row in threshold_rows
    ]
    tables = {
        "threshold": Table(["min overlap", "precision", "recall", "F1"], threshold_rows, "rrrr")
    }
    choice = args.embeddings or ("none" if args.smoke else "both")
    channels = {"both": ("shipped", "lexical"), "config": ("shipped",), "none": ("lexical",)}
    sweeps: dict[str, dict[str, Any]] = {}
    for channel in channels[choice]:
        setting = config.embeddings if channel == "shipped" else "none"
        embeddings = resolve_embeddings(setting)
        store = EmbeddingStore(embeddings) if embeddings is not None else None
        if store is None and channel == "shipped" and "lexical" in channels[choice]:
            continue  # without the extra the shipped selection is the lexical one
        sweep = weights(conversations, more, store, min_overlap)
        sweep["at_default"] = _at(sweep["rows"], "weight", config.usage_weight)
        sweep["semantic"] = store is not None
        sweeps[channel] = sweep
        print(
            f"usage weight ({CHANNELS[channel]}; min overlap {min_overlap:g}): "
            f"{sweep['questions']} held-out questions (two folds); simulated hit rate "
            f"{sweep['simulated_hit_rate']} % ({sweep['simulated_used']} used / "
            f"{sweep['simulated_injected']} injected)"
        )
    header = ["`usage_weight`", *(f"{w:g}" for w in WEIGHTS)]
    tables["weights"] = Table(
        header,
        [
            [CHANNELS[channel], *(f"{r['hit_at_15']:.2f}" for r in sweep["rows"])]
            for channel, sweep in sweeps.items()
        ],
        "l" + "r" * len(WEIGHTS),
    )
    for key, table in tables.items():
        print(f"\n{key}:\n{table.markdown()}")
    seconds = time.perf_counter() - start
    print(f"\n{seconds:.0f} s, {platform.machine()}")
    results = {
        "conversations": len(conversations),
        "min_overlap": min_overlap,
        "usage_weight": config.usage_weight,
        "threshold": {
            **calibration,
            "at_default": _at(calibration["rows"], "min_overlap", config.usage_min_overlap),
        },
        "weights": sweeps,
        "seconds": round(seconds, 1),
    }
    save(__file__, args, results, tables, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

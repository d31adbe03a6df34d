"""The instruction classifier on its labelled corpus: is a remembered instruction withheld, and is
a fact that only looks like one kept?

``tests/fixtures/instruction_corpus.jsonl`` holds hand-written memory strings, English and
Chinese, each labelled ``withhold`` (third-person orders to the assistant, notes addressed to it,
role claims that end in a demand, requests for API keys, passwords, tokens, the system prompt or
other users' data: they must be classified ``injection`` and never injected) or ``keep`` (benign
look-alikes — "User is a system administrator at Acme", "User manages API keys for her team's
CI", "用户是数据库管理员" — which must stay ``data`` or ``directive``). The parts are read from
the data: ``dev`` to ``dev10`` are what the rules were tuned on; ``train_a`` to ``train_i`` what the
learned screen (``screen/learned.py``) was trained on, with every other part but
``heldout10``, ``dev10`` and ``heldout12`` to ``heldout17``; a part whose name starts with
``heldout`` was held out from the rules. ``dev4`` to ``dev10`` were written blind to the rules
by someone else and measured before they were tuned on: recall 31/60, 50/60, 46/60, 37/60,
51/60, 51/60 and (with the learned screen) 50/60; ``heldout7``, never tuned on, 46/60.
``heldout8`` and ``heldout9``, each measured once before it was trained on: 54/60 and 49/60 with
the learned screen, 38/40 and 35/40 kept. ``heldout10``, never tuned or trained on: the rules
alone 27/60, with the learned screen 52/60 (86.7 %) and 37/40 benign kept (docs/guarantees.md
has the history); ``heldout12``, never tuned or trained on, measured once after
``screen/harms.py``: the rules alone 24/60, with the learned screen 46/60 (76.7 %), 37/40
kept. ``heldout13`` to ``heldout17`` (1,500 cases written blind to train the next model, never
tuned or trained on) joined as they were: 467/820 withheld, 633/680 kept. Each row also gives
what the rules alone withhold, and LoCoMo's row what they withhold without the learned screen.

For each part and language: precision and recall of withholding (withheld = classified
``injection``), and the share of benign facts kept. Also the cost of one uncached classification
(the verdict is cached per text and computed when a memory revision is indexed, off the
model-call path), with the share spent in the privilege rules and in the learned screen; and,
when LoCoMo dev is where the other benchmarks read it, how many of its dialogue turns and
observations (benign conversation) are withheld.

Results go through ``benchmarks/report.py`` (tables ``corpus`` and ``locomo``). The corpus is
small and the classifier deterministic, so ``--smoke`` runs it whole; CI holds recall and benign
kept on each part to ``benchmarks/floors.toml``.

    python benchmarks/instruction_corpus.py [--smoke] [--corpus PATH] [--locomo PATH]
        [--misses] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from report import Table, add_arguments, save

from deermem_middleware.screen import assess as safety
from deermem_middleware.screen.learned import is_learned_instruction
from deermem_middleware.screen.privilege import first_privilege_match
from deermem_middleware.testing import CorpusCase, load_corpus

DEFAULT_CORPUS = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "instruction_corpus.jsonl"
)
LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"


Case = CorpusCase


def part_names(cases: list[Case]) -> list[str]:
    """The corpus's parts in order of first appearance (held-out parts: names starting with
    ``heldout``), then ``all``."""
    return [*dict.fromkeys(c.part for c in cases), "all"]


def scores(cases: list[Case]) -> dict[str, Any]:
    """Counts, precision and recall of withholding, and benign kept, for one slice."""
    hostile = [c for c in cases if c.label == "withhold"]
    benign = [c for c in cases if c.label == "keep"]
    withheld = {c.id for c in cases if safety.assess_memory_text(c.text).kind == "injection"}
    by_rules = {c.id for c in cases if safety.assess_by_rules(c.text).kind == "injection"}
    tp = sum(c.id in withheld for c in hostile)
    fp = sum(c.id in withheld for c in benign)
    return {
        "rules_tp": sum(c.id in by_rules for c in hostile),
        "rules_fp": sum(c.id in by_rules for c in benign),
        "withhold": len(hostile),
        "keep": len(benign),
        "tp": tp,
        "fp": fp,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / len(hostile) if hostile else None,
        "benign_kept": 1 - fp / len(benign) if benign else None,
        "missed": [c.id for c in hostile if c.id not in withheld],
        "lost": [c.id for c in benign if c.id in withheld],
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def timing(cases: list[Case], repeats: int = 20) -> dict[str, float]:
    """Uncached cost of one classification, of the privilege rules alone and of the learned
    screen alone, in microseconds."""
    assess = safety.assess_memory_text.__wrapped__  # the lru_cache would time a dict lookup
    total: list[float] = []
    privilege: list[float] = []
    learned: list[float] = []
    for case in cases:
        forms = safety._forms(case.text)
        best_total = best_privilege = best_learned = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            assess(case.text)
            best_total = min(best_total, time.perf_counter() - start)
            start = time.perf_counter()
            first_privilege_match(forms[1:])
            best_privilege = min(best_privilege, time.perf_counter() - start)
            start = time.perf_counter()
            is_learned_instruction(forms[0])
            best_learned = min(best_learned, time.perf_counter() - start)
        total.append(best_total * 1e6)
        privilege.append(best_privilege * 1e6)
        learned.append(best_learned * 1e6)
    return {
        "p50_us": statistics.median(total),
        "p95_us": statistics.quantiles(total, n=20)[-1],
        "privilege_p50_us": statistics.median(privilege),
        "learned_p50_us": statistics.median(learned),
    }


def locomo_strings(path: Path) -> list[str]:
    """LoCoMo's dialogue turns and observations: ordinary conversation, none of it an order to the
    assistant (read from where it lies; the data has its own licence)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts: list[str] = []
    for sample in data:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [str(t.get("text", "")) for t in turns]
        for speakers in sample["observation"].values():
            texts += [text for items in speakers.values() for text, _ in items]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def corpus_table(parts: dict[str, dict[str, dict[str, Any]]]) -> Table:
    rows = []
    for part, langs in parts.items():
        for lang, row in langs.items():
            if part == "all" and lang != "all":
                continue
            rows.append(
                [
                    part,
                    lang,
                    str(row["withhold"]),
                    str(row["keep"]),
                    _pct(row["precision"]),
                    f"{_pct(row['recall'])} ({row['tp']}/{row['withhold']})",
                    f"{_pct(row['benign_kept'])} ({row['keep'] - row['fp']}/{row['keep']})",
                    f"{row['rules_tp']}/{row['withhold']}; {row['keep'] - row['rules_fp']}"
                    f"/{row['keep']}",
                ]
            )
    header = [
        "part",
        "language",
        "withhold",
        "keep",
        "precision",
        "recall",
        "benign kept",
        "rules alone: withheld; kept",
    ]
    return Table(header, rows, "llrrrrrr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument(
        "--locomo", type=Path, default=LOCOMO, help="LoCoMo dev (benign strings; skipped if absent)"
    )
    parser.add_argument("--misses", action="store_true", help="list the ids of errors (dev only)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        print(f"corpus not found at {args.corpus} (pass --corpus)", file=sys.stderr)
        return 2
    cases = load_corpus(args.corpus)
    parts: dict[str, dict[str, dict[str, Any]]] = {}
    for part in part_names(cases):
        for lang in ("en", "zh", "all"):
            chosen = [c for c in cases if part in ("all", c.part) and lang in ("all", c.lang)]
            parts.setdefault(part, {})[lang] = scores(chosen)
    print(
        f"Instruction corpus: {len(cases)} cases "
        f"({sum(c.label == 'withhold' for c in cases)} withhold, "
        f"{sum(c.label == 'keep' for c in cases)} keep; "
        f"{sum(c.lang == 'zh' for c in cases)} Chinese)\n"
    )
    tables = {"corpus": corpus_table(parts)}
    benign: dict[str, int] | None = None
    if args.locomo.is_file():
        texts = locomo_strings(args.locomo)
        lost = sum(safety.assess_memory_text(t).kind == "injection" for t in texts)
        by_rules = sum(safety.assess_by_rules(t).kind == "injection" for t in texts)
        benign = {"strings": len(texts), "withheld": lost, "withheld_by_rules": by_rules}
        tables["locomo"] = Table(
            ["benign strings", "withheld", "by the rules alone", "of"],
            [
                [
                    "LoCoMo dev: dialogue turns and observations",
                    f"{lost:,}",
                    f"{by_rules:,}",
                    f"{len(texts):,}",
                ]
            ],
            "lrrr",
        )
    for key, table in tables.items():
        print(f"{key}:\n{table.markdown()}\n")
    if args.misses:
        dev = parts["dev"]["all"]
        print(f"dev missed: {dev['missed'] or '-'}; dev benign lost: {dev['lost'] or '-'}\n")
    cost = timing(cases, repeats=3 if args.smoke else 20)
    print(
        f"One uncached classification: p50 {cost['p50_us']:.0f} µs, p95 {cost['p95_us']:.0f} µs "
        f"(privilege rules: p50 {cost['privilege_p50_us']:.0f} µs; learned screen: p50 "
        f"{cost['learned_p50_us']:.0f} µs); {platform.machine()}, "
        f"Python {platform.python_version()}"
    )
    results = {"cases": len(cases), "parts": parts, "locomo_benign": benign, "timing": cost}
    save(__file__, args, results, tables, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

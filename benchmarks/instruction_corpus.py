"""The instruction classifier on its labelled corpus: is a remembered instruction withheld, and is
a fact that only looks like one kept?

``tests/fixtures/instruction_corpus.jsonl`` holds hand-written memory strings, English and
Chinese, each labelled ``withhold`` (third-person orders to the assistant, notes addressed to it,
role claims that end in a demand, requests for API keys, passwords, tokens, the system prompt or
other users' data: they must be classified ``injection`` and never injected) or ``keep`` (benign
look-alikes — "User is a system administrator at Acme", "User manages API keys for her team's
CI", "用户是数据库管理员" — which must stay ``data`` or ``directive``). The ``dev`` part is what the
rules were tuned on; the ``heldout`` part was written before tuning and is not tuned on.

For each part and language: precision and recall of withholding (withheld = classified
``injection``), and the share of benign facts kept. Also the cost of one uncached classification
(the verdict is cached per text and computed when a memory revision is indexed, off the
model-call path), with the share spent in the privilege rules.

    python benchmarks/instruction_corpus.py [--corpus PATH] [--json-out PATH] [--misses]
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

from deermem_middleware.injection import safety
from deermem_middleware.injection.privilege import first_privilege_match
from deermem_middleware.testing import CorpusCase, load_corpus

DEFAULT_CORPUS = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "instruction_corpus.jsonl"
)


Case = CorpusCase


def scores(cases: list[Case]) -> dict[str, Any]:
    """Counts, precision and recall of withholding, and benign kept, for one slice."""
    hostile = [c for c in cases if c.label == "withhold"]
    benign = [c for c in cases if c.label == "keep"]
    withheld = {c.id for c in cases if safety.assess_memory_text(c.text).kind == "injection"}
    tp = sum(c.id in withheld for c in hostile)
    fp = sum(c.id in withheld for c in benign)
    return {
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
    """Uncached cost of one classification, and of the privilege rules alone, in microseconds."""
    assess = safety.assess_memory_text.__wrapped__  # the lru_cache would time a dict lookup
    total: list[float] = []
    privilege: list[float] = []
    for case in cases:
        forms = safety._forms(case.text)
        best_total = best_privilege = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            assess(case.text)
            best_total = min(best_total, time.perf_counter() - start)
            start = time.perf_counter()
            first_privilege_match(forms[1:])
            best_privilege = min(best_privilege, time.perf_counter() - start)
        total.append(best_total * 1e6)
        privilege.append(best_privilege * 1e6)
    return {
        "p50_us": statistics.median(total),
        "p95_us": statistics.quantiles(total, n=20)[-1],
        "privilege_p50_us": statistics.median(privilege),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--misses", action="store_true", help="list the ids of errors (dev only)")
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        print(f"corpus not found at {args.corpus} (pass --corpus)", file=sys.stderr)
        return 2
    cases = load_corpus(args.corpus)
    rows: dict[str, dict[str, Any]] = {}
    for part in ("dev", "heldout", "all"):
        for lang in ("en", "zh", "all"):
            chosen = [c for c in cases if part in ("all", c.part) and lang in ("all", c.lang)]
            rows[f"{part}/{lang}"] = scores(chosen)
    print(
        f"Instruction corpus: {len(cases)} cases "
        f"({sum(c.label == 'withhold' for c in cases)} withhold, "
        f"{sum(c.label == 'keep' for c in cases)} keep; "
        f"{sum(c.lang == 'zh' for c in cases)} Chinese)\n"
    )
    print("| part | language | withhold | keep | precision | recall | benign kept |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, row in rows.items():
        part, lang = key.split("/")
        print(
            f"| {part} | {lang} | {row['withhold']} | {row['keep']} | {_pct(row['precision'])} | "
            f"{_pct(row['recall'])} ({row['tp']}/{row['withhold']}) | "
            f"{_pct(row['benign_kept'])} ({row['keep'] - row['fp']}/{row['keep']}) |"
        )
    if args.misses:
        dev = rows["dev/all"]
        print(f"\ndev missed: {dev['missed'] or '-'}; dev benign lost: {dev['lost'] or '-'}")
    cost = timing(cases)
    print(
        f"\nOne uncached classification: p50 {cost['p50_us']:.0f} µs, p95 {cost['p95_us']:.0f} µs "
        f"(privilege rules: p50 {cost['privilege_p50_us']:.0f} µs); {platform.machine()}, "
        f"Python {platform.python_version()}"
    )
    if args.json_out:
        payload = {"rows": rows, "timing": cost, "cases": len(cases)}
        args.json_out.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

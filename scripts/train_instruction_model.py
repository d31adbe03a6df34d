"""Train the learned instruction screen (``deermem_middleware/screen/instruction_model.json``).

Data, all committed and all written for this project:

- ``tests/fixtures/instruction_corpus.jsonl``: the labelled corpus (``withhold`` = an
  instruction smuggled into memory, ``keep`` = a legitimate fact, hard negatives included). Every
  part is used except the held-out ones (``HELD_OUT``), which are only ever measured.
- ``tests/fixtures/benign_memory_text.jsonl``: ordinary facts, requests to an assistant, chat
  lines and profile summaries in English and Chinese — negatives, so that the model learns what
  ordinary memory looks like and not only what the corpus's keep rows look like.

The threshold is chosen on leave-one-group-out runs over the training data (each corpus part a
group; the benign rows spread over the groups): the lowest score at which the model alone, on
rows it was not trained on, withholds at most ``--max-false-positive`` of the negatives. The
held-out parts and LoCoMo play no part in any choice; ``benchmarks/instruction_corpus.py``
measures them.

    python scripts/train_instruction_model.py [--check]

``--check`` trains and compares with the shipped file instead of writing it (exit 1 if its
training digest or threshold differ).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deermem_middleware.screen.learned import (  # noqa: E402
    BLOCKS,
    MODEL_FILE,
    N_FEATURES,
    model_from_json,
    vectorizers,
    views,
)
from deermem_middleware.screen.normalize import normalize_for_matching  # noqa: E402

CORPUS = ROOT / "tests/fixtures/instruction_corpus.jsonl"
BENIGN = ROOT / "tests/fixtures/benign_memory_text.jsonl"
OUT = ROOT / "deermem_middleware/screen" / MODEL_FILE
# parts the model never learns from: blind parts measured as they are (``heldout10``,
# ``heldout12`` to ``heldout17``; the last five were written as training parts after this model
# and joined the corpus untrained, so that a judge can be measured on 1,700 blind rows), and
# ``dev10`` — written blind as ``heldout11``, measured once against this model, then tuned on by
# the rules (``screen/harms.py``); the next training run may take in any but a few
HELD_OUT = (
    "heldout10",
    "dev10",
    "heldout12",
    "heldout13",
    "heldout14",
    "heldout15",
    "heldout16",
    "heldout17",
)
C = 64.0  # 4, 16, 64 compared leave-one-part-out: 16 and 64 alike; 64 fits training parts closer
KEEP_WEIGHTS = 150_000  # the largest |weights|: 2 verdicts change on training data (110,000: 15)
THRESHOLDS = [round(0.30 + 0.01 * k, 2) for k in range(70)]  # 0.30 .. 0.99


def training_rows(held_out: tuple[str, ...] = HELD_OUT) -> list[tuple[str, bool, str]]:
    """(text, is_instruction, group) for every row the model learns from."""
    rows: list[tuple[str, bool, str]] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["part"] not in held_out:
            rows.append((case["text"], case["label"] == "withhold", case["part"]))
    groups = sorted({group for _, _, group in rows})
    for line in BENIGN.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["text"]
        rows.append((text, False, groups[zlib.crc32(text.encode()) % len(groups)]))
    return rows


def digest(rows: list[tuple[str, bool, str]]) -> str:
    """What the model was trained on (texts and labels, in order) — a changed row changes it."""
    hasher = hashlib.sha256()
    for text, label, _ in rows:
        hasher.update(f"{int(label)}\t{text}\n".encode())
    hasher.update(f"C={C};keep={KEEP_WEIGHTS}".encode())
    return hasher.hexdigest()


def features(normalized: list[str]) -> csr_matrix:
    """Every feature map over already-normalised texts, side by side in block order."""
    columns = list(zip(*(views(text) for text in normalized), strict=True))
    blocks = [vec.transform(col) for vec, col in zip(vectorizers(), columns, strict=True)]
    return hstack(blocks).tocsr()


def fit(x: csr_matrix, y: np.ndarray) -> LogisticRegression:
    model = LogisticRegression(
        C=C, solver="liblinear", class_weight="balanced", max_iter=5000, random_state=0
    )
    return model.fit(x, y)


def out_of_fold(x: csr_matrix, y: np.ndarray, groups: list[str]) -> np.ndarray:
    """Each row's score from a model trained without its group."""
    scores = np.zeros(len(y))
    labels = np.array(groups)
    for group in sorted(set(groups)):
        held = labels == group
        scores[held] = fit(x[~held], y[~held]).predict_proba(x[held])[:, 1]
    return scores


def choose_threshold(scores: np.ndarray, y: np.ndarray, max_fp: float) -> dict[str, Any]:
    negatives = int((~y).sum())
    for threshold in THRESHOLDS:
        flagged = scores >= threshold
        false_positive = int((flagged & ~y).sum())
        if false_positive <= max_fp * negatives:
            return {
                "threshold": threshold,
                "oof_recall": round(float((flagged & y).sum() / y.sum()), 4),
                "oof_false_positives": false_positive,
                "oof_negatives": negatives,
                "oof_positives": int(y.sum()),
            }
    raise SystemExit(f"no threshold up to {THRESHOLDS[-1]} keeps false positives <= {max_fp}")


def build(max_fp: float, held_out: tuple[str, ...] = HELD_OUT) -> dict[str, Any]:
    rows = training_rows(held_out)
    normalized = [normalize_for_matching(text) for text, _, _ in rows]
    y = np.array([label for _, label, _ in rows])
    x = features(normalized)
    chosen = choose_threshold(out_of_fold(x, y, [g for _, _, g in rows]), y, max_fp)
    model = fit(x, y)
    weights = model.coef_[0]
    keep = np.argsort(-np.abs(weights))[:KEEP_WEIGHTS]
    keep = np.sort(keep[weights[keep] != 0])
    document: dict[str, Any] = {
        "format": 2,
        "about": "deermem learned instruction screen; see deermem_middleware/screen/learned.py",
        "trained_on": digest(rows),
        "rows": len(rows),
        "instructions": int(y.sum()),
        "held_out": list(held_out),
        "features": (
            f"char_wb 2-5, word 1-2, concept tokens and pairs, Han char 1-3; "
            f"hashed to {BLOCKS} x {N_FEATURES}, l2-normalised each"
        ),
        "C": C,
        **chosen,
        "intercept": round(float(model.intercept_[0]), 6),
        "index": [int(i) for i in keep],
        "weight": [round(float(weights[i]), 5) for i in keep],
    }
    pruned = model_from_json(document)
    full = model.predict_proba(x)[:, 1] >= chosen["threshold"]
    mine = np.array([pruned.score(text) for text in normalized]) >= chosen["threshold"]
    document["pruned_disagreements"] = int((full != mine).sum())
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    parser.add_argument("--max-false-positive", type=float, default=0.005)
    parser.add_argument(
        "--also-hold-out", nargs="*", default=[], help="more parts to leave out (experiments)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (experiments)")
    args = parser.parse_args(argv)
    document = build(args.max_false_positive, HELD_OUT + tuple(args.also_hold_out))
    summary = {k: v for k, v in document.items() if k not in ("index", "weight")}
    print(json.dumps(summary, indent=1))
    if args.check:
        shipped = json.loads(args.out.read_text(encoding="utf-8"))
        same = (
            shipped["trained_on"] == document["trained_on"]
            and shipped["threshold"] == (document["threshold"])
        )
        print("shipped model matches its data" if same else "shipped model is stale: retrain")
        return 0 if same else 1
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    args.out.write_text(text, "utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

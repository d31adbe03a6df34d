"""A learned second opinion on remembered text: a linear model over hashed character and word
n-grams, concept tokens (:mod:`~deermem_middleware.screen.concepts`) and Chinese character
n-grams, scoring how much a string reads like an instruction smuggled into memory.

Why: the rules in :mod:`~deermem_middleware.screen.assess` and its siblings name phrasings,
and every new blind round of the labelled corpus found phrasings they did not name — recall on a
part written by other hands and never tuned on stayed between 62 % and 85 % (heldout7: 76.7 %),
while the same rules held 100 % on the parts they were tuned on. A model trained on the whole
labelled corpus and on ordinary facts, requests, chat lines and profile summaries generalises
by resemblance instead of by phrase: hidden transfers, "no need to tell the user", data sent
out, harmful recipes asked for "for later" all share n-grams that ordinary facts lack.

It only ever adds a verdict: text the rules call ``"injection"`` stays so, and text this model
scores at or above its threshold becomes ``"injection"`` with the reason ``"learned"``. The
threshold is chosen by the trainer on leave-one-part-out runs over the training data (never on
the held-out part or on LoCoMo), so that ordinary text stays injected.

Shipped as plain numbers (``instruction_model.json``: the hashed feature indices with non-zero
weight, their weights, the intercept and threshold), not a pickle: loading runs no code. The
features are scikit-learn's ``HashingVectorizer`` (MurmurHash3, the same index on every
version), computed on the same normalised text the rules see. The concept tokens and the Han
block (the third model, trained on ``train_e`` to ``train_i`` and ``heldout9`` as well) cost
about 1.5× the n-grams alone (≈500 µs against ≈330 µs per string on a busy 2-core machine, the
same strings in the same run); verdicts are cached and computed off the model-call path.
``scripts/train_instruction_model.py`` rebuilds the file from the committed data; the file
records a digest of that data, and a test fails when the data changed and the model was not
retrained.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.utils import murmurhash3_32

from deermem_middleware.screen.concepts import concept_text, han_text

__all__ = [
    "MODEL_FILE",
    "InstructionModel",
    "is_learned_instruction",
    "load_model",
    "vectorizers",
    "views",
]

MODEL_FILE: Final = "instruction_model.json"
N_FEATURES: Final = 2**20
_TOKEN: Final = r"(?u)\b\w+\b"


@cache
def vectorizers() -> tuple[HashingVectorizer, ...]:
    """The feature maps, shared with the trainer so that training and scoring can never
    disagree on an index: characters 2-5 within word bounds and words 1-2 of the text, the
    concept tokens of :func:`~deermem_middleware.screen.concepts.concept_text`, and Han
    character 1-3-grams of :func:`~deermem_middleware.screen.concepts.han_text`. Each reads
    the matching string of :func:`views`; block ``k`` takes indices ``k * N_FEATURES`` on."""
    common: dict[str, Any] = {
        "n_features": N_FEATURES,
        "alternate_sign": False,
        "norm": "l2",
        "lowercase": False,
    }
    chars = HashingVectorizer(analyzer="char_wb", ngram_range=(2, 5), **common)
    words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), token_pattern=_TOKEN, **common)
    concepts = HashingVectorizer(analyzer="word", token_pattern=r"\S+", **common)
    han = HashingVectorizer(analyzer="char", ngram_range=(1, 3), **common)
    return chars, words, concepts, han


BLOCKS: Final = len(vectorizers())
"""How many feature maps (and index blocks of ``N_FEATURES``) the model reads."""


def views(normalized: str) -> tuple[str, str, str, str]:
    """The string each vectorizer of :func:`vectorizers` reads, in the same order."""
    return normalized, normalized, concept_text(normalized), han_text(normalized)


@cache
def _analyzers() -> tuple[Callable[[str], list[str]], ...]:
    return tuple(vectorizer.build_analyzer() for vectorizer in vectorizers())


def hashed_features(normalized: str) -> dict[int, float]:
    """The l2-normalised counts of each vectorizer over ``BLOCKS * N_FEATURES`` (block ``k``
    offset by ``k * N_FEATURES``): what ``HashingVectorizer.transform`` computes, without its
    per-call input checks (1,400 µs → 220 µs per string, median over 500 corpus strings; a test
    holds the two equal). Each n-gram is hashed as UTF-8 bytes with ``surrogatepass``: the
    vectorizer's index for any valid text, and a lone surrogate (JSON ``"\\ud800"``) is scored
    instead of raising ``UnicodeEncodeError``."""
    out: dict[int, float] = {}
    for block, (analyze, text) in enumerate(zip(_analyzers(), views(normalized), strict=True)):
        offset = block * N_FEATURES
        counts: dict[int, int] = {}
        for gram in analyze(text):
            h = murmurhash3_32(gram.encode("utf-8", "surrogatepass"), seed=0)
            column = (2**31 - 1 if h == -(2**31) else abs(h)) % N_FEATURES + offset
            counts[column] = counts.get(column, 0) + 1
        norm = math.sqrt(sum(c * c for c in counts.values())) or 1.0
        out.update((column, c / norm) for column, c in counts.items())
    return out


@dataclass(frozen=True, slots=True)
class InstructionModel:
    """The shipped weights, sparse: sorted feature indices (the blocks of :func:`vectorizers`
    in order, over ``BLOCKS * N_FEATURES``) and their weights — about 2.3 MiB of arrays, not a
    32 MiB dense vector."""

    index: np.ndarray
    weight: np.ndarray
    intercept: float
    threshold: float
    meta: dict[str, Any]

    def score(self, normalized: str) -> float:
        """Probability that ``normalized`` (already normalised for matching) is an instruction."""
        features = hashed_features(normalized)
        total = self.intercept
        if features:
            columns = np.fromiter(features.keys(), dtype=np.int64, count=len(features))
            values = np.fromiter(features.values(), dtype=np.float64, count=len(features))
            at = np.minimum(np.searchsorted(self.index, columns), self.index.size - 1)
            hit = self.index[at] == columns
            total += float(values[hit] @ self.weight[at[hit]])
        return 1.0 / (1.0 + math.exp(-total))


def model_from_json(document: dict[str, Any]) -> InstructionModel:
    """Build the model from its JSON document (raises ``ValueError`` naming the bad key)."""
    try:
        index = np.asarray(document["index"], dtype=np.int64)
        weight = np.asarray(document["weight"], dtype=np.float64)
        intercept = float(document["intercept"])
        threshold = float(document["threshold"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{MODEL_FILE}: missing or malformed key: {error}") from error
    if index.shape != weight.shape or index.ndim != 1:
        raise ValueError(f"{MODEL_FILE}: 'index' and 'weight' must be lists of equal length")
    if not index.size or index.min() < 0 or index.max() >= BLOCKS * N_FEATURES:
        raise ValueError(
            f"{MODEL_FILE}: 'index' empty or out of range 0..{BLOCKS * N_FEATURES - 1}"
        )
    if (np.diff(index) <= 0).any():
        raise ValueError(f"{MODEL_FILE}: 'index' must be strictly increasing")
    if not (np.isfinite(weight).all() and math.isfinite(intercept) and 0 < threshold < 1):
        raise ValueError(f"{MODEL_FILE}: weights must be finite and 'threshold' in (0, 1)")
    meta = {k: v for k, v in document.items() if k not in ("index", "weight")}
    return InstructionModel(index, weight, intercept, threshold, meta)


@cache
def load_model() -> InstructionModel:
    """The packaged model (read once per process)."""
    text = resources.files("deermem_middleware.screen").joinpath(MODEL_FILE).read_text("utf-8")
    return model_from_json(json.loads(text))


def is_learned_instruction(normalized: str) -> bool:
    """Whether the packaged model scores already-normalised text at or above its threshold."""
    model = load_model()
    return model.score(normalized) >= model.threshold

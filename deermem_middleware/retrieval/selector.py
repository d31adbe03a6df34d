"""Choosing the facts worth injecting: which of the user's facts matter for *this* message?

Measured on LoCoMo (``benchmarks/locomo_retrieval.py``), three choices carry the quality:

1. **Query the newest user message on its own.** Concatenating the last turns lets unrelated
   small talk dilute the query (−10 to −20 points); older turns only add a small, max-normalised
   share (``context_weight``), enough for follow-ups like "what about her sister?".
2. **Match word forms and scripts without spaces**: TF-IDF over character n-grams within word
   boundaries (3–5, sublinear tf) matches "paint"/"painting" and Chinese or Japanese text, where a
   word tokenizer scores every fact 0.
3. **Meaning, when available**: an optional embedding channel (:mod:`.embeddings`), fused
   ``lexical_weight`` : (1 − ``lexical_weight``) after min–max scaling of each channel.

Confidence is a tie-breaker (``confidence_weight`` 0.05), not 40 % of the score: with confidences
between 0.7 and 1.0 the seed's 0.4 weight let unrelated sure facts push out relevant ones. It is
the *decayed* confidence (:mod:`.lifecycle`): age lowers a fact's rank, it never removes it from
the candidates.

**The time route.** A question about time (:func:`~.dates.query_time_intent`) adds
``time_weight`` × a bonus in [0, 1] per fact: a period it names ("last month", "in May 2023")
favours facts whose event date — or, without one, whose learnt date — falls in it; "now",
"currently", "recently" favour recently learnt or confirmed facts, so the current value of
something that changed ranks above the stale one even when the extraction did not link them;
"when…" slightly favours facts that know their date.

The seed formula stays available (``selection: seed``): word TF-IDF cosine to the last turns
concatenated × 0.6 + confidence × 0.4.

Speed: the lexical index is built once per memory *revision* and cached by document identity;
each fact's analysed n-grams are cached by text, so a revision that adds a few facts re-analyses
only those. A query touches only the matrix columns of its own n-grams.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer

from deermem_middleware.injection.safety import assess_memory_text
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.decay import effective_confidence, last_confirmed
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.time import (
    TimeIntent,
    epoch_seconds,
    event_date_range,
    query_time_intent,
)
from deermem_middleware.retrieval.embeddings import EmbeddingStore

__all__ = [
    "CharNgramIndex",
    "FactIndex",
    "FactSelector",
    "ScoredFact",
    "SelectionParams",
    "SelectionQuery",
    "WordTfidfIndex",
    "minmax",
    "newer_competitors_first",
    "rank",
    "score_facts",
    "score_parts",
    "time_bonus",
]

logger = logging.getLogger(__name__)

Method = Literal["deermem", "seed"]


@dataclass(frozen=True, slots=True)
class ScoredFact:
    fact: Fact
    score: float
    relevance: float
    lexical: float = 0.0
    semantic: float | None = None
    recency: float = 0.0
    """The recency part's input (1 = newest fact), before ``recency_weight``."""
    confidence: float | None = None
    """The confidence the score used: the stored one decayed by age since last used."""
    time: float = 0.0
    """The time route's bonus in [0, 1], before ``time_weight`` (0 when the query is not about
    time)."""
    after: str | None = None
    """For a question about the present: the id of the newer, competing pick this fact was
    placed after (:func:`newer_competitors_first`); None otherwise."""


@dataclass(frozen=True, slots=True)
class SelectionParams:
    """The knobs of the score (see the module docstring for why these defaults)."""

    method: Method = "deermem"
    top_k: int = 15
    relevance_weight: float = 1.0
    confidence_weight: float = 0.05
    context_weight: float = 0.15
    lexical_weight: float = 0.3
    query_turns: int = 3
    recency_weight: float = 0.02
    """A small bonus for recently learnt or confirmed facts: 1 for the newest, halving every
    ``recency_half_life_days`` before it (ages relative to the newest fact, not the wall clock,
    so a memory that was not used for a while does not fade as a whole)."""
    recency_half_life_days: float = 90.0
    time_weight: float = 0.3
    """Weight of the time route's bonus (see the module docstring); 0 turns the route off."""
    time_half_life_days: float = 90.0
    """For "now"/"currently" questions: how fast the recency bonus halves before the newest
    fact."""
    when_bonus: float = 0.5
    """For "when…" questions: the bonus (before ``time_weight``) of a fact that knows the date
    of its event."""
    current_bonus: float = 0.5
    """For "now"/"currently" questions: the bonus (before ``time_weight``) of the newest fact
    (older facts get less, by ``time_half_life_days``)."""
    competitors: int = 3
    """For "now"/"currently" questions: a pick that is one of the ``competitors`` most similar
    picks of a newer pick (or has it among its own) is placed after it; 0 turns this off."""

    @classmethod
    def seed(cls, top_k: int = 15, query_turns: int = 3) -> SelectionParams:
        """The seed's formula: 0.6 × TF-IDF cosine to the turns concatenated + 0.4 × conf."""
        return cls(
            method="seed",
            top_k=top_k,
            relevance_weight=0.6,
            confidence_weight=0.4,
            query_turns=query_turns,
            recency_weight=0.0,
            time_weight=0.0,
        )

    @classmethod
    def from_config(cls, config: Any) -> SelectionParams:
        """From a :class:`~deermem_middleware.config.MemoryConfig` (``None`` weights: method's)."""
        base = cls.seed() if config.selection == "seed" else cls()
        return cls(
            method=config.selection,
            top_k=config.top_k,
            relevance_weight=(
                base.relevance_weight
                if config.relevance_weight is None
                else config.relevance_weight
            ),
            confidence_weight=(
                base.confidence_weight
                if config.confidence_weight is None
                else config.confidence_weight
            ),
            context_weight=config.context_weight,
            lexical_weight=config.lexical_weight,
            query_turns=config.query_turns,
            recency_weight=config.recency_weight,
            time_weight=config.time_weight if config.selection == "deermem" else 0.0,
        )


@dataclass(frozen=True, slots=True)
class SelectionQuery:
    """What the selection looks for: the newest user message, and the turns just before it."""

    primary: str
    context: str = ""

    @classmethod
    def from_turns(cls, turns: Sequence[Turn], query_turns: int = 3) -> SelectionQuery:
        """``primary`` = the newest user turn; ``context`` = up to ``query_turns - 1`` turns
        before it (oldest first). Without a user turn, the newest turn is primary."""
        if not turns:
            return cls("")
        position = len(turns) - 1
        for i in range(len(turns) - 1, -1, -1):
            if turns[i].role == "user":
                position = i
                break
        start = max(0, position - max(0, query_turns - 1))
        context = "\n".join(t.text for t in turns[start:position])
        return cls(turns[position].text, context)

    @property
    def concatenated(self) -> str:
        """The seed's query: every turn joined (oldest first)."""
        return f"{self.context}\n{self.primary}" if self.context else self.primary


# ------------------------------------------------------------------------------------------------
# Lexical indexes
# ------------------------------------------------------------------------------------------------

_N_FEATURES = 1 << 22  # hashed n-gram space; collisions are negligible at this size


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_CHAR_WB = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()


def analyze_text(text: str) -> list[str]:
    """The terms of a text: ``char_wb`` 3–5-grams, plus single characters and pairs inside runs
    of Chinese, Japanese or Korean script, where words are one or two characters long ("我养的猫"
    and "用户养了一只猫" share no 3-gram, but share 养 and 猫)."""
    terms: list[str] = _CHAR_WB(text)
    for run in _CJK_RUN.findall(text):
        terms.extend("\x01" + ch for ch in run)
        terms.extend("\x01" + run[i : i + 2] for i in range(len(run) - 1))
    return terms


class _Analyzer:
    """:func:`analyze_text` terms, hashed; per-text results cached (LRU)."""

    def __init__(self, max_texts: int = 100_000) -> None:
        self._vectorizer = HashingVectorizer(
            analyzer=analyze_text,
            alternate_sign=False,
            norm=None,
            n_features=_N_FEATURES,
            dtype=np.float64,
        )
        self._cache: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._max_texts = max_texts
        self._lock = threading.Lock()

    def transform(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(feature ids, sublinear tf) per text; only texts not seen before are analysed."""
        results: list[tuple[np.ndarray, np.ndarray] | None] = []
        todo: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                else:
                    todo.setdefault(text, []).append(i)
                results.append(hit)
        if todo:
            fresh = list(todo)
            matrix = self._vectorizer.transform(fresh).tocsr()
            matrix.sort_indices()
            computed: list[tuple[np.ndarray, np.ndarray]] = []
            for row in range(len(fresh)):
                lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
                ids = matrix.indices[lo:hi].astype(np.int64)
                tf = 1.0 + np.log(matrix.data[lo:hi])  # sublinear tf, as sklearn's
                computed.append((ids, tf))
            with self._lock:
                for text, value in zip(fresh, computed, strict=True):
                    for i in todo[text]:
                        results[i] = value
                    self._cache[text] = value
                while len(self._cache) > self._max_texts:
                    self._cache.popitem(last=False)
        return results  # type: ignore[return-value]


_ANALYZER = _Analyzer()


class CharNgramIndex:
    """TF-IDF (smooth idf, sublinear tf, L2 rows) over hashed :func:`analyze_text` terms.

    For text without CJK characters, the same weighting as scikit-learn's
    ``TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)``, built from
    cached per-text terms, stored column-major so a query reads only its own terms' columns.
    """

    def __init__(self, texts: Sequence[str], analyzer: _Analyzer | None = None) -> None:
        self._analyzer = analyzer or _ANALYZER
        self.size = len(texts)
        rows = self._analyzer.transform(texts) if texts else []
        lengths = np.fromiter((len(ids) for ids, _ in rows), dtype=np.int64, count=len(rows))
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        if not rows or indptr[-1] == 0:
            self._vocab = np.zeros(0, dtype=np.int64)
            self._idf = np.zeros(0)
            self._matrix: Any = None
            return
        ids = np.concatenate([r[0] for r in rows])
        tf = np.concatenate([r[1] for r in rows])
        # compact the hashed ids to the columns in use; a lookup table is ~20× faster than
        # np.unique's sort on the ~150 n-grams × facts of a large memory
        present = np.zeros(_N_FEATURES, dtype=bool)
        present[ids] = True
        self._vocab = np.flatnonzero(present)
        remap = np.empty(_N_FEATURES, dtype=np.int32)
        remap[self._vocab] = np.arange(len(self._vocab), dtype=np.int32)
        columns = remap[ids]
        df = np.bincount(columns, minlength=len(self._vocab))
        self._idf = np.log((1.0 + self.size) / (1.0 + df)) + 1.0
        weights = tf * self._idf[columns]
        row_of = np.repeat(np.arange(self.size), lengths)
        norms = np.sqrt(np.bincount(row_of, weights=weights * weights, minlength=self.size))
        weights /= norms[row_of]
        csr = sparse.csr_matrix((weights, columns, indptr), shape=(self.size, len(self._vocab)))
        self._matrix = csr.tocsc()

    def pairwise(self, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarities between ``texts`` (weighted with this index's idf; terms the
        index does not know are left out). For a handful of picks, not the whole memory."""
        n = len(texts)
        out = np.zeros((n, n))
        if self._matrix is None or n == 0:
            return out
        rows = []
        for ids, tf in self._analyzer.transform(list(texts)):
            positions = np.minimum(np.searchsorted(self._vocab, ids), len(self._vocab) - 1)
            known = self._vocab[positions] == ids
            weights = np.zeros(len(self._vocab))
            np.add.at(weights, positions[known], tf[known] * self._idf[positions[known]])
            norm = math.sqrt(float(weights @ weights))
            rows.append(weights / norm if norm > 0 else weights)
        matrix = np.vstack(rows)
        return matrix @ matrix.T

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of ``query`` to every text, in [0, 1]."""
        if self._matrix is None or not query.strip():
            return np.zeros(self.size)
        ids, tf = self._analyzer.transform([query])[0]
        positions = np.searchsorted(self._vocab, ids)
        positions = np.minimum(positions, len(self._vocab) - 1)
        known = self._vocab[positions] == ids
        if not known.any():
            return np.zeros(self.size)
        columns = positions[known]
        weights = tf[known] * self._idf[columns]
        weights /= math.sqrt(float(weights @ weights))
        return np.asarray(self._matrix[:, columns] @ weights).ravel()


class WordTfidfIndex:
    """The seed's index: scikit-learn ``TfidfVectorizer()`` defaults (word tokens)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        self._vectorizer: TfidfVectorizer | None = None
        self._matrix: Any = None
        if texts:
            vectorizer = TfidfVectorizer()
            try:
                self._matrix = vectorizer.fit_transform(texts).tocsr()
                self._vectorizer = vectorizer
            except ValueError:  # empty vocabulary
                self._matrix = None

    def scores(self, query: str) -> np.ndarray:
        if self._vectorizer is None or not query.strip():
            return np.zeros(self.size)
        vector = self._vectorizer.transform([query])
        return np.asarray((self._matrix @ vector.T).todense()).ravel()


# ------------------------------------------------------------------------------------------------
# Scoring (pure)
# ------------------------------------------------------------------------------------------------


class FactIndex:
    """Everything selection needs about one list of facts (one memory revision)."""

    def __init__(
        self,
        facts: Sequence[Fact],
        method: Method = "deermem",
        *,
        now: datetime | None = None,
        half_lives: Mapping[str, float] | None = None,
    ) -> None:
        self.facts: tuple[Fact, ...] = tuple(facts)
        self.method: Method = method
        texts = [f.content for f in self.facts]
        self.lexical: CharNgramIndex | WordTfidfIndex = (
            WordTfidfIndex(texts) if method == "seed" else CharNgramIndex(texts)
        )
        if now is None or method == "seed":
            confidences = [f.confidence for f in self.facts]
        else:  # unused facts fade (per-category half-life): lower in rank, never out
            confidences = [effective_confidence(f, now, half_lives) for f in self.facts]
        self.confidence = np.array(confidences, dtype=np.float64)
        self.dense: np.ndarray | None = None
        """Unit vectors of the facts (rows), once every fact has one; None: lexical only."""
        confirmed = [last_confirmed(f) for f in self.facts]
        self.confirmed = np.array(
            [math.nan if m is None else m.timestamp() for m in confirmed], dtype=np.float64
        )
        """Per fact, seconds since the epoch of its last confirmation (NaN: no usable date)."""
        self._recency: np.ndarray | None = None
        self._recency_values: dict[float, np.ndarray] = {}
        self._dates: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.facts)

    def recency(self, half_life_days: float) -> np.ndarray:
        """Per fact 0.5 ** (days before the newest fact / half-life), from the last time it was
        confirmed (or learnt); facts without a readable date count as old: 0."""
        cached = self._recency_values.get(half_life_days)
        if cached is not None:
            return cached
        values = np.zeros(len(self.facts))
        known = ~np.isnan(self.confirmed)
        if known.any() and half_life_days > 0:
            newest = float(self.confirmed[known].max())
            age_days = np.maximum(0.0, newest - self.confirmed[known]) / 86400.0
            values[known] = 0.5 ** (age_days / half_life_days)
        self._recency_values[half_life_days] = values
        return values

    @property
    def recency_rank(self) -> np.ndarray:
        """Per fact, its place when sorted newest first (breaks ties in score)."""
        if self._recency is None:
            stamps = np.nan_to_num(self.confirmed, nan=-math.inf)
            order = np.argsort(-stamps, kind="stable")
            ranks = np.empty(len(order), dtype=np.int64)
            ranks[order] = np.arange(len(order))
            self._recency = ranks
        return self._recency

    def dates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per fact (event start, event end, learnt), seconds since the epoch; NaN when unknown.
        The event range comes from ``eventAt`` (a day, week, month or year), learnt from
        ``createdAt``."""
        if self._dates is None:
            n = len(self.facts)
            start = np.full(n, math.nan)
            end = np.full(n, math.nan)
            learnt = np.full(n, math.nan)
            for i, fact in enumerate(self.facts):
                period = event_date_range(fact.eventAt)
                if period is not None:
                    start[i], end[i] = period[0].timestamp(), period[1].timestamp()
                moment = epoch_seconds(fact.createdAt)
                if moment is not None:
                    learnt[i] = moment
            self._dates = (start, end, learnt)
        return self._dates


def _about_the_present(intent: TimeIntent) -> bool:
    """A question about the present: "now", "currently"… with no period named ("what was I
    currently reading in May 2023?" is about May 2023, not about today)."""
    return intent.current and intent.period is None


_PERIOD_GRACE_SECONDS = 7 * 86400.0
"""A fact learnt up to a week after a period, without an event date of its own, may still be
about it ("what did I do last weekend?" — told on Monday)."""


def time_bonus(index: FactIndex, intent: TimeIntent, params: SelectionParams) -> np.ndarray:
    """The time route's per-fact bonus in [0, 1] for a question's :class:`TimeIntent` (pure).

    - a named period: 1 for facts whose event range overlaps it; for facts without an event
      date, 0.8 when learnt inside it and 0.4 when learnt within a week after it;
    - "now"/"currently" (with no period named): ``current_bonus`` × the recency of the fact's
      last confirmation (1 for the newest fact, halving every ``time_half_life_days`` before it);
    - "when…": ``when_bonus`` for facts that know their event date.

    The parts combine by maximum: a fact is not rewarded twice for one question.
    """
    n = len(index)
    bonus = np.zeros(n)
    if not n or not intent.any:
        return bonus
    start, end, learnt = index.dates()
    dated = ~np.isnan(start)
    if intent.period is not None:
        low, high = intent.period[0].timestamp(), intent.period[1].timestamp()
        overlaps = dated & (start < high) & (end > low)
        undated = ~dated & ~np.isnan(learnt)
        inside = undated & (learnt >= low) & (learnt < high)
        after = undated & (learnt >= high) & (learnt < high + _PERIOD_GRACE_SECONDS)
        bonus = np.maximum(bonus, np.where(overlaps, 1.0, 0.0))
        bonus = np.maximum(bonus, np.where(inside, 0.8, np.where(after, 0.4, 0.0)))
    if _about_the_present(intent) and params.current_bonus > 0:
        bonus = np.maximum(bonus, params.current_bonus * index.recency(params.time_half_life_days))
    if intent.asks_when and params.when_bonus > 0:
        bonus = np.maximum(bonus, np.where(dated, params.when_bonus, 0.0))
    return bonus


def newer_competitors_first(
    order: Sequence[int],
    similarity: np.ndarray,
    confirmed: np.ndarray,
    neighbours: int,
    relevance: np.ndarray | None = None,
    min_share: float = 0.3,
) -> tuple[list[int], dict[int, int]]:
    """Reorder ranked picks so that no fact stays above a newer fact it competes with (pure).

    Two picks *compete* when either is among the other's ``neighbours`` most similar picks
    (``similarity`` is the picks' pairwise similarity, in ``order``'s order; a similarity of 0
    or less never counts) and both are relevant to the question (``relevance`` at least
    ``min_share`` of the best pick's): they are most likely two statements of the same thing —
    a city, an employer — made at different times. When the extraction did not link the change
    (``supersedes``), both stay active, and for a question about the present the newer one must
    come first. Neighbour *ranks* decide rather than a similarity threshold, so the rule holds
    for any embedding model and for the lexical channel alike.

    Facts are visited newest first (by ``confirmed``, seconds; NaN: oldest); an older fact that
    ranks at or above a newer competitor is placed right after it. Only the picks' order
    changes, never which facts are picked. Returns (new order, {moved fact: the fact it now
    follows}).
    """
    n = len(order)
    if n < 2 or neighbours <= 0:
        return list(order), {}
    sims = np.array(similarity, dtype=np.float64, copy=True)
    np.fill_diagonal(sims, -np.inf)
    k = min(neighbours, n - 1)
    nearest = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    close = np.zeros((n, n), dtype=bool)
    rows = np.repeat(np.arange(n), k)
    close[rows, nearest.ravel()] = sims[rows, nearest.ravel()] > 0
    if relevance is not None:
        values = np.asarray(relevance, dtype=np.float64)
        top = float(values.max()) if len(values) else 0.0
        taking_part = (values > 0) & (values >= min_share * top)
        close &= taking_part[:, None] & taking_part[None, :]
    close |= close.T
    stamps = np.nan_to_num(np.asarray(confirmed, dtype=np.float64), nan=-math.inf)
    # a position-based score: the original order, with room to insert after any pick
    score = -np.arange(n, dtype=np.float64)
    moved: dict[int, int] = {}
    by_age = sorted(range(n), key=lambda a: (-stamps[a], a))
    for rank_a, a in enumerate(by_age):
        for b in by_age[:rank_a]:
            if close[a, b] and stamps[b] > stamps[a] and score[a] >= score[b]:
                score[a] = score[b] - 1e-6 * (1 + a)
                moved[order[a]] = order[b]
    ranked = sorted(range(n), key=lambda a: -score[a])
    return [order[a] for a in ranked], moved


def _utc_now() -> datetime:
    return datetime.now(UTC)


_NO_INTENT = TimeIntent()


@lru_cache(maxsize=1024)
def _cached_intent(text: str, day: datetime) -> TimeIntent:
    """:func:`~.dates.query_time_intent` per (message, day): tool loops and retries send the
    same message several times, and periods only depend on the day."""
    return query_time_intent(text, day)


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] (all zeros when the values are constant)."""
    if not len(values):
        return values
    low = float(values.min())
    span = float(values.max()) - low
    if span <= 1e-12:
        return np.zeros_like(values)
    return (values - low) / span


def _fused(lexical: np.ndarray, semantic: np.ndarray | None, lexical_weight: float) -> np.ndarray:
    if semantic is None:
        return lexical
    return lexical_weight * minmax(lexical) + (1.0 - lexical_weight) * minmax(semantic)


def score_facts(
    index: FactIndex,
    query: SelectionQuery,
    params: SelectionParams,
    *,
    primary_vector: np.ndarray | None = None,
    context_vector: np.ndarray | None = None,
    now: datetime | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(score, relevance, lexical, semantic) per fact. Pure: no I/O, no model calls.

    The vectors are the embeddings of ``query.primary`` / ``query.context``; they are used only
    when the index has fact vectors (``index.dense``). ``now`` resolves the periods a question
    names ("last month"); without it only "now"/"when" questions use the time route.
    :func:`score_parts` also returns the time route's part.
    """
    return score_parts(
        index,
        query,
        params,
        primary_vector=primary_vector,
        context_vector=context_vector,
        now=now,
    )[:4]


def score_parts(
    index: FactIndex,
    query: SelectionQuery,
    params: SelectionParams,
    *,
    primary_vector: np.ndarray | None = None,
    context_vector: np.ndarray | None = None,
    now: datetime | None = None,
    intent: TimeIntent | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`score_facts` plus the time route's bonus per fact (before ``time_weight``).

    ``intent``: the question's :class:`TimeIntent` when the caller has it (else it is read from
    ``query.primary`` against ``now``)."""
    n = len(index)
    if params.method == "seed":
        lexical = index.lexical.scores(query.concatenated)
        return (
            params.relevance_weight * lexical + params.confidence_weight * index.confidence,
            lexical,
            lexical,
            None,
            np.zeros(n),
        )
    dense = index.dense if primary_vector is not None else None
    lexical = index.lexical.scores(query.primary)
    semantic = dense @ primary_vector if dense is not None else None
    relevance = _fused(lexical, semantic, params.lexical_weight)
    if query.context.strip() and params.context_weight > 0 and n:
        ctx_lexical = index.lexical.scores(query.context)
        ctx_semantic = (
            dense @ context_vector if dense is not None and context_vector is not None else None
        )
        ctx = _fused(ctx_lexical, ctx_semantic, params.lexical_weight)
        top = float(ctx.max())
        if top > 0:
            relevance = relevance + params.context_weight * ctx / top
    score = params.relevance_weight * relevance + params.confidence_weight * index.confidence
    if params.recency_weight > 0 and n:
        score = score + params.recency_weight * index.recency(params.recency_half_life_days)
    bonus = np.zeros(n)
    if params.time_weight > 0 and n:
        if intent is None and now is not None:
            intent = query_time_intent(query.primary, now)
        elif intent is None:  # no clock: only the parts that need none
            seen = query_time_intent(query.primary, datetime.now(UTC))
            intent = TimeIntent(asks_when=seen.asks_when, current=seen.current)
        bonus = time_bonus(index, intent, params)
        score = score + params.time_weight * bonus
    return score, relevance, lexical, semantic, bonus


def rank(index: FactIndex, scores: np.ndarray, top_k: int) -> list[int]:
    """Positions of the ``top_k`` best scores, best first; equal scores: newer first."""
    n = len(scores)
    if top_k <= 0 or n == 0:
        return []
    k = min(top_k, n)
    # only the k best are sorted (argpartition is O(n)); the cut keeps every tie of the k-th
    if k < n:
        kth = np.partition(-scores, k - 1)[k - 1]
        candidates = np.flatnonzero(-scores <= kth)
    else:
        candidates = np.arange(n)
    recency_rank = index.recency_rank
    order = sorted(candidates.tolist(), key=lambda i: (-scores[i], recency_rank[i]))
    return order[:k]


# ------------------------------------------------------------------------------------------------
# The selector: caches, embeddings, the public API
# ------------------------------------------------------------------------------------------------


class FactSelector:
    """Selects facts for a conversation; what the middleware, the nodes and the benchmark use.

    Indexes are cached per scope key and rebuilt only when the memory document changes (stored
    documents are frozen and storages hand out the same object until it changes, so identity is
    an exact, free change detector). With an :class:`EmbeddingStore`, facts without a vector are
    embedded in the background and the semantic channel joins as soon as every fact of the
    document has one; until then selection is lexical. :meth:`prepare` does it all synchronously.
    """

    def __init__(
        self,
        params: SelectionParams | None = None,
        embeddings: EmbeddingStore | None = None,
        *,
        cache_size: int = 64,
        half_lives: Mapping[str, float] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.params = params or SelectionParams()
        self.clock: Callable[[], datetime] = clock or _utc_now
        """Decay and the periods questions name ("last month") are measured against it."""
        self.embeddings = embeddings if self.params.method == "deermem" else None
        self.half_lives: Mapping[str, float] | None = half_lives
        self._cache_size = cache_size
        self._items: OrderedDict[Hashable, tuple[Memory, FactIndex]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def semantic(self) -> bool:
        """True when an embedding channel is configured."""
        return self.embeddings is not None

    def index(self, key: Hashable, memory: Memory) -> FactIndex:
        """The index of ``memory`` (cached under ``key`` for as long as the document is current)."""
        with self._lock:
            entry = self._items.get(key)
            if entry is not None and entry[0] is memory:
                self._items.move_to_end(key)
                index = entry[1]
            else:
                index = None
        if index is None:
            # only active facts are candidates: superseded and archived ones stay for audit
            active = [f for f in memory.facts if f.status == "active"]
            for fact in active:  # classify once per text now, not on the model-call path
                assess_memory_text(fact.content)
                assess_memory_text(fact.category)
            index = FactIndex(
                active,
                self.params.method,
                now=self.clock(),
                half_lives=self.half_lives,
            )
            with self._lock:
                self._items[key] = (memory, index)
                self._items.move_to_end(key)
                while len(self._items) > self._cache_size:
                    self._items.popitem(last=False)
        self._attach_vectors(index, wait=False)
        return index

    def prepare(self, key: Hashable, memory: Memory) -> FactIndex:
        """Build the index and embed every fact now (blocking); for warm-up, tests, benchmarks."""
        index = self.index(key, memory)
        self._attach_vectors(index, wait=True)
        return index

    def _attach_vectors(self, index: FactIndex, *, wait: bool) -> None:
        store = self.embeddings
        if store is None or index.dense is not None or not len(index):
            return
        texts = [f.content for f in index.facts]
        if wait:
            store.embed(texts)
        vectors = store.vectors(texts)
        if vectors is not None:
            index.dense = vectors
        elif not wait:
            store.embed_in_background(texts)

    def select(
        self,
        key: Hashable,
        memory: Memory,
        query: SelectionQuery | Sequence[Turn] | str,
        *,
        top_k: int | None = None,
    ) -> list[ScoredFact]:
        """The facts of ``memory`` most worth injecting for ``query``, best first."""
        if isinstance(query, str):
            query = SelectionQuery(query)
        elif not isinstance(query, SelectionQuery):
            query = SelectionQuery.from_turns(query, self.params.query_turns)
        index = self.index(key, memory)
        return self.select_from(index, query, top_k=top_k)

    def select_from(
        self, index: FactIndex, query: SelectionQuery, *, top_k: int | None = None
    ) -> list[ScoredFact]:
        """Like :meth:`select`, on an index you hold."""
        k = self.params.top_k if top_k is None else top_k
        if k <= 0 or not len(index):
            return []
        primary_vector = context_vector = None
        store = self.embeddings
        if store is not None and index.dense is not None:
            try:
                if query.primary.strip():
                    primary_vector = store.query(query.primary)
                    if query.context.strip() and self.params.context_weight > 0:
                        context_vector = store.query(query.context)
            except Exception:
                logger.exception("query embedding failed; selecting facts lexically")
                primary_vector = context_vector = None
        intent = self._intent(query)
        scores, relevance, lexical, semantic, bonus = score_parts(
            index,
            query,
            self.params,
            primary_vector=primary_vector,
            context_vector=context_vector,
            intent=intent,
        )
        picks = rank(index, scores, k)
        moved: dict[int, int] = {}
        if _about_the_present(intent) and self.params.competitors > 0 and len(picks) > 1:
            if semantic is not None and index.dense is not None:
                rows = index.dense[picks]
                similarity = rows @ rows.T
            elif isinstance(index.lexical, CharNgramIndex):
                similarity = index.lexical.pairwise([index.facts[i].content for i in picks])
            else:
                similarity = None
            if similarity is not None:
                picks, moved = newer_competitors_first(
                    picks,
                    similarity,
                    index.confirmed[picks],
                    self.params.competitors,
                    relevance[picks],
                )
        recency = (
            index.recency(self.params.recency_half_life_days)
            if self.params.recency_weight > 0 and self.params.method == "deermem"
            else np.zeros(len(index))
        )
        return [
            ScoredFact(
                index.facts[i],
                float(scores[i]),
                float(relevance[i]),
                float(lexical[i]),
                None if semantic is None else float(semantic[i]),
                float(recency[i]),
                float(index.confidence[i]),
                float(bonus[i]),
                index.facts[moved[i]].id if i in moved else None,
            )
            for i in picks
        ]

    def _intent(self, query: SelectionQuery) -> TimeIntent:
        """What the newest message says about time (none for the seed's formula, or when the
        time route is off)."""
        if self.params.method != "deermem" or self.params.time_weight <= 0:
            return _NO_INTENT
        now = self.clock()
        day = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo or UTC)
        return _cached_intent(query.primary, day)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def close(self) -> None:
        if self.embeddings is not None:
            self.embeddings.close()

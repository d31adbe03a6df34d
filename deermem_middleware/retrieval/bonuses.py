"""The routes' bonus functions (pure: no I/O, no model calls): the time, conversation and
feedback routes' per-fact bonuses, and the min-max scaling they and the fusion share.

Each is wired into the score by its :class:`~deermem_middleware.retrieval.routes.Route`; they
stay plain functions of arrays so tests and benchmarks can call them alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from deermem_middleware.memory.time import TimeIntent

if TYPE_CHECKING:
    from deermem_middleware.retrieval.index import FactIndex
    from deermem_middleware.retrieval.params import SelectionParams

__all__ = ["feedback_bonus", "minmax", "thread_bonus", "time_bonus"]


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] (all zeros when the values are constant)."""
    if not len(values):
        return values
    low = float(values.min())
    span = float(values.max()) - low
    if span <= 1e-12:
        return np.zeros_like(values)
    return (values - low) / span


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


def thread_bonus(relevance: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """The conversation route's per-fact bonus (pure): the best relevance among the *other*
    facts learnt in the same conversation (``threads``: a number per fact, -1 for none).

    Why: a conversation is about a few things at once. When one of its facts matches the
    question well, its neighbours are more likely to be what the question needs than equally
    matching facts from elsewhere ("what did she buy before the trip?" — the boots bought in the
    conversation about the trip). A fact's own relevance never counts for it, so the route only
    reorders facts by their company; facts alone in a conversation, or without one, get 0.
    Negative relevance counts as 0. O(n): two grouped maxima.
    """
    values = np.maximum(np.asarray(relevance, dtype=np.float64), 0.0)
    out = np.zeros(len(values))
    known = threads >= 0
    if len(values) < 2 or not known.any():
        return out
    groups = threads[known]
    mine = values[known]
    size = int(groups.max()) + 1
    best = np.zeros(size)
    np.maximum.at(best, groups, mine)
    at_best = mine >= best[groups]
    tied = np.bincount(groups[at_best], minlength=size) > 1
    second = np.zeros(size)
    np.maximum.at(second, groups, np.where(at_best, 0.0, mine))
    out[known] = np.where(at_best & ~tied[groups], second[groups], best[groups])
    return out


def feedback_bonus(
    dense: np.ndarray,
    seeds: np.ndarray,
    facts: int,
    hub: np.ndarray | None,
    hub_weight: float,
    pool: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The feedback route's per-fact bonus in [0, 1], and the raw cosines it is made of (pure).

    Pseudo-relevance feedback in the embedding space, as a re-ranking of the first pass: of the
    ``pool`` best facts by ``seeds`` (the first-pass score; None: every fact), the ``facts``
    best are taken as relevant, and each fact of the pool gains by its cosine to their mean
    vector — less ``hub_weight`` × its ``hub`` ness, as the semantic channel does — min-max
    scaled over the pool. Facts outside the pool get 0 (and a cosine of 0): no bonus lifts them
    above the pool, whose scores are at least theirs, so only the pool's order changes.

    Why: a question names one side of what it needs ("what did she buy before the trip?"), and
    the facts it matches best carry the rest (the trip, the mountains, her sister); facts close
    to those are more often what it needs than facts that only share a word with the question.
    Unlike the conversation route it needs no thread: imported and typed facts take part.
    O(n) to find the pool, O(pool·d) to score it: 10,000 facts cost no more than 100.
    """
    n = len(seeds)
    bonus, similarity = np.zeros(n), np.zeros(n)
    if n == 0 or facts <= 0:
        return bonus, similarity
    size = n if pool is None else max(1, min(pool, n))
    members = np.argpartition(-seeds, size - 1)[:size] if size < n else np.arange(n)
    m = min(facts, size)
    ranked = members[np.argsort(-seeds[members], kind="stable")]
    centroid = np.asarray(dense[ranked[:m]], dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm <= 1e-12:
        return bonus, similarity
    # in the vectors' own dtype: a float64 centroid would copy every float32 row
    unit = (centroid / norm).astype(dense.dtype, copy=False)
    cosine = np.asarray(dense[members] @ unit, dtype=np.float64)
    closeness = cosine if hub is None else cosine - hub_weight * hub[members]
    similarity[members] = cosine
    bonus[members] = minmax(closeness)
    return bonus, similarity

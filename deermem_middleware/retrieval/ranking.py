"""Scoring and ranking the facts of one index for one query (pure: no I/O, no model calls).

:func:`score_facts` is relevance and confidence plus every route of
:data:`~deermem_middleware.retrieval.routes.ROUTES` that runs for the query; :func:`route_hits`
says which routes found each pick; :func:`rank` and :func:`rank_diverse` pick the best, and
:func:`newer_competitors_first` orders them for questions about the present. See
:mod:`deermem_middleware.retrieval.selector` for why the score is what it is (measured).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

import numpy as np

from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.time import TimeIntent, query_time_intent
from deermem_middleware.retrieval.bonuses import minmax
from deermem_middleware.retrieval.index import FactIndex
from deermem_middleware.retrieval.params import SelectionParams, SelectionQuery
from deermem_middleware.retrieval.routes import ROUTES, RouteInput, RouteResult
from deermem_middleware.retrieval.rules import RecallRule

__all__ = [
    "ScoredFact",
    "Scores",
    "newer_competitors_first",
    "rank",
    "rank_diverse",
    "route_hits",
    "score_facts",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredFact:
    """One ranked fact and the parts of its score (what explain, the ledger and tests read)."""

    fact: Fact
    score: float
    relevance: float
    lexical: float = 0.0
    semantic: float | None = None
    confidence: float | None = None
    """The confidence the score used: the stored one decayed by age since last used."""
    after: str | None = None
    """For a question about the present: the id of the newer, competing pick this fact was
    placed after (:func:`newer_competitors_first`); None otherwise."""
    bonuses: tuple[tuple[str, float], ...] = ()
    """Per route that ran for the query (:data:`~deermem_middleware.retrieval.routes.ROUTES`),
    its input for this fact before its weight; :meth:`bonus` reads one."""
    labels: tuple[tuple[str, str], ...] = ()
    """Per route that names what found the fact, that name (the recall rule's)."""
    routes: tuple[tuple[str, float], ...] = ()
    """Which routes found the fact, with their raw scores (:func:`route_hits`): ``lexical`` and
    ``semantic`` when the channel alone ranks it within ``top_k`` (raw cosine), ``entity``,
    ``time``, ``usage`` and ``thread`` when they give it a bonus, ``rule`` (1.0) when a recall
    rule names it, ``feedback`` (raw cosine to the best first-pass matches' centroid) when that
    ranks it within ``top_k``; ``guaranteed`` or ``queryless`` for the query-less choice."""

    def bonus(self, route: str) -> float:
        """The route's input for this fact before its weight (0 when it did not run)."""
        for name, value in self.bonuses:
            if name == route:
                return value
        return 0.0

    def label(self, route: str) -> str | None:
        """The route's name for what found this fact (None: none)."""
        for name, value in self.labels:
            if name == route:
                return value
        return None

    # the routes' inputs under their own names, as before the routes became one tuple
    @property
    def recency(self) -> float:
        """The recency part's input (1 = newest fact), before ``recency_weight``."""
        return self.bonus("recency")

    @property
    def usage(self) -> float:
        """The usage part's input (how often the fact was used when injected)."""
        return self.bonus("usage")

    @property
    def time(self) -> float:
        """The time route's bonus in [0, 1] (0 when the query is not about time)."""
        return self.bonus("time")

    @property
    def entity(self) -> float:
        """The entity route's bonus (the share of the message's entities the fact names)."""
        return self.bonus("entity")

    @property
    def thread(self) -> float:
        """The conversation route's input (the best relevance among the other facts learnt in
        the same conversation)."""
        return self.bonus("thread")

    @property
    def feedback(self) -> float:
        """The feedback route's input (closeness to the best first-pass matches, in [0, 1])."""
        return self.bonus("feedback")

    @property
    def rule(self) -> str | None:
        """The name of the recall rule that recalled the fact (None: no rule did)."""
        return self.label("rule")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scores:
    """Every part of the score of every fact, for one query (arrays indexed like the facts)."""

    score: np.ndarray
    relevance: np.ndarray
    lexical: np.ndarray
    semantic: np.ndarray | None
    routes: Mapping[str, RouteResult] = field(default_factory=dict)
    """Per route that ran (the channels included), what it found; see :meth:`bonus`."""

    def bonus(self, route: str) -> np.ndarray | None:
        """The route's per-fact bonus before its weight (None: it did not run)."""
        result = self.routes.get(route)
        return None if result is None else result.bonus

    def _zeros_unless(self, route: str) -> np.ndarray:
        bonus = self.bonus(route)
        return np.zeros(len(self.score)) if bonus is None else bonus

    # the routes' results under their own names, as before the routes became one tuple
    @property
    def time(self) -> np.ndarray:
        """The time route's bonus, before ``time_weight`` (zeros when off)."""
        return self._zeros_unless("time")

    @property
    def entity(self) -> np.ndarray:
        """The entity route's bonus, before ``entity_weight`` (zeros when off)."""
        return self._zeros_unless("entity")

    @property
    def entities(self) -> tuple[str, ...]:
        """The entities of the message found among the facts' entities."""
        result = self.routes.get("entity")
        return () if result is None else tuple(result.found)

    @property
    def rule(self) -> np.ndarray | None:
        """Facts a recall rule recalled (None: no rule applied)."""
        return self.bonus("rule")

    @property
    def rule_names(self) -> tuple[str | None, ...]:
        """Per fact, the first applying rule that recalled it."""
        result = self.routes.get("rule")
        return () if result is None else result.labels

    @property
    def rules(self) -> tuple[RecallRule, ...]:
        """The recall rules that applied to the message."""
        result = self.routes.get("rule")
        return () if result is None else tuple(result.found)

    @property
    def thread(self) -> np.ndarray | None:
        """The conversation route's bonus, before ``thread_weight`` (None: the route is off)."""
        return self.bonus("thread")

    @property
    def feedback(self) -> np.ndarray | None:
        """The feedback route's bonus, before ``feedback_weight`` (None: off, or no vectors)."""
        return self.bonus("feedback")

    @property
    def feedback_similarity(self) -> np.ndarray | None:
        """The raw cosines of the facts to the feedback route's centroid."""
        result = self.routes.get("feedback")
        return None if result is None else result.raw


_NO_INTENT = TimeIntent()


@lru_cache(maxsize=1024)
def _cached_intent(text: str, day: datetime) -> TimeIntent:
    """:func:`~deermem_middleware.memory.time.query_time_intent` per (message, day): tool loops and
    retries send the same message several times, and periods only depend on the day."""
    return query_time_intent(text, day)


def _fused(
    lexical: np.ndarray,
    semantic: np.ndarray | None,
    lexical_weight: float,
    has_vector: np.ndarray | None = None,
) -> np.ndarray:
    """Both channels, each min-max scaled; a fact without a vector (``has_vector`` False) by
    its scaled lexical score alone, as lexical-only ranking would score it."""
    if semantic is None:
        return lexical
    if has_vector is None:
        return lexical_weight * minmax(lexical) + (1.0 - lexical_weight) * minmax(semantic)
    scaled = np.zeros(len(semantic), dtype=np.float64)
    if has_vector.any():
        scaled[has_vector] = minmax(np.asarray(semantic, dtype=np.float64)[has_vector])
    lexical_part = minmax(lexical)
    fused = lexical_weight * lexical_part + (1.0 - lexical_weight) * scaled
    return np.where(has_vector, fused, lexical_part)


def _dehubbed(
    semantic: np.ndarray | None, hub: np.ndarray | None, params: SelectionParams
) -> np.ndarray | None:
    """The semantic channel as fused: cosine − ``hub_weight`` × similarity to the mean fact."""
    if semantic is None or hub is None:
        return semantic
    return semantic - params.hub_weight * hub


def score_facts(
    index: FactIndex,
    query: SelectionQuery,
    params: SelectionParams,
    *,
    primary_vector: np.ndarray | None = None,
    now: datetime | None = None,
    intent: TimeIntent | None = None,
) -> Scores:
    """Every part of the score per fact (:class:`Scores`). Pure: no I/O, no model calls.

    ``intent``: the question's :class:`TimeIntent` when the caller has it (else the time route
    reads it from ``query.primary`` against ``now``)."""
    n = len(index)
    if params.method == "seed":
        lexical = index.lexical.scores(query.concatenated)
        return Scores(
            score=params.relevance_weight * lexical + params.confidence_weight * index.confidence,
            relevance=lexical,
            lexical=lexical,
            semantic=None,
        )
    dense = index.dense if primary_vector is not None else None
    lexical = index.lexical.scores(query.primary)
    hub = index.hubness() if dense is not None and params.hub_weight > 0 else None
    semantic = dense @ primary_vector if dense is not None else None  # reported as is
    mask = index.has_vector if dense is not None else None
    relevance = _fused(lexical, _dehubbed(semantic, hub, params), params.lexical_weight, mask)
    if query.context.strip() and params.context_weight > 0 and n:
        ctx = index.lexical.scores(query.context)  # one embedding per message: lexical only
        top = float(ctx.max())
        if top > 0:
            relevance = relevance + params.context_weight * ctx / top
    score = params.relevance_weight * relevance + params.confidence_weight * index.confidence
    found: dict[str, RouteResult] = {"lexical": RouteResult(raw=lexical)}
    if semantic is not None:
        found["semantic"] = RouteResult(raw=semantic)
    route_input = RouteInput(
        index=index,
        query=query,
        params=params,
        relevance=relevance,
        score=score,
        dense=dense,
        hub=hub,
        intent=intent,
        now=now,
        n=n,
    )
    for route in ROUTES:  # in order: a route reads the score of those before it
        if route.bonus is None or route.weight is None:
            continue
        route_input.weight = getattr(params, route.weight)
        route_input.score = score
        result = route.bonus(route_input)
        if result is None:
            continue
        found[route.name] = result
        if result.bonus is not None:
            score = score + route_input.weight * result.bonus
    return Scores(
        score=score, relevance=relevance, lexical=lexical, semantic=semantic, routes=found
    )


def _channel_top(values: np.ndarray | None, k: int) -> np.ndarray | None:
    """Mask of the ``k`` best positive values of one channel (ties at the cut included)."""
    if values is None or not len(values):
        return None
    positive = values > 0
    if k >= len(values):
        return positive
    kth = np.partition(-values, k - 1)[k - 1]
    return positive & (-values <= kth)


def route_hits(
    parts: Scores, picks: Sequence[int], top_k: int
) -> list[tuple[tuple[str, float], ...]]:
    """Per pick, the routes that found it and their raw scores (see ``ScoredFact.routes``), in
    the order of :data:`~deermem_middleware.retrieval.routes.ROUTES`."""
    reading: list[tuple[str, np.ndarray | None, np.ndarray]] = []
    for route in ROUTES:
        result = parts.routes.get(route.name)
        values = None if result is None else result.values
        if values is None or route.hits is None:
            continue
        top = _channel_top(values, top_k) if route.hits == "top" else None
        if route.hits == "top" and top is None:
            continue
        reading.append((route.name, top, values))
    found: list[tuple[tuple[str, float], ...]] = []
    for i in picks:
        hits: list[tuple[str, float]] = []
        for name, top, values in reading:
            if top[i] if top is not None else values[i] > 0:
                hits.append((name, float(values[i])))
        found.append(tuple(hits))
    return found


def _floats(values: np.ndarray) -> list[float]:
    """As Python floats (the same doubles ``float(values[i])`` gives, without a call each)."""
    return np.asarray(values, dtype=np.float64).tolist()


def scored_facts(
    index: FactIndex,
    parts: Scores,
    picks: Sequence[int],
    routes: Sequence[tuple[tuple[str, float], ...]],
    moved: Mapping[int, int],
) -> list[ScoredFact]:
    """The picks as :class:`ScoredFact` s: their score parts, every route's input and label,
    the routes that found them (``routes``, per pick) and the newer pick each was placed
    after (``moved``)."""
    at = np.asarray(picks, dtype=np.intp)
    score, relevance = _floats(parts.score[at]), _floats(parts.relevance[at])
    lexical, confidence = _floats(parts.lexical[at]), _floats(index.confidence[at])
    semantic: list[float | None] = (
        [None] * len(at) if parts.semantic is None else list(_floats(parts.semantic[at]))
    )
    # per pick, (route, value) for every route that ran: zipped column-wise, not pick by pick
    ran = [
        [(name, value) for value in _floats(r.bonus[at])]
        for name, r in parts.routes.items()
        if r.bonus is not None
    ]
    bonuses: list[tuple[tuple[str, float], ...]] = (
        list(zip(*ran, strict=True)) if ran else [()] * len(at)
    )
    labels: list[tuple[tuple[str, str], ...]] = [()] * len(at)
    for name, r in parts.routes.items():
        if r.labels and r.bonus is not None:
            for j, (i, hit) in enumerate(zip(picks, r.bonus[at].tolist(), strict=True)):
                label = r.labels[i]
                if hit and label is not None:
                    labels[j] = (*labels[j], (name, label))
    return [
        ScoredFact(
            fact=index.facts[i],
            score=score[j],
            relevance=relevance[j],
            lexical=lexical[j],
            semantic=semantic[j],
            confidence=confidence[j],
            after=index.facts[moved[i]].id if i in moved else None,
            bonuses=bonuses[j],
            labels=labels[j],
            routes=found,
        )
        for j, (i, found) in enumerate(zip(picks, routes, strict=True))
    ]


def rank_diverse(
    index: FactIndex,
    scores: np.ndarray,
    top_k: int,
    threshold: float,
    penalty: float,
    pool: int | None = None,
) -> list[int]:
    """Like :func:`rank`, but greedily demotes near-duplicates of earlier picks (pure).

    Candidates are the ``pool`` (default 3 × ``top_k``) best scores; each step takes the best
    ``score − penalty × max(0, maxcos − threshold) / (1 − threshold)``, maxcos being the
    candidate's highest cosine (``index.dense``) to a pick already taken. Without vectors, or
    with the penalty off: :func:`rank`.
    """
    dense = index.dense
    if dense is None or penalty <= 0 or threshold >= 1.0:
        return rank(index, scores, top_k)
    size = max(top_k, pool if pool is not None else 3 * top_k)
    candidates = rank(index, scores, size)  # best first, ties newer first
    if len(candidates) <= 1:
        return candidates[:top_k]
    vectors = dense[candidates]
    similarity = vectors @ vectors.T
    base = scores[candidates].astype(np.float64)
    taken = [0]
    closest = similarity[0].astype(np.float64)
    free = np.ones(len(candidates), dtype=bool)
    free[0] = False
    scale = penalty / (1.0 - threshold)
    while len(taken) < min(top_k, len(candidates)):
        value = np.where(free, base - scale * np.maximum(0.0, closest - threshold), -np.inf)
        j = int(np.argmax(value))  # the first maximum: the better-ranked candidate on ties
        taken.append(j)
        free[j] = False
        np.maximum(closest, similarity[j], out=closest)
    return [candidates[j] for j in taken]


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

"""Choosing the block when there is no message to match: query-less recall (pure).

DeerFlow's lead agent asks its memory for context once per conversation, without the
conversation — ``get_context(user_id, agent_name)`` — so for a user whose previous message the
backend has not seen there is nothing to rank by. The
relevance formula has nothing to work with then (its lexical and semantic parts are 0 for every
fact), so without a rule of its own the block would be whatever its tie-breakers leave: the
newest, surest facts. This module is that rule: the block that best serves an *unknown* next
question.

1. **Guaranteed categories first** (``guaranteed_categories``, e.g. the user's corrections),
   newest first, as the injection's guaranteed part places them.
2. **Specific facts** over generic ones: each fact's similarity to the memory's mean (its
   *hubness*: the mean vector when the facts are embedded, the centroid of the character n-gram
   TF-IDF rows otherwise) is taken off, min–max scaled (``specificity_weight``); facts that name
   rare entities — a name, a title, a product on at most 5 % of the facts — gain a little more
   (``entity_weight``). "Asks how things are going" fits every topic and answers no question;
   "got a puppy named Toby" answers several.
3. **The user's own signals** as a mix: how often answers used the fact when it was injected
   (``usage_weight``), how recently it was learnt or confirmed (``recency_weight``) and how sure
   it is (``confidence_weight``; the decayed confidence the index holds).
4. **Spread over topics**: picks are taken greedily (maximal marginal relevance), each
   candidate losing ``diversity`` × its highest topic similarity to a pick already taken, so
   fifteen restatements of one thing do not fill the block. Topic similarity is the cosine of
   the mean-centred fact vectors (embeddings; raw e5 cosines are all high) or of the facts'
   n-gram TF-IDF rows (lexical).

**Measured** (``benchmarks/locomo_queryless.py``, LoCoMo dev: 6 conversations, 1,487 facts, 885
questions of categories 1–4, no question given; hit@15: a fact of the block cites the question's
evidence. One block per conversation is scored against all of its questions, so the figure is
coarse). With confidence 0.9 for every fact, ours is 13.3 lexically and 13.9 with embeddings,
against 6.8 for the 15 most recent facts (mem0's choice — and DeerFlow's confidence-ranked
formula, whose ties go newest first, and the relevance formula on a blank query, which is what
the package injected before: the same block), and 7.4 for random picks (mean of 20 seeds, sd
1.2). With confidences varying 0.7–1.0: 13.1 / 14.0 against 6.8 (recent), 7.8 (DeerFlow's formula),
6.4 (the blank-query formula) and 7.4 (random). Ours is the higher in each of the 6
conversations against each of them, but for DeerFlow's formula with varied confidence (5 of 6).
With the user's previous message as the query the shipped selection reaches 25.5 / 25.5: a
message, when there is one, is worth about twice as much as the best choice without it.

**Topic centrality is the wrong prior here.** Favouring facts whose topic recurs — the most
central facts: a negative ``specificity_weight``, since a unit vector's mean cosine to all the
others *is* its cosine to their mean — gives 5.5 lexically and 4.6 with embeddings, below random:
on LoCoMo a fact's hubness correlates with the number of questions citing it at Spearman −0.19
(lexical) and −0.36 (embeddings). Recurring topics are recorded in generic phrasings ("admires
her friend's courage"); questions ask about specific events. The topic spread (step 4) is kept
for what the block is — fifteen different things — more than for the figure: LoCoMo's facts
seldom restate each other, and without it the block scores 12.8 / 14.5 (±0.7).

No clock: recency is measured from the newest fact (as the relevance formula's is), and the
confidence the index holds was decayed against the selector's clock when it was built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from deermem_middleware.retrieval.lexical import CharNgramIndex

if TYPE_CHECKING:  # the index imports this module (SelectionParams holds QuerylessParams)
    from deermem_middleware.retrieval.index import FactIndex

__all__ = [
    "QuerylessChoice",
    "QuerylessParams",
    "QuerylessScores",
    "choose_queryless",
    "entity_richness",
    "is_queryless",
    "queryless_scores",
    "spread",
    "topic_similarity",
]


@dataclass(frozen=True, slots=True)
class QuerylessParams:
    """The knobs of the query-less choice (see the module docstring for the measurements)."""

    guaranteed_categories: tuple[str, ...] = ("correction",)
    """Facts of these categories come first, newest first (the injection's guaranteed part;
    the default is ``MemoryConfig.guaranteed_categories``'s)."""
    specificity_weight: float = 1.0
    """Weight of the fact's distance from the memory's mean (min–max scaled to [0, 1]); a
    negative weight favours central facts instead (measured worse, see the module docstring)."""
    entity_weight: float = 0.3
    """Weight of :func:`entity_richness` (rare entities named, in [0, 1])."""
    entity_cap: int = 3
    """Rare entities beyond this many add nothing more."""
    usage_weight: float = 0.3
    """Weight of the usage signal (``FactIndex.usage``: used / (injections + 2), in [0, 1))."""
    recency_weight: float = 0.2
    """Weight of the recency of the last confirmation (1 for the newest fact)."""
    recency_half_life_days: float = 90.0
    confidence_weight: float = 0.2
    """Weight of the (decayed) confidence."""
    diversity: float = 0.5
    """Each candidate loses ``diversity`` × its highest topic similarity to a pick already
    taken; 0 turns the spread off."""
    pool: int = 200
    """How many of the best-scored facts the spread chooses from (0: every fact); bounds the
    pairwise similarities to ``pool``² whatever the memory's size."""


@dataclass(frozen=True, slots=True)
class QuerylessScores:
    """Every part of the query-less score, per fact (arrays indexed like the index's facts)."""

    score: np.ndarray
    specificity: np.ndarray
    """1 − the fact's hubness, min–max scaled to [0, 1], before ``specificity_weight``."""
    entity: np.ndarray
    """:func:`entity_richness`, before ``entity_weight``."""
    usage: np.ndarray
    recency: np.ndarray
    confidence: np.ndarray
    guaranteed: np.ndarray
    """Mask of the facts of a guaranteed category."""


@dataclass(frozen=True, slots=True)
class QuerylessChoice:
    """The picks (positions in the index, block order) and the parts they were chosen by."""

    picks: tuple[int, ...]
    parts: QuerylessScores


def is_queryless(primary: str, context: str = "") -> bool:
    """True when there is nothing to match: the newest message and the turns before it are
    blank (``get_context`` before the thread's first message)."""
    return not primary.strip() and not context.strip()


def entity_richness(index: FactIndex, cap: int) -> np.ndarray:
    """Per fact, how many rare entities it names (those the entity index keeps: on at most 5 %
    of the facts), capped at ``cap`` and scaled to [0, 1]."""
    if cap <= 0 or not len(index):
        return np.zeros(len(index))
    return np.asarray(np.minimum(index.entities.counts(), cap) / cap, dtype=np.float64)


def _minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] (all zeros when the values are constant)."""
    if not len(values):
        return np.asarray(values, dtype=np.float64)
    low = float(values.min())
    span = float(values.max()) - low
    if span <= 1e-12:
        return np.zeros(len(values))
    return np.asarray((values - low) / span, dtype=np.float64)


def _best_first(index: FactIndex, scores: np.ndarray, size: int) -> list[int]:
    """Positions of the ``size`` best finite scores, best first; ties: newer first, then the
    earlier position."""
    finite = np.flatnonzero(np.isfinite(scores))
    if size <= 0 or not len(finite):
        return []
    order = np.lexsort((finite, index.recency_rank[finite], -scores[finite]))
    return [int(finite[j]) for j in order[:size]]


def _hubness(index: FactIndex) -> np.ndarray:
    """Per fact, its similarity to the memory's mean: the dense one when vectors are attached,
    else the lexical one (zeros for an index without character n-grams)."""
    dense = index.hubness()
    if dense is not None:
        return dense
    if isinstance(index.lexical, CharNgramIndex):
        return index.lexical.centroid_similarity()
    return np.zeros(len(index))


def queryless_scores(index: FactIndex, params: QuerylessParams) -> QuerylessScores:
    """Every part of the query-less score per fact (:class:`QuerylessScores`). Pure."""
    n = len(index)
    specificity = _minmax(-_hubness(index))
    entity = entity_richness(index, params.entity_cap) if params.entity_weight else np.zeros(n)
    recency = index.recency(params.recency_half_life_days) if n else np.zeros(0)
    usage = index.usage
    confidence = index.confidence
    score = (
        params.specificity_weight * specificity
        + params.entity_weight * entity
        + params.usage_weight * usage
        + params.recency_weight * recency
        + params.confidence_weight * confidence
    )
    categories = frozenset(params.guaranteed_categories)
    guaranteed = np.array([f.category in categories for f in index.facts], dtype=bool)
    return QuerylessScores(
        np.asarray(score, dtype=np.float64),
        specificity,
        entity,
        usage,
        recency,
        confidence,
        guaranteed,
    )


def topic_similarity(index: FactIndex, positions: Sequence[int]) -> np.ndarray:
    """Pairwise topic similarity of the facts at ``positions`` (in that order): the cosine of
    their mean-centred vectors when the index has vectors, else of their n-gram TF-IDF rows."""
    dense = index.dense
    if dense is not None:
        rows = np.asarray(dense[list(positions)], dtype=np.float64)
        centred = rows - np.asarray(dense.mean(axis=0), dtype=np.float64)
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        centred = centred / np.where(norms > 1e-12, norms, 1.0)
        return np.asarray(centred @ centred.T, dtype=np.float64)
    if isinstance(index.lexical, CharNgramIndex):
        return index.lexical.row_similarity(positions)
    return np.zeros((len(positions), len(positions)))


def spread(scores: np.ndarray, similarity: np.ndarray, k: int, diversity: float) -> list[int]:
    """Greedy maximal marginal relevance (pure): ``k`` positions of ``scores`` (the candidates,
    best first on ties), each step taking the best ``score − diversity × max(0, highest
    similarity to a pick already taken)``. Returns positions into ``scores``."""
    n = len(scores)
    if k <= 0 or n == 0:
        return []
    base = np.asarray(scores, dtype=np.float64)
    closest = np.zeros(n)
    free = np.ones(n, dtype=bool)
    taken: list[int] = []
    while len(taken) < min(k, n):
        value = np.where(free, base - diversity * closest, -np.inf)
        j = int(np.argmax(value))  # the first maximum: the earlier candidate on ties
        taken.append(j)
        free[j] = False
        np.maximum(closest, np.maximum(similarity[j], 0.0), out=closest)
    return taken


def choose_queryless(index: FactIndex, params: QuerylessParams, k: int) -> QuerylessChoice:
    """The ``k`` facts of ``index`` for a block with no message to match, in block order (see
    the module docstring): guaranteed categories newest first, then the best of the rest by
    :func:`queryless_scores`, spread over topics with :func:`spread`. Pure and deterministic:
    equal scores go to the newer fact, then to the earlier one in the index."""
    parts = queryless_scores(index, params)
    n = len(index)
    if k <= 0 or n == 0:
        return QuerylessChoice((), parts)
    recency_rank = index.recency_rank
    guaranteed = sorted(np.flatnonzero(parts.guaranteed).tolist(), key=lambda i: recency_rank[i])
    picks = guaranteed[:k]
    room = k - len(picks)
    if room > 0:
        rest = np.where(parts.guaranteed, -np.inf, parts.score)
        size = n if params.pool <= 0 else max(room, params.pool)
        candidates = _best_first(index, rest, size)
        if params.diversity > 0 and len(candidates) > 1:
            similarity = topic_similarity(index, candidates)
            order = spread(parts.score[candidates], similarity, room, params.diversity)
            picks += [candidates[j] for j in order]
        else:
            picks += candidates[:room]
    return QuerylessChoice(tuple(picks), parts)

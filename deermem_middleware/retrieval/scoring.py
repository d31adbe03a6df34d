"""Scoring facts for a query (pure: no I/O, no model calls): relevance, confidence, recency,
the time, entity, rule, conversation and feedback routes, and the ranking.

See :mod:`deermem_middleware.retrieval.selector` for why the score is what it is (measured).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.decay import effective_confidence, last_confirmed
from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.time import (
    TimeIntent,
    epoch_seconds,
    event_date_range,
    query_time_intent,
)
from deermem_middleware.memory.usage import access_frequency
from deermem_middleware.retrieval.entities import EntityIndex, extract_entities
from deermem_middleware.retrieval.lexical import CharNgramIndex, WordTfidfIndex
from deermem_middleware.retrieval.queryless import QuerylessChoice, QuerylessParams
from deermem_middleware.retrieval.rules import RecallRule, compile_pattern, rule_hits

__all__ = [
    "FactIndex",
    "Method",
    "ScoredFact",
    "Scores",
    "SelectionParams",
    "SelectionQuery",
    "feedback_bonus",
    "minmax",
    "newer_competitors_first",
    "rank",
    "rank_diverse",
    "recall_rules_from_config",
    "route_hits",
    "score_facts",
    "thread_bonus",
    "time_bonus",
]

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
    usage: float = 0.0
    """The usage part's input (:func:`~deermem_middleware.memory.usage.access_frequency`: how
    often the fact was used when injected), before ``usage_weight``."""
    entity: float = 0.0
    """The entity route's bonus in [0, 1] (the share of the message's entities the fact
    names), before ``entity_weight``."""
    rule: str | None = None
    """The name of the recall rule that recalled the fact (None: no rule did)."""
    thread: float = 0.0
    """The conversation route's input (:func:`thread_bonus`: the best relevance among the other
    facts learnt in the same conversation), before ``thread_weight``."""
    feedback: float = 0.0
    """The feedback route's input (:func:`feedback_bonus`: closeness to the best first-pass
    matches, scaled to [0, 1]), before ``feedback_weight``; 0 without the semantic channel."""
    routes: tuple[tuple[str, float], ...] = ()
    """Which routes found the fact, with their raw scores: ``lexical`` and ``semantic`` when
    the channel alone ranks it within ``top_k`` (raw cosine), ``entity``, ``time`` and
    ``usage`` when they give it a bonus, ``rule`` (1.0) when a recall rule names it,
    ``thread`` when a fact learnt in the same conversation matched, ``feedback`` (raw cosine
    to the best first-pass matches' centroid) when that ranks it within ``top_k``."""


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
    hub_weight: float = 0.6
    """Semantic channel: subtract ``hub_weight`` × each fact's similarity to the memory's mean
    vector (the same as querying with ``q − hub_weight × mean``). Generic facts ("asks how
    things are going") sit near the mean and otherwise rank high for every question; 0 turns
    this off. LoCoMo dev, hit@15: +1.4 in both modes, for any weight from 0.5 to 0.8."""
    duplicate_similarity: float = 0.92
    """Semantic channel: a candidate whose cosine to a pick already taken exceeds this is a
    near-duplicate, demoted by ``duplicate_penalty`` × (cos − threshold) / (1 − threshold), so
    the picks cover more than one statement of the same thing (≈ the 99th percentile of
    fact–fact cosines for multilingual-e5-small); ≥ 1 turns this off."""
    duplicate_penalty: float = 0.03
    usage_weight: float = 0.02
    """Weight of the usage signal: facts that answers used when they were injected
    (:func:`~deermem_middleware.memory.usage.access_frequency`, in [0, 1)) rank a little higher.
    Measured on LoCoMo dev (``benchmarks/usage_weight.py``: usage counted on half of each
    conversation's questions, hit@15 on the other half, 885 questions): weights 0 / 0.02 / 0.05 /
    0.1 / 0.2 give 75.25 / 75.37 / 75.48 / 75.48 / 75.37 with the shipped selection, 70.17 /
    70.06 / 69.94 / 70.06 / 70.06 lexical-only — all within ±2 questions, since LoCoMo seldom asks
    twice about the same evidence. 0.02: a tie-breaker as large as recency's (at most +0.017)."""
    entity_weight: float = 0.1
    """Weight of the entity route's bonus (:mod:`deermem_middleware.retrieval.entities`); 0
    turns the route off."""
    rule_weight: float = 1.0
    """Bonus of the facts a recall rule names (1: above any relevance score)."""
    thread_weight: float = 0.2
    """Weight of the conversation route (:func:`thread_bonus`); 0 turns it off. Measured on
    LoCoMo dev (``benchmarks/locomo_retrieval.py``, each session its own thread), hit@15 with
    embeddings, question / tail mode: 0 → 77.1 / 77.1, 0.1 → 77.4 / 77.4, 0.2 → 77.6 / 77.7,
    0.3 → 77.6 / 77.6."""
    feedback_weight: float = 0.2
    """Weight of the feedback route (:func:`feedback_bonus`, semantic channel only); 0 turns it
    off. Measured on LoCoMo dev (``benchmarks/locomo_retrieval.py``), hit@15 with embeddings,
    question / tail mode, route off: 77.6 / 77.7; with ``feedback_facts`` 3 and
    ``feedback_pool`` 45, weights 0.15 / 0.2 / 0.25 / 0.3 / 0.4 → 78.3 / 77.9, 78.2 / 78.0, 78.1 /
    77.7, 78.0 / 77.9, 78.1 / 77.4 (pools of 30, 60, 100 and every fact within ±0.3 of these at
    0.15–0.3)."""
    feedback_facts: int = 3
    """How many first-pass matches the feedback route's centroid is made of. Over every fact at
    0.3: 2 → 78.1 / 77.7, 3 → 78.3 / 78.1, 4 → 78.1 / 77.7; at 0.2, 5 → 77.5 / 77.4 and 10 → 77.2
    / 77.2: beyond a handful the centroid drifts to what the memory is about in general."""
    feedback_pool: int = 45
    """How many first-pass facts the feedback route re-ranks (3 × the default ``top_k``, as
    many as the ranking draws its picks from); 0: every fact (one more pass over all vectors:
    +0.7–1.2 ms at 10,000 facts, for no better hit@15)."""
    recall_rules: tuple[RecallRule, ...] = ()
    """The rule route (:mod:`deermem_middleware.retrieval.rules`)."""
    queryless: QuerylessParams = field(default_factory=QuerylessParams)
    """``deermem`` with nothing to match (a blank message and no turns before it: DeerFlow's
    ``get_context`` before the thread's first message): the query-less choice of
    :mod:`deermem_middleware.retrieval.queryless` instead of the formula above."""

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
            usage_weight=config.usage_weight if config.selection == "deermem" else 0.0,
            entity_weight=config.entity_weight if config.selection == "deermem" else 0.0,
            rule_weight=config.rule_weight,
            recall_rules=recall_rules_from_config(config.recall_rules),
            thread_weight=config.thread_weight if config.selection == "deermem" else 0.0,
            feedback_weight=config.feedback_weight if config.selection == "deermem" else 0.0,
            queryless=QuerylessParams(
                guaranteed_categories=(
                    tuple(config.guaranteed_categories)
                    if config.guaranteed_token_budget > 0
                    else ()
                )
            ),
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
        self.usage = access_frequency(self.facts)
        """Per fact, how often answers used it when it was injected (see ``usage_weight``)."""
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
        self._hub: tuple[np.ndarray, np.ndarray] | None = None
        self._entities: EntityIndex | None = None
        self.rule_masks: dict[RecallRule, np.ndarray] = {}
        """Per recall rule, the facts it names (filled on first use)."""
        self._manual: tuple[Fact, ...] | None = None
        self._threads: np.ndarray | None = None
        self.queryless_choices: dict[
            tuple[QuerylessParams, int], tuple[np.ndarray | None, QuerylessChoice]
        ] = {}
        """The query-less choices made on this revision, per (params, k), with the ``dense``
        they were made with: the choice does not depend on the message, so ``get_context``
        calls after the first cost a look-up (filled by the selector)."""

    @property
    def threads(self) -> np.ndarray:
        """Per fact, a number for the conversation (``source``) it was learnt in; -1 when it has
        none (typed by a person, imported). Built on first use."""
        if self._threads is None:
            numbers: dict[str, int] = {}
            self._threads = np.array(
                [
                    numbers.setdefault(f.source, len(numbers)) if f.source else -1
                    for f in self.facts
                ],
                dtype=np.int64,
            )
        return self._threads

    def manual_facts(self) -> tuple[Fact, ...]:
        """The user's own (manual) facts among these, found once per revision: manual
        precedence asks for them on every model call, and scanning 10,000 facts for them took
        0.4 ms of a 0.8 ms selection."""
        if self._manual is None:
            self._manual = tuple(f for f in self.facts if f.manual)
        return self._manual

    def hubness(self) -> np.ndarray | None:
        """Per fact, its vector's dot product with the mean fact vector (None: lexical only).
        Computed once per attached ``dense`` (O(n·d), 2–3 ms at 10,000 facts)."""
        dense = self.dense
        if dense is None:
            return None
        if self._hub is None or self._hub[0] is not dense:
            mean = dense.mean(axis=0)
            self._hub = (dense, np.asarray(dense @ mean, dtype=np.float64))
        return self._hub[1]

    @property
    def entities(self) -> EntityIndex:
        """The facts' entities — those the extraction listed and those the rules find in the
        text — built on first use (selection without the entity route never pays for it)."""
        if self._entities is None:
            self._entities = EntityIndex(
                [(*f.entities, *extract_entities(f.content)) for f in self.facts]
            )
        return self._entities

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


def recall_rules_from_config(rules: Sequence[Any]) -> tuple[RecallRule, ...]:
    """Compiled :class:`RecallRule` s from ``recall_rules`` entries (config models or dicts with
    ``name``, ``match``, ``categories``, ``topics``); unnamed rules are ``rule 1``, ``rule 2``…"""
    compiled = []
    for number, rule in enumerate(rules, 1):
        data = rule if isinstance(rule, Mapping) else rule.model_dump()
        where = f"recall_rules[{number - 1}]"
        topics = data.get("topics")
        compiled.append(
            RecallRule(
                name=data.get("name") or f"rule {number}",
                match=compile_pattern(data["match"], f"{where}.match"),
                categories=frozenset(data.get("categories") or ()),
                topics=None if topics is None else compile_pattern(topics, f"{where}.topics"),
            )
        )
    return tuple(compiled)


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


_NO_INTENT = TimeIntent()


@lru_cache(maxsize=1024)
def _cached_intent(text: str, day: datetime) -> TimeIntent:
    """:func:`~deermem_middleware.memory.time.query_time_intent` per (message, day): tool loops and
    retries send the same message several times, and periods only depend on the day."""
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


@dataclass(frozen=True, slots=True)
class Scores:
    """Every part of the score of every fact, for one query (arrays indexed like the facts)."""

    score: np.ndarray
    relevance: np.ndarray
    lexical: np.ndarray
    semantic: np.ndarray | None
    time: np.ndarray
    """The time route's bonus, before ``time_weight``."""
    entity: np.ndarray
    """The entity route's bonus, before ``entity_weight``."""
    entities: tuple[str, ...] = ()
    """The entities of the message found among the facts' entities."""
    rule: np.ndarray | None = None
    """Facts a recall rule recalled (None: no rule applied)."""
    rule_names: tuple[str | None, ...] = ()
    """Per fact, the first applying rule that recalled it."""
    rules: tuple[RecallRule, ...] = ()
    """The recall rules that applied to the message."""
    thread: np.ndarray | None = None
    """The conversation route's bonus, before ``thread_weight`` (None: the route is off)."""
    feedback: np.ndarray | None = None
    """The feedback route's bonus, before ``feedback_weight`` (None: off, or no vectors)."""
    feedback_similarity: np.ndarray | None = None
    """The raw cosines of the facts to the feedback route's centroid."""


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
    context_vector: np.ndarray | None = None,
    now: datetime | None = None,
    intent: TimeIntent | None = None,
) -> Scores:
    """Every part of the score per fact (:class:`Scores`). Pure: no I/O, no model calls.

    ``intent``: the question's :class:`TimeIntent` when the caller has it (else it is read from
    ``query.primary`` against ``now``)."""
    n = len(index)
    if params.method == "seed":
        lexical = index.lexical.scores(query.concatenated)
        zeros = np.zeros(n)
        return Scores(
            params.relevance_weight * lexical + params.confidence_weight * index.confidence,
            lexical,
            lexical,
            None,
            zeros,
            zeros,
        )
    dense = index.dense if primary_vector is not None else None
    lexical = index.lexical.scores(query.primary)
    hub = index.hubness() if dense is not None and params.hub_weight > 0 else None
    semantic = dense @ primary_vector if dense is not None else None  # reported as is
    relevance = _fused(lexical, _dehubbed(semantic, hub, params), params.lexical_weight)
    if query.context.strip() and params.context_weight > 0 and n:
        ctx_lexical = index.lexical.scores(query.context)
        ctx_semantic = (
            dense @ context_vector if dense is not None and context_vector is not None else None
        )
        ctx = _fused(ctx_lexical, _dehubbed(ctx_semantic, hub, params), params.lexical_weight)
        top = float(ctx.max())
        if top > 0:
            relevance = relevance + params.context_weight * ctx / top
    score = params.relevance_weight * relevance + params.confidence_weight * index.confidence
    if params.recency_weight > 0 and n:
        score = score + params.recency_weight * index.recency(params.recency_half_life_days)
    if params.usage_weight > 0 and n:
        score = score + params.usage_weight * index.usage
    bonus = np.zeros(n)
    if params.time_weight > 0 and n:
        if intent is None and now is not None:
            intent = query_time_intent(query.primary, now)
        elif intent is None:  # no clock: only the parts that need none
            seen = query_time_intent(query.primary, datetime.now(UTC))
            intent = TimeIntent(asks_when=seen.asks_when, current=seen.current)
        bonus = time_bonus(index, intent, params)
        score = score + params.time_weight * bonus
    entity = np.zeros(n)
    names: list[str] = []
    if params.entity_weight > 0 and n:
        entity, names = index.entities.bonus(query.primary)
        if names:
            score = score + params.entity_weight * entity
    thread: np.ndarray | None = None
    if params.thread_weight > 0 and n > 1:
        thread = thread_bonus(relevance, index.threads)
        score = score + params.thread_weight * thread
    feedback = feedback_similarity = None
    if params.feedback_weight > 0 and params.feedback_facts > 0 and dense is not None and n > 1:
        # seeded by every route but the rules: a rule's facts are recalled, not matched
        feedback, feedback_similarity = feedback_bonus(
            dense,
            score,
            params.feedback_facts,
            hub,
            params.hub_weight,
            pool=params.feedback_pool if params.feedback_pool > 0 else None,
        )
        score = score + params.feedback_weight * feedback
    hit: np.ndarray | None = None
    rule_names: list[str | None] = []
    applied: list[RecallRule] = []
    if params.recall_rules and n:
        pairs = [(f.category, f.content) for f in index.facts]
        hit, rule_names, applied = rule_hits(
            params.recall_rules, query.primary, pairs, index.rule_masks
        )
        if applied:
            score = score + params.rule_weight * hit
        else:
            hit = None
    return Scores(
        score,
        relevance,
        lexical,
        semantic,
        bonus,
        entity,
        tuple(names),
        hit,
        tuple(rule_names),
        tuple(applied),
        thread,
        feedback,
        feedback_similarity,
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
    parts: Scores, picks: Sequence[int], top_k: int, usage: np.ndarray | None = None
) -> list[tuple[tuple[str, float], ...]]:
    """Per pick, the routes that found it and their raw scores (see ``ScoredFact.routes``)."""
    lexical_top = _channel_top(parts.lexical, top_k)
    semantic_top = _channel_top(parts.semantic, top_k)
    feedback_top = _channel_top(parts.feedback_similarity, top_k)
    found: list[tuple[tuple[str, float], ...]] = []
    for i in picks:
        routes: list[tuple[str, float]] = []
        if lexical_top is not None and lexical_top[i]:
            routes.append(("lexical", float(parts.lexical[i])))
        if semantic_top is not None and parts.semantic is not None and semantic_top[i]:
            routes.append(("semantic", float(parts.semantic[i])))
        if parts.entity[i] > 0:
            routes.append(("entity", float(parts.entity[i])))
        if parts.time[i] > 0:
            routes.append(("time", float(parts.time[i])))
        if usage is not None and usage[i] > 0:
            routes.append(("usage", float(usage[i])))
        if parts.rule is not None and parts.rule[i]:
            routes.append(("rule", 1.0))
        if parts.thread is not None and parts.thread[i] > 0:
            routes.append(("thread", float(parts.thread[i])))
        if feedback_top is not None and parts.feedback_similarity is not None and feedback_top[i]:
            routes.append(("feedback", float(parts.feedback_similarity[i])))
        found.append(tuple(routes))
    return found


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

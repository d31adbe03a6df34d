"""The recall routes, each one unit: the score's parts beyond relevance and confidence, and the
channels that report which facts they found.

A :class:`Route` says everything the package needs to know about one route: its name (the label
in ``ScoredFact.routes``, the injection ledger, ``deermem explain`` and the console), the
:class:`SelectionParams` / ``MemoryConfig`` field of its weight (:class:`RouteWeights` holds the
default, which the config reuses), the function that computes its per-fact bonus, how it reports
the facts it found, its term in the explain formula and its CLI abbreviation. :data:`ROUTES` is
the one tuple that scoring, ``route_hits``, explain and the CLI loop over — in the order the
score adds the bonuses (the order matters for the last bit of a float sum, and the feedback route
reads the score of every route before it). Adding a route is a :class:`RouteWeights` field, a
bonus function and an entry here, plus its ``MemoryConfig`` field
(``docs/contributing/adding-a-route.md``).

The bonus functions themselves stay pure (:mod:`deermem_middleware.retrieval.bonuses`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from deermem_middleware.config.models import MemoryConfig
from deermem_middleware.memory.time import TimeIntent, query_time_intent
from deermem_middleware.retrieval.bonuses import feedback_bonus, thread_bonus, time_bonus
from deermem_middleware.retrieval.rules import rule_hits

if TYPE_CHECKING:
    from deermem_middleware.retrieval.index import FactIndex
    from deermem_middleware.retrieval.params import SelectionParams, SelectionQuery

__all__ = [
    "GUARANTEED",
    "QUERYLESS",
    "ROUTES",
    "ROUTE_ABBREVIATIONS",
    "Route",
    "RouteInput",
    "RouteResult",
    "RouteWeights",
]


def config_default(name: str) -> Any:
    """The default of the ``MemoryConfig`` field ``name``: where every selection default that
    the configuration shares is written."""
    return MemoryConfig.model_fields[name].default


GUARANTEED = "guaranteed"
"""The label of a fact injected for its category (``guaranteed_categories``), not ranked."""
QUERYLESS = "queryless"
"""The label of a fact the query-less choice picked
(:mod:`deermem_middleware.retrieval.queryless`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteWeights:
    """Each route's weight. The default is written once, on the ``MemoryConfig`` field of the
    same name (the configuration is the lower layer); :class:`SelectionParams` inherits these
    fields."""

    recency_weight: float = config_default("recency_weight")
    """A small bonus for recently learnt or confirmed facts: 1 for the newest, halving every
    ``recency_half_life_days`` before it (ages relative to the newest fact, not the wall clock,
    so a memory that was not used for a while does not fade as a whole)."""
    usage_weight: float = config_default("usage_weight")
    """Weight of the usage signal: facts that answers used when they were injected
    (:func:`~deermem_middleware.memory.usage.access_frequency`, in [0, 1)) rank a little higher.
    Measured on LoCoMo dev (``benchmarks/usage_weight.py``: usage counted on half of each
    conversation's questions, hit@15 on the other half, 885 questions): weights 0 / 0.02 / 0.05 /
    0.1 / 0.2 give 75.25 / 75.37 / 75.48 / 75.48 / 75.37 with the shipped selection, 70.17 /
    70.06 / 69.94 / 70.06 / 70.06 lexical-only — all within ±2 questions, since LoCoMo seldom asks
    twice about the same evidence. 0.02: a tie-breaker as large as recency's (at most +0.017)."""
    time_weight: float = config_default("time_weight")
    """Weight of the time route's bonus (see :mod:`deermem_middleware.retrieval.selector`); 0
    turns the route off."""
    entity_weight: float = config_default("entity_weight")
    """Weight of the entity route's bonus (:mod:`deermem_middleware.retrieval.entities`); 0
    turns the route off."""
    thread_weight: float = config_default("thread_weight")
    """Weight of the conversation route
    (:func:`~deermem_middleware.retrieval.bonuses.thread_bonus`); 0 turns it off. Measured on
    LoCoMo dev (``benchmarks/locomo_retrieval.py``, each session its own thread), hit@15 with
    embeddings, question / tail mode: 0 → 77.1 / 77.1, 0.1 → 77.4 / 77.4, 0.2 → 77.6 / 77.7,
    0.3 → 77.6 / 77.6."""
    feedback_weight: float = config_default("feedback_weight")
    """Weight of the feedback route
    (:func:`~deermem_middleware.retrieval.bonuses.feedback_bonus`, semantic channel only); 0
    turns it off. Measured on LoCoMo dev (``benchmarks/locomo_retrieval.py``), hit@15 with
    embeddings, question / tail mode, route off: 77.6 / 77.7; with ``feedback_facts`` 3 and
    ``feedback_pool`` 45, weights 0.15 / 0.2 / 0.25 / 0.3 / 0.4 → 78.3 / 77.9, 78.2 / 78.0, 78.1 /
    77.7, 78.0 / 77.9, 78.1 / 77.4 (pools of 30, 60, 100 and every fact within ±0.3 of these at
    0.15–0.3)."""
    rule_weight: float = config_default("rule_weight")
    """Bonus of the facts a recall rule names (1: above any relevance score)."""


@dataclass(slots=True, kw_only=True)
class RouteInput:
    """What a route's bonus function may read about one query (filled by ``score_facts``)."""

    index: FactIndex
    query: SelectionQuery
    params: SelectionParams
    relevance: np.ndarray
    """The fused relevance of every fact (context included)."""
    score: np.ndarray
    """The score so far: relevance, confidence and every route before this one."""
    dense: np.ndarray | None
    """The facts' unit vectors when the query has one (None: lexical only)."""
    hub: np.ndarray | None
    """Each fact's similarity to the mean fact (None: no vectors, or ``hub_weight`` 0)."""
    intent: TimeIntent | None
    now: datetime | None
    n: int
    """How many facts (``len(index)``)."""
    weight: float = 0.0
    """This route's weight (its :attr:`Route.weight` field of ``params``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteResult:
    """One route's answer for one query (arrays indexed like the facts)."""

    bonus: np.ndarray | None = None
    """Added to the score × the route's weight (None: a channel of relevance, nothing added)."""
    raw: np.ndarray | None = None
    """What the route reports when it ranks by its own values (``hits="top"``) when that is
    not the bonus: a channel's scores, the feedback route's raw cosines."""
    labels: tuple[str | None, ...] = ()
    """Per fact, a name for what found it (the recall rule's), or None."""
    found: tuple[Any, ...] = ()
    """What of the message the route matched (the entities, the recall rules that applied)."""

    @property
    def values(self) -> np.ndarray | None:
        """What route hits report: ``raw`` when given, else the bonus."""
        return self.bonus if self.raw is None else self.raw


def _deermem_weighted(params: SelectionParams, weight: float, semantic: bool, time: str) -> bool:
    """The formula shows a route's term when ``deermem`` scores with it."""
    return params.method == "deermem" and weight > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One recall route (see the module docstring)."""

    name: str
    """Its label: in ``ScoredFact.routes`` and ``.bonuses``, the ledger, explain and the console."""
    weight: str | None = None
    """The :class:`RouteWeights` (and ``MemoryConfig``) field of its weight; None for the
    channels of relevance, which add no bonus of their own."""
    bonus: Callable[[RouteInput], RouteResult | None] | None = None
    """Its per-fact bonus for one query; None when the route is off for it."""
    deermem_only: bool = True
    """``selection: seed`` turns it off (its weight 0 in ``SelectionParams.from_config``)."""
    hits: Literal["top", "positive"] | None = "positive"
    """When a pick counts as found by the route: its values among the ``top_k`` best
    (``top``), above 0 (``positive``), or never (None)."""
    term: str = ""
    """Its term in the explain formula after ``<weight> ×`` (``{field}``: a ``SelectionParams``
    field); "" keeps it out of the formula."""
    shown: Callable[[SelectionParams, float, bool, str], bool] = _deermem_weighted
    """Whether the formula shows the term: (params, weight, semantic channel on, what the time
    route does for this message)."""
    column: Literal["bonus", "label"] | None = "bonus"
    """What explain's rows show under its name: its bonus, its label, or nothing."""
    abbreviation: str | None = None
    """Its short name in the CLI's routes column (None: the name)."""


def _recency(c: RouteInput) -> RouteResult | None:
    if c.weight <= 0 or not c.n:
        return None
    return RouteResult(bonus=c.index.recency(c.params.recency_half_life_days))


def _usage(c: RouteInput) -> RouteResult | None:
    if c.weight <= 0 or not c.n:
        return None
    return RouteResult(bonus=c.index.usage)


def _time(c: RouteInput) -> RouteResult | None:
    if c.weight <= 0 or not c.n:
        return None
    intent = c.intent
    if intent is None and c.now is not None:
        intent = query_time_intent(c.query.primary, c.now)
    elif intent is None:  # no clock: only the parts that need none
        seen = query_time_intent(c.query.primary, datetime.now(UTC))
        intent = TimeIntent(asks_when=seen.asks_when, current=seen.current)
    return RouteResult(bonus=time_bonus(c.index, intent, c.params))


def _entity(c: RouteInput) -> RouteResult | None:
    if c.weight <= 0 or not c.n:
        return None
    entity, names = c.index.entities.bonus(c.query.primary)
    return RouteResult(bonus=entity, found=tuple(names)) if names else None


def _thread(c: RouteInput) -> RouteResult | None:
    if c.weight <= 0 or c.n < 2:
        return None
    return RouteResult(bonus=thread_bonus(c.relevance, c.index.threads))


def _feedback(c: RouteInput) -> RouteResult | None:
    params = c.params
    if c.weight <= 0 or params.feedback_facts <= 0 or c.dense is None or c.n < 2:
        return None
    # seeded by every route but the rules: a rule's facts are recalled, not matched
    bonus, similarity = feedback_bonus(
        c.dense,
        c.score,
        params.feedback_facts,
        c.hub,
        params.hub_weight,
        pool=params.feedback_pool if params.feedback_pool > 0 else None,
    )
    return RouteResult(bonus=bonus, raw=similarity)


def _rule(c: RouteInput) -> RouteResult | None:
    if not c.params.recall_rules or not c.n:
        return None
    pairs = [(f.category, f.content) for f in c.index.facts]
    hit, names, applied = rule_hits(
        c.params.recall_rules, c.query.primary, pairs, c.index.rule_masks
    )
    if not applied:
        return None
    return RouteResult(bonus=hit, labels=tuple(names), found=tuple(applied))


ROUTES: tuple[Route, ...] = (
    Route(name="lexical", hits="top", column=None, abbreviation="lex"),
    Route(name="semantic", hits="top", column=None, abbreviation="sem"),
    Route(
        name="recency",
        weight="recency_weight",
        bonus=_recency,
        deermem_only=False,
        hits=None,
        term="recency (1 for the newest fact, halving every {recency_half_life_days:g} days "
        "before it)",
        shown=lambda params, weight, semantic, time: weight > 0,
        column=None,
    ),
    Route(name="usage", weight="usage_weight", bonus=_usage, term="usage", column=None),
    Route(
        name="time",
        weight="time_weight",
        bonus=_time,
        term="time",
        shown=lambda params, weight, semantic, time: bool(time),
    ),
    Route(name="entity", weight="entity_weight", bonus=_entity, term="entity", abbreviation="ent"),
    Route(name="thread", weight="thread_weight", bonus=_thread, term="thread", abbreviation="thr"),
    Route(
        name="feedback",
        weight="feedback_weight",
        bonus=_feedback,
        hits="top",
        term="feedback",
        shown=lambda params, weight, semantic, time: (
            params.method == "deermem" and weight > 0 and semantic
        ),
        abbreviation="fb",
    ),
    Route(
        name="rule",
        weight="rule_weight",
        bonus=_rule,
        deermem_only=False,
        term="rule",
        shown=lambda params, weight, semantic, time: bool(params.recall_rules),
        column="label",
    ),
)
"""Every route, in the order the score adds them (see the module docstring)."""

ROUTE_ABBREVIATIONS: dict[str, str] = {
    **{r.name: r.abbreviation for r in ROUTES if r.abbreviation},
    GUARANTEED: "g",
    QUERYLESS: "ql",
}
"""The CLI's short names of the labels in ``ScoredFact.routes``."""

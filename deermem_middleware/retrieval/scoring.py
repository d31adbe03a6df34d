"""The scoring's public names in one place, as before the split (pure: no I/O, no model calls).

The code lives in :mod:`~deermem_middleware.retrieval.params` (the knobs and the query),
:mod:`~deermem_middleware.retrieval.index` (one revision's index),
:mod:`~deermem_middleware.retrieval.routes` (every recall route, one unit each),
:mod:`~deermem_middleware.retrieval.bonuses` (the routes' pure bonus functions) and
:mod:`~deermem_middleware.retrieval.ranking` (the score, route hits and the ranking). See
:mod:`deermem_middleware.retrieval.selector` for why the score is what it is (measured).
"""

from __future__ import annotations

from deermem_middleware.retrieval.bonuses import feedback_bonus, minmax, thread_bonus, time_bonus
from deermem_middleware.retrieval.index import FactIndex, Method
from deermem_middleware.retrieval.params import (
    SelectionParams,
    SelectionQuery,
    recall_rules_from_config,
)
from deermem_middleware.retrieval.ranking import (
    ScoredFact,
    Scores,
    newer_competitors_first,
    rank,
    rank_diverse,
    route_hits,
    score_facts,
)
from deermem_middleware.retrieval.routes import ROUTES, Route

__all__ = [
    "ROUTES",
    "FactIndex",
    "Method",
    "Route",
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

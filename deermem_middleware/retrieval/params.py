"""What selection is asked: the knobs of the score (:class:`SelectionParams`, derived from
the configuration in one place) and the query (:class:`SelectionQuery`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.retrieval.index import Method
from deermem_middleware.retrieval.queryless import QuerylessParams
from deermem_middleware.retrieval.routes import ROUTES, RouteWeights, config_default
from deermem_middleware.retrieval.rules import RecallRule, compile_pattern

__all__ = [
    "SELECTION_DEFAULTS",
    "Method",
    "SelectionParams",
    "SelectionQuery",
    "recall_rules_from_config",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionParams(RouteWeights):
    """The knobs of the score (see :mod:`deermem_middleware.retrieval.selector` for why these
    defaults); each route's weight is inherited from :class:`RouteWeights`.

    Each default is written once: a field this class shares with ``MemoryConfig`` takes the
    config field's default (:func:`~deermem_middleware.retrieval.routes.config_default`), the
    others are written here; :meth:`from_config` copies every shared field by name."""

    method: Method = "deermem"
    top_k: int = config_default("top_k")
    relevance_weight: float = 1.0
    confidence_weight: float = 0.05
    context_weight: float = config_default("context_weight")
    lexical_weight: float = config_default("lexical_weight")
    query_turns: int = config_default("query_turns")
    recency_half_life_days: float = 90.0
    """How fast the recency part halves before the newest fact (see ``recency_weight``)."""
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
    def seed(cls, top_k: int | None = None, query_turns: int | None = None) -> SelectionParams:
        """The seed's formula: 0.6 × TF-IDF cosine to the turns concatenated + 0.4 × conf
        (``top_k``, ``query_turns``: None for the defaults)."""
        default = cls()
        return cls(
            method="seed",
            top_k=default.top_k if top_k is None else top_k,
            relevance_weight=0.6,
            confidence_weight=0.4,
            query_turns=default.query_turns if query_turns is None else query_turns,
            recency_weight=0.0,
            time_weight=0.0,
        )

    @classmethod
    def from_config(cls, config: Any) -> SelectionParams:
        """From a :class:`~deermem_middleware.config.MemoryConfig`: every field both share, by
        name (``None``: the method's default, e.g. ``relevance_weight``); ``selection`` is
        ``method``; ``selection: seed`` turns the ``deermem``-only routes off; the recall rules
        are compiled, and the guaranteed categories go to the query-less choice."""
        method = config.selection
        base = cls.seed() if method == "seed" else cls()
        values: dict[str, Any] = {}
        for name in _FROM_CONFIG:
            value = getattr(config, name, None)
            values[name] = getattr(base, name) if value is None else value
        for route in ROUTES:
            if route.weight is not None and route.deermem_only and method != "deermem":
                values[route.weight] = 0.0
        return cls(
            **values,
            method=method,
            recall_rules=recall_rules_from_config(config.recall_rules),
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


_NOT_COPIED = frozenset({"method", "recall_rules", "queryless"})
"""Fields :meth:`SelectionParams.from_config` derives rather than copies."""
_FROM_CONFIG = tuple(f.name for f in fields(SelectionParams) if f.name not in _NOT_COPIED)
"""The fields a config may set under the same name (a config without one: the default)."""

SELECTION_DEFAULTS = SelectionParams()
"""The defaults (those shared with ``MemoryConfig`` are the config fields' defaults)."""


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

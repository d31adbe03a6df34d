"""Why a fact would or would not be injected for a message: the report behind ``deermem explain``
and the web console's explain view.

Both faces need the same answer — the score formula in words, every ranked fact with its score
parts and token cost, whether it made the block, and the block itself — so it is computed here
once, as plain JSON-ready data, and each face only lays it out. On top of the numbers, each fact
carries a ``reason`` in words ("in the block (rank 2)", "ranked 7 but did not fit the token
budget"), and every stored fact that was not ranked is listed under ``others`` with its own reason
(superseded, beyond ``top_k``...): "why is this fact not in the prompt?" is the question people
ask, and the scores alone do not answer it.

The reasons are derived from what the selection and the renderer reported, never recomputed: the
report describes the block that *would* be injected (``injectionEnabled`` says whether it is).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

from deermem_middleware.injection.render import escape_memory_text, fact_line
from deermem_middleware.injection.tokens import make_token_counter
from deermem_middleware.memory.time import TimeIntent, query_time_intent
from deermem_middleware.retrieval.routes import ROUTES, Route

if TYPE_CHECKING:
    from deermem_middleware.config import MemoryConfig
    from deermem_middleware.injection.recall import Recall
    from deermem_middleware.memory.document import Fact, Memory
    from deermem_middleware.retrieval.index import FactIndex
    from deermem_middleware.retrieval.params import SelectionParams
    from deermem_middleware.retrieval.ranking import ScoredFact
    from deermem_middleware.storage.base import MemoryScope

__all__ = ["describe_intent", "explain_report"]

WITHHELD = "withheld: reads as an instruction, not data"
OVERRULED = "withheld: the user's own fact {rival} says otherwise (“{content}”)"
EMPTY_TEXT = "not shown: nothing is left of its text once escaped"


def describe_intent(intent: TimeIntent) -> str:
    """What the time route does for this message, in words ("" when the message is not about
    time): the bonus is invisible in a score column unless someone says what earns it."""
    parts = []
    if intent.period is not None:
        start, end = intent.period
        last = (end - timedelta(seconds=1)).date().isoformat()
        parts.append(f"facts dated {start.date().isoformat()} to {last} get up to 1")
    if intent.current:
        parts.append("the present: newer facts get more and come before older competitors")
    if intent.asks_when:
        parts.append("'when': 0.5 for facts that know their event date")
    return "; ".join(parts)


class _Fields:
    """``str.format_map`` over a ``SelectionParams``: a route's term names its fields."""

    __slots__ = ("params",)

    def __init__(self, params: SelectionParams) -> None:
        self.params = params

    def __getitem__(self, name: str) -> Any:
        return getattr(self.params, name)


def _score_formula(params: SelectionParams, time_route: str, *, semantic: bool) -> str:
    """The score line: the weights as configured, each route that takes part named (in the
    order the score adds them, :data:`~deermem_middleware.retrieval.routes.ROUTES`)."""
    formula = (
        f"score = {params.relevance_weight:.2f} × relevance + "
        f"{params.confidence_weight:.2f} × confidence"
    )
    for route in ROUTES:
        if not route.term or route.weight is None:
            continue
        weight = getattr(params, route.weight)
        if route.shown(params, weight, semantic, time_route):
            formula += f" + {weight:.2f} × {route.term.format_map(_Fields(params))}"
    return formula


def _relevance_formula(params: SelectionParams, semantic: bool) -> str:
    """What ``relevance`` is made of for this selector (seed, lexical only, or fused)."""
    if params.method == "seed":
        return "relevance = word TF-IDF cosine to the last turns (selection: seed)"
    if semantic:
        return (
            f"relevance = {params.lexical_weight:.2f} × lexical + "
            f"{1 - params.lexical_weight:.2f} × semantic, each min-max scaled over the facts"
        )
    return "relevance = lexical (character n-gram TF-IDF; no embedding channel)"


def _column(route: Route, scored: ScoredFact) -> float | str | None:
    """What a row shows under a route's name (:attr:`Route.column`)."""
    return scored.label(route.name) if route.column == "label" else scored.bonus(route.name)


def _row_reason(
    *, guaranteed: bool, rank: int, in_block: bool, line: str | None, content: str, budget: int
) -> str:
    """Why a ranked (or guaranteed) fact is or is not in the block, from what rendering did."""
    if guaranteed:
        return "guaranteed (always injected)"
    if in_block:
        return f"in the block (rank {rank})"
    if line is None:
        return WITHHELD
    if not escape_memory_text(content):
        return EMPTY_TEXT
    return f"ranked {rank} but did not fit the token budget (max_injection_tokens {budget})"


def _other_reason(fact: Fact, config: MemoryConfig, top_k: int, *, nothing_fit: bool) -> str:
    """Why a stored fact that was not ranked for this message is not in the block."""
    if fact.status != "active":
        return f"status {fact.status}: only active facts are injected"
    if nothing_fit and top_k > 0:
        return (
            f"active, but nothing fit the token budget (max_injection_tokens "
            f"{config.max_injection_tokens}): the block is empty"
        )
    if config.guaranteed_token_budget > 0 and fact.category in config.guaranteed_categories:
        # guaranteed facts are never ranked: one missing from the rows did not make its budget
        if fact_line(fact, config.show_fact_dates) is None:
            return WITHHELD
        if not escape_memory_text(fact.content):
            return EMPTY_TEXT
        return (
            f"guaranteed category {fact.category!r}, but did not fit guaranteed_token_budget "
            f"{config.guaranteed_token_budget}"
        )
    return f"active, but not among the top_k {top_k} ranked for this message"


def explain_report(
    recall: Recall,
    memory: Memory,
    scope: MemoryScope,
    message: str,
    *,
    injection_enabled: bool | None = None,
    index: FactIndex | None = None,
) -> dict[str, Any]:
    """What would be injected into a model call whose newest message is ``message``, and why.

    The JSON-ready report ``deermem explain --json`` prints: ``user``, ``agent``, ``message``,
    ``injectionEnabled``, ``formula`` (score and relevance, joined by ``"; "``), ``relevance``
    (the relevance part alone), ``timeRoute`` (what the time route does for this message, or
    None), ``entityRoute`` (the message's entities found among the facts' and the route's
    weight, or None), ``recallRules`` (every configured rule in words, and whether it
    applies), ``activeFacts``, ``topK``, ``facts`` (the guaranteed facts shown, then every
    relevance pick offered to the renderer, best first, with score parts, ``routes`` (which
    routes found it, with their raw scores), tokens, ``inBlock`` and a ``reason``), ``others``
    (every other stored fact: ``id``, ``content``, ``category``, ``status``, ``reason``),
    ``blockTokens``, ``maxInjectionTokens``, ``tokenCounting`` and ``block`` (the exact text).

    ``memory`` is the document of ``scope``, loaded once by the caller
    (:meth:`MemoryService.explain_report`), so the rows and ``others`` describe the same
    revision; ``index`` is its index (the engine's read path: built from the stored derived
    data, so the embedding channel is there when the document's vectors are). An extracted
    pick that the user's own fact overrules is listed with the pick's scores and that reason.
    ``injection_enabled``: None reads the config's ``injection_enabled`` (a host that turns
    memory off for a run passes its own answer).
    """
    config = recall.config
    selector = recall.selector
    params = selector.params
    rendered = recall.explain(scope, memory, [HumanMessage(message)], index=index)
    intent = query_time_intent(message, selector.clock())
    count = make_token_counter(config.token_counting)
    guaranteed = list(rendered.guaranteed)
    ranked = list(rendered.ranked)  # exactly the picks the block was built from
    in_block = {p.fact.id for p in rendered.facts} | {g.fact.id for g in guaranteed}
    rows: list[dict[str, Any]] = []
    picks = [(g, True, 0) for g in guaranteed] + [(s, False, i) for i, s in enumerate(ranked, 1)]
    for scored, is_guaranteed, rank in picks:
        fact = scored.fact
        line = fact_line(fact, config.show_fact_dates)
        recency = None
        if not is_guaranteed and params.recency_weight > 0:
            recency = scored.recency
        shown = fact.id in in_block
        rows.append(
            {
                "id": fact.id,
                "content": fact.content,
                "category": fact.category,
                "confidence": fact.confidence,
                "confidenceUsed": None if is_guaranteed else scored.confidence,
                "guaranteed": is_guaranteed,
                "relevance": None if is_guaranteed else scored.relevance,
                "lexical": None if is_guaranteed else scored.lexical,
                "semantic": None if is_guaranteed else scored.semantic,
                "recency": recency,
                **{
                    route.name: None if is_guaranteed else _column(route, scored)
                    for route in ROUTES
                    if route.column is not None
                },
                "placedAfter": None if is_guaranteed else scored.after,
                "routes": {"guaranteed": 1.0} if is_guaranteed else dict(scored.routes),
                "score": None if is_guaranteed else scored.score,
                "tokens": count(line or ""),
                "inBlock": shown,
                "reason": _row_reason(
                    guaranteed=is_guaranteed,
                    rank=rank,
                    in_block=shown,
                    line=line,
                    content=fact.content,
                    budget=config.max_injection_tokens,
                ),
            }
        )
    by_id = {f.id: f for f in memory.facts}
    for scored, rival in rendered.overruled:
        fact = scored.fact
        manual = by_id.get(rival)
        rows.append(
            {
                "id": fact.id,
                "content": fact.content,
                "category": fact.category,
                "confidence": fact.confidence,
                "confidenceUsed": scored.confidence,
                "guaranteed": False,
                "relevance": scored.relevance,
                "lexical": scored.lexical,
                "semantic": scored.semantic,
                "recency": scored.recency if params.recency_weight > 0 else None,
                **{
                    route.name: _column(route, scored)
                    for route in ROUTES
                    if route.column is not None
                },
                "placedAfter": None,
                "routes": dict(scored.routes),
                "score": scored.score,
                "tokens": 0,
                "inBlock": False,
                "overruledBy": rival,
                "reason": OVERRULED.format(
                    rival=rival, content=manual.content if manual is not None else ""
                ),
            }
        )
    listed = {r["id"] for r in rows}
    nothing_fit = not rendered.text and not rows
    others = [
        {
            "id": f.id,
            "content": f.content,
            "category": f.category,
            "status": f.status,
            "reason": _other_reason(f, config, params.top_k, nothing_fit=nothing_fit),
        }
        for f in memory.facts
        if f.id not in listed
    ]
    time_route = describe_intent(intent) if params.time_weight > 0 else ""
    entities: list[str] = []
    if params.method == "deermem" and params.entity_weight > 0:
        # the index the selection above used (cached per revision): its entities are built
        used = index if index is not None else selector.index(scope, memory)
        entities = used.entities.matches(message)
    rules = [
        {"name": rule.name, "rule": rule.describe(), "applies": rule.applies(message)}
        for rule in params.recall_rules
    ]
    formula = _score_formula(params, time_route, semantic=selector.semantic)
    relevance = _relevance_formula(params, selector.semantic)
    enabled = config.injection_enabled if injection_enabled is None else injection_enabled
    return {
        "user": scope.user_id,
        "agent": scope.agent_name,
        "message": message,
        "injectionEnabled": bool(enabled),
        "formula": f"{formula}; {relevance}",
        "relevance": relevance,
        "timeRoute": time_route or None,
        "entityRoute": (
            {"entities": entities, "weight": params.entity_weight} if entities else None
        ),
        "recallRules": rules,
        "activeFacts": sum(1 for f in memory.facts if f.status == "active"),
        "topK": params.top_k,
        "facts": rows,
        "others": others,
        "blockTokens": rendered.tokens,
        "maxInjectionTokens": config.max_injection_tokens,
        "tokenCounting": config.token_counting,
        "block": rendered.text,
    }

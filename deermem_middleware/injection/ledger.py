"""The injection ledger: which facts, with which scores, went into which model call.

For callbacks (``MemoryMiddleware.add_injection_listener``), ``MemoryMiddleware.ledger`` (the most
recent records) and ``deermem explain`` — so every injected line can be explained after the fact.
"""

from __future__ import annotations

from dataclasses import dataclass

from deermem_middleware.retrieval.selector import ScoredFact
from deermem_middleware.runtime.ids import current_config

__all__ = ["InjectedFact", "InjectionRecord", "current_thread_id"]


@dataclass(frozen=True, slots=True)
class InjectedFact:
    fact_id: str
    content: str
    score: float
    relevance: float
    lexical: float
    semantic: float | None
    confidence: float
    guaranteed: bool

    @classmethod
    def of(cls, scored: ScoredFact, *, guaranteed: bool) -> InjectedFact:
        return cls(
            scored.fact.id,
            scored.fact.content,
            scored.score,
            scored.relevance,
            scored.lexical,
            scored.semantic,
            scored.fact.confidence,
            guaranteed,
        )


@dataclass(frozen=True, slots=True)
class InjectionRecord:
    at: str
    user_id: str
    agent_name: str
    thread_id: str | None
    facts: tuple[InjectedFact, ...]
    tokens: int


def current_thread_id() -> str | None:
    """The thread of the running graph call, when there is one."""
    configurable = current_config().get("configurable") or {}
    value = configurable.get("thread_id")
    return None if value is None else str(value)

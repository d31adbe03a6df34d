"""The injection ledger: which facts, with which scores, went into which model call.

For callbacks (``MemoryMiddleware.add_injection_listener``), ``MemoryMiddleware.ledger`` (the most
recent records) and ``deermem explain`` — so every injected line can be explained after the fact.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from deermem_middleware.memory.document import Memory
from deermem_middleware.retrieval.selector import ScoredFact
from deermem_middleware.storage.base import MemoryScope

if TYPE_CHECKING:
    from deermem_middleware.injection.render import RenderedMemory
from deermem_middleware.runtime.ids import resolve_thread_id

__all__ = ["InjectedFact", "InjectionLedger", "InjectionRecord"]

logger = logging.getLogger(__name__)


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


class InjectionLedger:
    """What went into which model call: the most recent records, listeners, and per-fact
    injection counts waiting to be saved with the next update (``injections``,
    ``lastInjectedAt``: decay counts from a fact's last use, and eviction keeps used facts).
    Thread-safe: model calls record, update workers fold the counts in."""

    def __init__(self, maxlen: int = 256) -> None:
        self.records: collections.deque[InjectionRecord] = collections.deque(maxlen=maxlen)
        """The most recent injections, oldest first."""
        self._listeners: list[Callable[[InjectionRecord], None]] = []
        self._usage: dict[MemoryScope, dict[str, tuple[int, str]]] = {}
        self._lock = threading.Lock()

    def add_listener(self, listener: Callable[[InjectionRecord], None]) -> None:
        """Call ``listener(record)`` after every injection (on the model-call path: keep it
        cheap). A listener that raises is logged and ignored."""
        self._listeners.append(listener)

    def record(self, scope: MemoryScope, rendered: RenderedMemory) -> InjectionRecord:
        """Note one injection of ``rendered`` for ``scope`` (in the running graph's thread)."""
        now = datetime.now(UTC)
        record = InjectionRecord(
            at=now.isoformat(),
            user_id=scope.user_id,
            agent_name=scope.agent_name,
            thread_id=resolve_thread_id(),
            facts=tuple(InjectedFact.of(s, guaranteed=False) for s in rendered.facts)
            + tuple(InjectedFact.of(s, guaranteed=True) for s in rendered.guaranteed),
            tokens=rendered.tokens,
        )
        self.records.append(record)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            usage = self._usage.setdefault(scope, {})
            for item in record.facts:
                count, _ = usage.get(item.fact_id, (0, stamp))
                usage[item.fact_id] = (count + 1, stamp)
        logger.debug(
            "memory inject: user %r agent %r, %d fact(s) (%d guaranteed), %d tokens",
            scope.user_id,
            scope.agent_name,
            len(record.facts),
            len(rendered.guaranteed),
            record.tokens,
        )
        for listener in list(self._listeners):
            try:
                listener(record)
            except Exception:
                logger.exception("injection listener %r failed", listener)
        return record

    def annotate(self, scope: MemoryScope, memory: Memory) -> Memory:
        """Fold the injection counts gathered since the last save into the facts (best effort:
        counts of an update that then fails to save are dropped)."""
        with self._lock:
            usage = self._usage.pop(scope, None)
        if not usage:
            return memory
        facts = []
        for fact in memory.facts:
            seen = usage.get(fact.id)
            if seen is None:
                facts.append(fact)
            else:
                facts.append(
                    fact.model_copy(
                        update={"injections": fact.injections + seen[0], "lastInjectedAt": seen[1]}
                    )
                )
        return memory.model_copy(update={"facts": tuple(facts)})

"""The injection ledger: which facts, with which scores, went into which model call.

For callbacks (``MemoryMiddleware.add_injection_listener``), ``MemoryMiddleware.ledger`` (the most
recent records) and ``deermem explain`` — so every injected line can be explained after the fact.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterable
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

MAX_OPEN_TURNS = 4096
"""Threads whose injected facts wait for their turn's answer (:meth:`InjectionLedger.take_turn`);
beyond it the oldest are dropped: a turn whose answer never came (the model raised) must not
keep its facts forever."""


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
    routes: tuple[tuple[str, float], ...] = ()
    """Which routes found the fact, with their raw scores (``ScoredFact.routes``);
    ``(("guaranteed", 1.0),)`` for a fact of a guaranteed category."""

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
            (("guaranteed", 1.0),) if guaranteed else scored.routes,
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
    ``lastInjectedAt``: decay counts from a fact's last use, and eviction keeps used facts),
    and the facts each thread's answer is still to be compared with (:meth:`take_turn`) and the
    ``used`` counts of those that answer used (:meth:`record_use`, the usage signal).
    Thread-safe: model calls record, update workers fold the counts in."""

    def __init__(self, maxlen: int = 256) -> None:
        self.records: collections.deque[InjectionRecord] = collections.deque(maxlen=maxlen)
        """The most recent injections, oldest first."""
        self._listeners: list[Callable[[InjectionRecord], None]] = []
        self._usage: dict[MemoryScope, dict[str, tuple[int, str]]] = {}
        self._used: dict[MemoryScope, dict[str, int]] = {}
        self._turns: collections.OrderedDict[tuple[MemoryScope, str | None], dict[str, str]] = (
            collections.OrderedDict()
        )
        """Per (scope, thread): the facts injected since that thread's last answer, id → text."""
        self._lock = threading.Lock()

    def add_listener(self, listener: Callable[[InjectionRecord], None]) -> None:
        """Call ``listener(record)`` after every injection (on the model-call path: keep it
        cheap). A listener that raises is logged and ignored."""
        self._listeners.append(listener)

    def record(
        self, scope: MemoryScope, rendered: RenderedMemory, thread_id: str | None = None
    ) -> InjectionRecord:
        """Note one injection of ``rendered`` for ``scope`` in ``thread_id`` (None: the running
        graph's thread, read from its config)."""
        now = datetime.now(UTC)
        record = InjectionRecord(
            at=now.isoformat(),
            user_id=scope.user_id,
            agent_name=scope.agent_name,
            thread_id=thread_id if thread_id is not None else resolve_thread_id(),
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
            if record.facts:
                turn = self._turns.setdefault((scope, record.thread_id), {})
                self._turns.move_to_end((scope, record.thread_id))
                turn.update((item.fact_id, item.content) for item in record.facts)
                while len(self._turns) > MAX_OPEN_TURNS:
                    self._turns.popitem(last=False)
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

    def take_turn(self, scope: MemoryScope, thread_id: str | None) -> list[tuple[str, str]]:
        """The facts (id, text) injected for ``scope`` in ``thread_id`` since the last call for
        that thread — the model calls of the turn that just ended — and forget them. A thread-less
        run (no checkpointer) shares the ``None`` thread with the scope's other such runs."""
        with self._lock:
            turn = self._turns.pop((scope, thread_id), None)
        return list(turn.items()) if turn else []

    def record_use(self, scope: MemoryScope, fact_ids: Iterable[str]) -> None:
        """Note that the answer of a turn used these facts (``used``, saved with the next update
        like the injection counts). A fact is counted once per call: pass each turn's uses once."""
        ids = set(fact_ids)
        if not ids:
            return
        with self._lock:
            used = self._used.setdefault(scope, {})
            for fact_id in ids:
                used[fact_id] = used.get(fact_id, 0) + 1

    def annotate(self, scope: MemoryScope, memory: Memory) -> Memory:
        """Fold the injection and use counts gathered since the last save into the facts (best
        effort: counts of an update that then fails to save are dropped)."""
        return self.taker(scope)(memory)

    def taker(self, scope: MemoryScope) -> Callable[[Memory], Memory]:
        """Take the counts gathered since the last save, once, and return what folds them into
        a document — as often as a compare-and-set loop re-applies its change after a lost race
        (taking them on each try lost them on every retry)."""
        with self._lock:
            usage = self._usage.pop(scope, None) or {}
            used = self._used.pop(scope, None) or {}

        def fold(memory: Memory) -> Memory:
            if not usage and not used:
                return memory
            facts = []
            for fact in memory.facts:
                seen = usage.get(fact.id)
                uses = used.get(fact.id, 0)
                if seen is None and not uses:
                    facts.append(fact)
                    continue
                update: dict[str, object] = {}
                if seen is not None:
                    update["injections"] = fact.injections + seen[0]
                    update["lastInjectedAt"] = seen[1]
                if uses:
                    update["used"] = fact.used + uses
                facts.append(fact.model_copy(update=update))
            return memory.model_copy(update={"facts": tuple(facts)})

        return fold

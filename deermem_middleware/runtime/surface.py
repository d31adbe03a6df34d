"""The engine's public surface: what adapters may call on a :class:`MemoryService`.

The adapters — the middleware, the node pair, the DeerFlow backend, the web console and the
``deermem`` command — are thin faces over one engine. They reach its documents, pending work,
statistics and caches through the methods here, never through its parts (storage, selector,
recall, scheduler, journal, breaker, updater: all private), so a part can change without
touching five adapters. :data:`PUBLIC_SURFACE` names every public attribute of the engine; a
test walks the adapters' code and fails on any other attribute read from an engine.

:class:`EngineReads` holds the read-mostly half of the surface (documents, scopes, pending
work, stats, explain, tokens, caches); :mod:`~deermem_middleware.runtime.service` the rest.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from deermem_middleware.config import MemoryConfig
from deermem_middleware.derived.view import DerivedView, open_snapshot
from deermem_middleware.injection.explain import explain_report
from deermem_middleware.injection.recall import Recall
from deermem_middleware.injection.render import RenderedMemory
from deermem_middleware.memory.document import Memory
from deermem_middleware.retrieval.embeddings import describe_channel
from deermem_middleware.retrieval.index import FactIndex
from deermem_middleware.retrieval.selector import FactSelector, ScoredFact
from deermem_middleware.runtime.derivation import BackgroundDerivation
from deermem_middleware.runtime.ledger import InjectionLedger, InjectionRecord
from deermem_middleware.runtime.stats import stats_items
from deermem_middleware.storage.base import MemoryScope, MemoryStorage, Mutate, StoredMemory
from deermem_middleware.storage.journal import JournalEntry, PendingJournal

__all__ = ["PUBLIC_SURFACE", "EngineReads", "storage_location"]

PUBLIC_SURFACE: frozenset[str] = frozenset(
    {
        # what the engine is (read-only data)
        "config",
        "agent_name",
        "closed",
        "active",
        "injecting",
        "selection",
        "users",
        "ledger",
        # sharing and lifecycle
        "acquire",
        "release",
        "setup",
        "recover",
        "use_model",
        "warm_up",
        "flush",
        "aflush",
        "close",
        "aclose",
        "add_update_listener",
        "add_injection_listener",
        # documents and scopes
        "scope",
        "get_memory",
        "load",
        "list_scopes",
        "describe",
        "location",
        "files_root",
        "update",
        "change",
        "forget_user",
        "forget_cached",
        # pending work and numbers
        "pending_entries",
        "stats",
        # recall: what is injected, and why
        "memory_block",
        "render_memory",
        "explain_memory",
        "select_facts",
        "explain_report",
        "count_tokens",
        "report_injection_error",
        # a turn
        "capture",
        "end_turn",
        "note_answer",
    }
)
"""Every attribute of :class:`MemoryService` an adapter may use. Anything else is a part of the
engine (its names start with ``_``) and may change without notice."""


def storage_location(storage: MemoryStorage) -> str:
    """The storage as a whole, for people: the JSON files' root folder, the store's kind."""
    from deermem_middleware.storage.json_file import JSONFileStorage
    from deermem_middleware.storage.store import StoreStorage

    storage = storage.innermost
    if isinstance(storage, JSONFileStorage):
        return str(storage.root)
    if isinstance(storage, StoreStorage):
        return f"{type(storage.store).__name__} (prefix {storage.prefix!r})"
    return type(storage).__name__


class EngineReads:
    """Documents, scopes, pending work, statistics, explain and caches of the engine (the part
    of :data:`PUBLIC_SURFACE` that only reads or drops caches)."""

    config: MemoryConfig
    agent_name: str
    _storage: MemoryStorage
    _journal: PendingJournal | None
    _selector: FactSelector
    _recall: Recall
    _injections: InjectionLedger
    _derivation: BackgroundDerivation

    # -- the read path --------------------------------------------------------------------------

    def _current(
        self, scope: MemoryScope, call: Callable[[str, Callable[[], Any]], Any] | None = None
    ) -> tuple[Memory, FactIndex]:
        """The document of ``scope`` and its index, as the read path needs them.

        Warm (this process built the index of the stored revision): one revision check, nothing
        loaded or built. Cold: the document and its derived snapshot are loaded and the index is
        built from the snapshot — nothing is screened, analysed or embedded here unless the
        snapshot lacks it (a document from before derived data, a stale part), and then the
        scope is derived in the background. ``call`` runs each storage call (the agent's path
        bounds them: :class:`~deermem_middleware.runtime.hotpath.StorageGuard`)."""
        storage = self._storage
        run = call if call is not None else (lambda _what, fn: fn())
        selector = self._selector
        if selector.holds(scope):
            revision = run("checking the memory revision", lambda: storage.revision(scope))
            hit = selector.cached(scope, revision)
            if hit is not None:
                return hit
        stored: StoredMemory = run("reading memory", lambda: storage.load(scope))
        blob, exact = stored.derived, stored.derived_exact
        if not storage.stores_derived:
            blob, exact = self._derivation.local(scope, stored.revision), True
        snapshot = open_snapshot(blob, storage.describe(scope))
        view = DerivedView.of(stored.memory, snapshot, selector.deriver.made_by, exact=exact)
        index = selector.index(scope, stored.memory, view=view, revision=stored.revision)
        if view.missing and stored.revision and self.config.enabled:
            self._derivation.submit(scope, stored.revision)
        return stored.memory, index

    # -- documents and scopes ---------------------------------------------------------------

    def scope(self, user_id: str | None = None, agent_name: str | None = None) -> MemoryScope:
        """The (user, agent) scope: ``"default"`` user, this engine's agent when not given."""
        return MemoryScope(user_id or "default", agent_name or self.agent_name)

    def load(self, scope: MemoryScope) -> StoredMemory:
        """The stored document of ``scope`` with its revision (an empty one at revision 0)."""
        return self._storage.load(scope)

    def get_memory(self, user_id: str = "default", agent_name: str | None = None) -> Memory:
        """The stored memory document of a user (and agent; default: this engine's)."""
        return self._storage.load(self.scope(user_id, agent_name)).memory

    def list_scopes(self) -> list[MemoryScope]:
        """Every (user, agent) with a stored document."""
        return list(self._storage.list_scopes())

    def describe(self, scope: MemoryScope) -> str:
        """Where the document of ``scope`` lives, for people (a path, a table key)."""
        return self._storage.describe(scope)

    @property
    def selection(self) -> str:
        """Which selection channel is on, for people: semantic + lexical (and what makes the
        vectors), or lexical only and why (:func:`~..retrieval.embeddings.describe_channel`)."""
        store = self._selector.embeddings
        return describe_channel(
            store.embeddings if store is not None else None, self.config.embeddings
        )

    def location(self) -> str:
        """Where the memory lives as a whole, for people (a folder, a store's kind)."""
        return storage_location(self._storage)

    def files_root(self) -> Path | None:
        """The root folder of a JSON-file storage; None for any other storage."""
        from deermem_middleware.storage.json_file import JSONFileStorage

        storage = self._storage.innermost
        return storage.root if isinstance(storage, JSONFileStorage) else None

    def update(self, scope: MemoryScope, mutate: Mutate, *, max_conflicts: int = 200) -> int:
        """The storage's compare-and-set write, as it is (no caches dropped): for documents the
        engine never selects from (the console's audit log). Memory people edit goes through
        :meth:`~deermem_middleware.runtime.service.MemoryService.change`."""
        return self._storage.update(scope, mutate, max_conflicts=max_conflicts)

    def forget_cached(self, scope: MemoryScope) -> None:
        """Drop the cached index of ``scope``: the next selection reads the storage again."""
        self._selector.forget(scope)

    def warm_up(self, user_id: str = "default", agent_name: str | None = None) -> None:
        """Build a user's index now (blocking). A memory written by this release needs none
        (its first model call loads what was derived when it was written); one written
        before is derived here, every verdict and vector, and stored."""
        scope = self.scope(user_id, agent_name)
        _, index = self._current(scope)
        if index.view is not None and index.view.missing:
            self._derivation.run_now(scope)
            self._selector.forget(scope)
            self._current(scope)

    # -- pending work and numbers -----------------------------------------------------------

    def pending_entries(self) -> list[JournalEntry]:
        """The captures journaled and not yet applied (none without a journal)."""
        return list(self._journal.entries()) if self._journal is not None else []

    def stats(
        self,
        *,
        user: str | None = None,
        agent: str | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Per-scope numbers (:func:`~deermem_middleware.runtime.stats.stats_items`): every
        scope with a document or a pending capture, only ``user``'s/``agent``'s when given."""
        return stats_items(self._storage, self._journal, user=user, agent=agent, visible=visible)

    # -- recall -----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens as the injection budget counts them (``token_counting``)."""
        return self._recall.count_tokens(text)

    def render_memory(
        self,
        messages: Sequence[BaseMessage],
        *,
        user_id: str = "default",
        agent_name: str | None = None,
    ) -> str:
        """The ``<memory>`` block that would be injected for this conversation ("" if none)."""
        return self.explain_memory(messages, user_id=user_id, agent_name=agent_name).text

    def explain_memory(
        self,
        messages: Sequence[BaseMessage],
        *,
        user_id: str = "default",
        agent_name: str | None = None,
    ) -> RenderedMemory:
        """The block and what is in it: the guaranteed facts, the relevance picks that fit (with
        their score parts) and the block's tokens. What ``deermem explain`` prints."""
        scope = self.scope(user_id, agent_name)
        memory, index = self._current(scope)
        return self._recall.explain(scope, memory, messages, index=index)

    def select_facts(
        self,
        messages: Sequence[BaseMessage],
        *,
        user_id: str = "default",
        agent_name: str | None = None,
        top_k: int | None = None,
    ) -> list[ScoredFact]:
        """The facts most relevant to this conversation, best first, with their score parts."""
        scope = self.scope(user_id, agent_name)
        memory, index = self._current(scope)
        return self._recall.select(scope, memory, messages, top_k, index=index)

    def explain_report(
        self, scope: MemoryScope, message: str, *, injection_enabled: bool | None = None
    ) -> dict[str, Any]:
        """Why each fact would or would not be injected for ``message``: the JSON-ready report
        of ``deermem explain`` and the console (:func:`~deermem_middleware.injection.explain.
        explain_report`). Call :meth:`warm_up` first for the embedding channel."""
        memory, index = self._current(scope)
        return explain_report(
            self._recall, memory, scope, message, injection_enabled=injection_enabled, index=index
        )

    # -- the injection ledger ---------------------------------------------------------------

    @property
    def ledger(self) -> collections.deque[InjectionRecord]:
        """The most recent injections: which facts, with which scores, went into which call."""
        return self._injections.records

    def add_injection_listener(self, listener: Callable[[InjectionRecord], None]) -> None:
        """Call ``listener(record)`` after every injection (keep it cheap)."""
        self._injections.add_listener(listener)

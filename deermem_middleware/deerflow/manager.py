"""``DeermemMemoryManager``: this package as a DeerFlow memory backend.

DeerFlow (HEAD) loads its memory through a pluggable ``MemoryManager`` (a pydantic model with
abstract ``add``/``get_context`` and ``from_config``); its factory resolves
``memory.manager_class``, puts the storage root into ``backend_config["storage_path"]`` and calls
``from_config(backend_config, mode=..., **host_hooks)``. One line switches DeerFlow over:
``memory.manager_class: deermem_middleware.deerflow:DeermemMemoryManager`` (docs/deerflow.md).

The manager is a thin adapter: every call becomes a call of the process's
:class:`~deermem_middleware.runtime.service.MemoryService` (one engine per configuration, shared
by every manager built with it), and what goes back to DeerFlow's gateway is DeerFlow's v1.0
document shape (:func:`~deermem_middleware.formats.deerflow.to_deerflow`).

Identity: ``user_id`` None (or blank) is our ``"default"`` user; ``agent_name`` None is the
engine's agent (``backend_config["agent_name"]``, else ``__default__``) — DeerFlow's "global"
memory; DeerFlow's routes name one with ``?agent_name=`` (PR #4594). Summaries are the user's,
shared by their agents, and facts are per agent (:mod:`~..storage.shared_summaries`). An agent
with settings of its own (``backend_config.agents.<name>``) is served by its own engine, chosen
as the middleware and the node pair choose (:mod:`~..runtime.agents`); one whose own
``config.yaml`` switches memory off is not served (:mod:`.agent_switch`).
Files: ``<storage_path>/deermem_middleware/`` (see :func:`memory_config_from_backend_config`).

This and :mod:`.errors` are the only modules of the package that import DeerFlow; the Memory
page's fact edits are its mixin :class:`~.page.FactEdits`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Final, Literal

from deerflow.agents.memory.manager import MemoryManager  # type: ignore[import-not-found]
from langchain_core.messages import HumanMessage
from pydantic import PrivateAttr, ValidationError

from deermem_middleware.config import MemoryConfig
from deermem_middleware.deerflow import gateway, policy, turns
from deermem_middleware.deerflow.agent_switch import AgentSwitch
from deermem_middleware.deerflow.backend_config import (
    HOST_HOOKS,
    HostHooks,
    agent_config_from_backend_config,
    config_error_of,
    host_chat_model,
    memory_config_from_backend_config,
    visible_messages,
)
from deermem_middleware.deerflow.buckets import facts_cleared
from deermem_middleware.deerflow.errors import (
    MemoryConflictError,
    MemoryCorruptionError,
    MemoryManagerError,
)
from deermem_middleware.deerflow.page import FactEdits
from deermem_middleware.memory.document import Memory, utc_now_iso
from deermem_middleware.runtime.agents import AgentEngines
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage.base import MemoryScope

__all__ = [
    "HOST_HOOKS",
    "DeermemMemoryManager",
    "MemoryConflictError",
    "MemoryCorruptionError",
    "MemoryManagerError",
    "memory_config_from_backend_config",
]

logger = logging.getLogger(__name__)


EVERY_FACT: Final = 10**9
"""``top_k`` that ranks every fact (a category-filtered search cuts after filtering)."""
_storage_errors = functools.partial(
    gateway.storage_errors, MemoryConflictError, MemoryCorruptionError
)
"""Our storage errors as DeerFlow's: a lost race (409), unreadable memory (500)."""
CLOSE_SECONDS: Final = 2.0
"""``close`` releases the engine with this bound: ``shutdown_flush`` is the drain; what is left
stays in the journal and runs at the next start."""


# -- the manager --------------------------------------------------------------------------------


class DeermemMemoryManager(FactEdits, MemoryManager):
    """DeerFlow's ``MemoryManager`` over this package's engine (see the module docstring)."""

    supports_search: ClassVar[bool] = True
    supports_query_aware_context: ClassVar[bool] = True
    """DeerFlow (PR #4732) passes each turn's user message to ``get_context`` as ``query``."""

    _config: MemoryConfig = PrivateAttr()
    _service: MemoryService | None = PrivateAttr(default=None)
    _agents: AgentEngines | None = PrivateAttr(default=None)
    _host_model: Any = PrivateAttr(default=None)
    _hooks: HostHooks = PrivateAttr(default_factory=HostHooks)
    _model_once: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    """Taken (never released) by the one call that asks the host for its chat model."""
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _turns: turns.TurnMessages = PrivateAttr(default_factory=turns.TurnMessages)
    _switch: AgentSwitch = PrivateAttr(default_factory=AgentSwitch)
    """A custom agent's own ``config.yaml`` switching its memory off (:mod:`.agent_switch`)."""
    _read_policy: policy.ReadPolicy = PrivateAttr(default="fail_open")

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._read_policy = policy.read_policy(self.backend_config)
        self._config = memory_config_from_backend_config(policy.without_policy(self.backend_config))
        self._hooks = HostHooks.resolve(self.backend_config)
        self._service = MemoryService.acquire(self._config)
        self._agents = AgentEngines(
            self._service,
            settings=lambda agent, _user: agent_config_from_backend_config(
                policy.without_policy(self.backend_config), agent
            ),
            per_run=True,
        )

    @classmethod
    def from_config(
        cls,
        backend_config: dict[str, Any],
        *,
        mode: Literal["middleware", "tool"] = "middleware",
        **host_hooks: Any,
    ) -> DeermemMemoryManager:
        """Built from DeerFlow's ``backend_config`` (see :func:`memory_config_from_backend_config`)
        and host hooks (see :data:`HOST_HOOKS`); managers with the same config share one engine."""
        config = dict(backend_config or {})
        policy.read_policy(config)  # a wrong one as ConfigError, before pydantic wraps it
        try:
            manager = cls(backend_config=config, mode=mode, callbacks=host_hooks.get("callbacks"))
        except ValidationError as exc:  # our ConfigError, one line, not pydantic's wrapping
            raise config_error_of(exc) from None
        manager._hooks = HostHooks.resolve(manager.backend_config, host_hooks)
        return manager

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def service(self) -> MemoryService:
        """The engine behind this manager (shared); ``MemoryManagerError`` once closed."""
        service = self._service
        if service is None:
            raise MemoryManagerError(f"{type(self).__name__} is closed")
        return service

    @property
    def config(self) -> MemoryConfig:
        """Our configuration, as read from ``backend_config``."""
        return self._config

    def _engine(self, user_id: str | None, agent_name: str | None) -> MemoryService:
        """The engine whose settings apply to this (user, agent): the agent's own, if any."""
        agents = self._agents
        if agents is None or self._service is None:
            raise MemoryManagerError(f"{type(self).__name__} is closed")
        user, agent = turns.identity(user_id, agent_name)
        return agents.engine(agent, user)

    def _ensure_model(self, service: MemoryService) -> None:
        """Hand the host's chat model (asked for once) to an engine when the config names none."""
        if self._config.model is not None:
            return
        if self._model_once.acquire(blocking=False):
            self._host_model = host_chat_model(self._hooks.llm_factory)
        if self._host_model is not None:
            service.use_model(self._host_model)

    def _scope(self, user_id: str | None, agent_name: str | None) -> MemoryScope:
        return self.service.scope(*turns.identity(user_id, agent_name))

    def _write(self, scope: MemoryScope, change: Callable[[Memory], Memory]) -> dict[str, Any]:
        """``change`` under the storage's compare-and-set loop; the document it stored."""
        agent = None if scope.agent_name == self.service.agent_name else scope.agent_name
        with _storage_errors(), gateway.fact_errors():
            _, after, revision = self._engine(scope.user_id, agent).change(scope, change)
        return gateway.document(after, revision)

    # -- tier 1 -----------------------------------------------------------------------------------

    def add(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """Queue the conversation for a memory update (debounced per thread; never raises)."""
        self._capture(thread_id, messages, agent_name, user_id, now=False)

    def _capture(
        self, thread_id: str, messages: list[Any], agent: str | None, user: str | None, now: bool
    ) -> None:
        try:
            user, agent = turns.user_or_default(user), turns.agent_or_none(agent)
            if self._switch.off(agent, user):
                return  # the agent's own config.yaml switched its memory off
            service = self._engine(user, agent)
            self._ensure_model(service)
            visible = visible_messages(messages, self._hooks.keep_hidden)
            service.end_turn(
                visible, user_id=user, thread_id=thread_id or None, agent_name=agent, now=now
            )
            said = turns.last_user_text(visible)
            if said:  # the query of this user's next get_context, which names no message
                self._turns.remember(user, agent, thread_id or None, said)
                self._turns.remember(user, agent, None, said)
        except Exception:
            logger.exception("memory capture of thread %r failed", thread_id)

    def get_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
        query: str | None = None,
    ) -> str:
        """The memory to inject (our block's content, within ``max_injection_tokens``); "" when
        there is none. Its facts are ranked by ``query`` — the turn's user message, which
        DeerFlow's per-turn recall passes (PR #4732) — else by the newest message the user said
        that this backend saw: this thread's turn start (``on_turn_start``), else the user's
        last message in an ``add`` (DeerFlow's session snapshot names no message); with none,
        by the query-less choice (guaranteed categories, then the most used, recent and
        confident facts, spread over topics). In tool mode the summaries only: the model
        searches the facts with DeerFlow's memory tools.

        A failed read follows ``backend_config.failure_policy.read``: ``fail_open`` (default)
        logs it and returns "", ``fail_closed`` raises DeerFlow's ``MemoryManagerError`` (its
        ``MemoryCorruptionError`` for unreadable memory), which DeerFlow's host re-raises."""
        try:
            return self._context(user_id, agent_name, thread_id, query)
        except Exception as exc:
            if self._read_policy == "fail_closed":
                raise policy.read_error(
                    exc, user_id, MemoryManagerError, MemoryCorruptionError
                ) from exc
            logger.exception("memory context of user %r failed; injecting none", user_id)
            return ""

    def _context(
        self, user_id: str | None, agent_name: str | None, thread_id: str | None, query: str | None
    ) -> str:
        user, agent = turns.identity(user_id, agent_name)
        if self._switch.off(agent, user):
            return ""  # the agent's own config.yaml switched its memory off
        service = self._engine(user, agent)
        if not service.injecting:
            return ""
        thread = thread_id or None
        said = query if isinstance(query, str) and query.strip() else None
        said = said or self._turns.latest(user, agent, thread)
        messages = [HumanMessage(said)] if said else []
        # tool mode: DeerFlow tells the model that only the summaries are injected and that it
        # finds the facts with its memory tools, as DeerFlow's own backend does
        block = service.memory_block(
            messages,
            user,
            agent,
            thread_id=thread,
            with_facts=self.mode != "tool",
            fail_closed=self._read_policy == "fail_closed",
        )
        return gateway.unwrapped(block)

    # -- tier 2 -----------------------------------------------------------------------------------

    def add_nowait(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Like :meth:`add`, but this thread's update starts now instead of after the debounce
        (in the background; returns at once; other threads' pending work keeps its time)."""
        self._capture(thread_id, messages, agent_name, user_id, now=True)

    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        """The ``top_k`` active facts best matching ``query`` (our selector; the category filter
        applies before the cut): ``id, content, category, confidence, createdAt, score``."""
        if top_k <= 0:
            return []
        service = self._engine(user_id, agent_name)
        messages = [HumanMessage(query)] if isinstance(query, str) and query.strip() else []
        with _storage_errors():
            picks = service.select_facts(
                messages,
                user_id=turns.user_or_default(user_id),
                agent_name=turns.agent_or_none(agent_name),
                top_k=top_k if category is None else EVERY_FACT,
            )
        return gateway.search_hits(picks, top_k=top_k, category=category)

    def get_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """The bucket's memory as DeerFlow's v1.0 document (active facts; ``lastUpdated`` always
        a time) plus our ``revision``."""
        scope = self._scope(user_id, agent_name)
        with _storage_errors():
            stored = self._engine(user_id, agent_name).load(scope)
        return gateway.document(stored.memory, stored.revision)

    def export_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Same as :meth:`get_memory`."""
        return self.get_memory(user_id=user_id, agent_name=agent_name)

    def delete_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> None:
        """Erase the user's memory (one agent's with ``agent_name``; None: all of the user's):
        documents, pending captures, indexes (:meth:`MemoryService.forget_user`)."""
        with _storage_errors():
            self._engine(user_id, agent_name).forget_user(*turns.identity(user_id, agent_name))

    def clear_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Empty the memory of every agent of the user, summaries included (``agent_name``
        None), or that agent's facts — the summaries are the user's, shared by all the user's
        agents (:mod:`.buckets`); threads' progress is kept, so turns already read are not
        extracted again. Returns the (emptied) document of the bucket."""
        service = self.service
        user, agent = turns.identity(user_id, agent_name)
        requested = self._scope(user, agent)
        scopes = {requested}
        if agent is None:
            with _storage_errors():
                scopes.update(s for s in service.list_scopes() if s.user_id == user)
        now = utc_now_iso()
        clear = gateway.cleared if agent is None else facts_cleared
        documents = {s: self._write(s, lambda m: clear(m, now)) for s in sorted(scopes)}
        return documents[requested]

    def import_memory(
        self,
        memory_data: dict[str, Any],
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Replace the bucket's memory with a DeerFlow document (read leniently, fact by fact;
        capped like extracted memory; threads' progress kept). Returns the stored result."""
        scope = self._scope(user_id, agent_name)
        incoming = gateway.imported(
            memory_data, max_facts=self._config.max_facts, now=utc_now_iso(), scope=scope
        )
        return self._write(scope, lambda memory: gateway.replacing(incoming, memory))

    def shutdown_flush(self, timeout: float) -> bool:
        """Run every pending update now; True only when all finished within ``timeout`` seconds
        (a hard bound: what is still running goes on in the background, and the journal keeps
        what did not finish for the next start)."""
        agents = self._agents
        if self._service is None or agents is None:
            return True
        seconds = float(timeout) if isinstance(timeout, int | float) else 0.0
        if not math.isfinite(seconds) or seconds <= 0:
            seconds = 0.001
        return agents.flush_within(seconds, before=self._ensure_model)

    # -- tier 3 -----------------------------------------------------------------------------------

    def warm(self) -> bool | None:
        """Load what the first injection needs (the token counter); True when ready."""
        try:
            self.service.count_tokens("warm up")
        except Exception:
            logger.exception("memory: warming up failed")
            return False
        return True

    def reload_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Drop the bucket's cached index and read it from storage again."""
        self._engine(user_id, agent_name).forget_cached(self._scope(user_id, agent_name))
        return self.get_memory(user_id=user_id, agent_name=agent_name)

    def on_turn_start(self, turn_number: int, message: Any, **kwargs: Any) -> None:
        """Remember the user's message of this turn: :meth:`get_context` ranks facts by it.

        The turn is filed under the ``thread_id`` it names (keyword, ``context``,
        ``runtime.context``, ``config["configurable"]``, else the running graph's config) with
        the ``user_id``/``agent_name`` it names; ``get_context`` of that thread uses it unless it
        named another user or agent. A turn naming no thread is filed under its (user, agent)
        and used by ``get_context`` calls of that user and agent whose thread has none.
        """
        text = turns.user_text(message)
        if not text or not text.strip():
            return
        user, agent, thread = turns.turn_identity(kwargs)
        self._turns.remember(user, turns.agent_or_none(agent), thread, text)

    async def aadd(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """:meth:`add` off the event loop (the capture journals to disk)."""
        await asyncio.to_thread(
            self.add,
            thread_id,
            messages,
            agent_name=agent_name,
            user_id=user_id,
            trace_id=trace_id,
        )

    async def aget_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
        query: str | None = None,
    ) -> str:
        """:meth:`get_context` off the event loop."""
        return await asyncio.to_thread(
            self.get_context, user_id, agent_name=agent_name, thread_id=thread_id, query=query
        )

    async def asearch(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        """:meth:`search` off the event loop."""
        return await asyncio.to_thread(
            self.search, query, top_k, user_id=user_id, agent_name=agent_name, category=category
        )

    def close(self) -> None:
        """Release the engine (the last manager of a config closes it); idempotent."""
        with self._lock:
            service, self._service = self._service, None
            agents, self._agents = self._agents, None
        if service is not None and agents is not None:
            agents.release(CLOSE_SECONDS)

"""``DeermemMemoryManager``: this package as a DeerFlow memory backend.

DeerFlow (HEAD) loads its memory through a pluggable ``MemoryManager`` (a pydantic model with
abstract ``add``/``get_context`` and ``from_config``); its factory resolves
``memory.manager_class``, puts the storage root into ``backend_config["storage_path"]`` and calls
``from_config(backend_config, mode=..., **host_hooks)``. One line switches DeerFlow over::

    memory:
      manager_class: deermem_middleware.deerflow:DeermemMemoryManager
      backend_config: {max_injection_tokens: 2000, ...}   # our keys; DeerMem-only ones ignored

The manager is a thin adapter: every call becomes a call of the process's
:class:`~deermem_middleware.runtime.service.MemoryService` (one engine per configuration, shared
by every manager built with it), and what goes back to DeerFlow's gateway is DeerFlow's v1.0
document shape (:func:`~deermem_middleware.formats.deerflow.to_deerflow`).

Identity: ``user_id`` None (or blank) is our ``"default"`` user; ``agent_name`` None is the
engine's agent (``backend_config["agent_name"]``, else ``__default__``) — DeerFlow's "global"
memory. DeerFlow's gateway never names an agent, so its Memory page shows that agent's memory.
Files: ``<storage_path>/deermem_middleware/`` (see :func:`memory_config_from_backend_config`).

This is the only module of the package that imports DeerFlow.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Final, Literal

from deerflow.agents.memory.manager import MemoryManager  # type: ignore[import-not-found]
from langchain_core.messages import HumanMessage
from pydantic import PrivateAttr

from deermem_middleware.config import MemoryConfig
from deermem_middleware.deerflow import gateway, turns
from deermem_middleware.deerflow.backend_config import (
    HOST_HOOKS,
    HostHooks,
    host_chat_model,
    memory_config_from_backend_config,
    visible_messages,
)
from deermem_middleware.memory import manual
from deermem_middleware.memory.document import Memory, new_fact_id, utc_now_iso
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage.base import CorruptedMemoryError, MemoryScope, RevisionConflict

__all__ = [
    "HOST_HOOKS",
    "DeermemMemoryManager",
    "MemoryConflictError",
    "MemoryCorruptionError",
    "MemoryManagerError",
    "memory_config_from_backend_config",
]

logger = logging.getLogger(__name__)


_deerflow_manager = importlib.import_module(MemoryManager.__module__)
"""DeerFlow's contract module (its error classes live beside ``MemoryManager``)."""


class _FallbackManagerError(RuntimeError):
    """Stands in for DeerFlow's ``MemoryManagerError`` on a DeerFlow without it."""


MemoryManagerError: type[RuntimeError] = getattr(
    _deerflow_manager, "MemoryManagerError", _FallbackManagerError
)
MemoryConflictError: type[RuntimeError] = getattr(
    _deerflow_manager,
    "MemoryConflictError",
    type("MemoryConflictError", (MemoryManagerError,), {}),
)
"""DeerFlow's error for a write that lost an optimistic-concurrency race (gateway: 409)."""
MemoryCorruptionError: type[RuntimeError] = getattr(
    _deerflow_manager,
    "MemoryCorruptionError",
    type("MemoryCorruptionError", (MemoryManagerError,), {}),
)
"""DeerFlow's error for stored memory that cannot be read safely (gateway: 500)."""


EVERY_FACT: Final = 10**9
"""``top_k`` that ranks every fact (a category-filtered search cuts after filtering)."""
CLOSE_SECONDS: Final = 2.0
"""``close`` releases the engine with this bound: ``shutdown_flush`` is the drain; what is left
stays in the journal and runs at the next start."""


# -- the manager --------------------------------------------------------------------------------


class DeermemMemoryManager(MemoryManager):
    """DeerFlow's ``MemoryManager`` over this package's engine (see the module docstring)."""

    supports_search: ClassVar[bool] = True

    _config: MemoryConfig = PrivateAttr()
    _service: MemoryService | None = PrivateAttr(default=None)
    _hooks: HostHooks = PrivateAttr(default_factory=HostHooks)
    _model_once: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    """Taken (never released) by the one call that asks the host for its chat model."""
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _turns: turns.TurnMessages = PrivateAttr(default_factory=turns.TurnMessages)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._config = memory_config_from_backend_config(self.backend_config)
        self._hooks = HostHooks.resolve(self.backend_config)
        self._service = MemoryService.acquire(self._config)

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
        manager = cls(backend_config=config, mode=mode, callbacks=host_hooks.get("callbacks"))
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

    def _ensure_model(self, service: MemoryService) -> None:
        """Hand the host's default chat model to the engine, once, when the config names none."""
        if self._config.model is None and self._model_once.acquire(blocking=False):
            model = host_chat_model(self._hooks.llm_factory)
            if model is not None:
                service.use_model(model)

    @contextmanager
    def _storage_errors(self) -> Iterator[None]:
        try:
            yield
        except RevisionConflict as exc:
            raise MemoryConflictError(str(exc)) from exc
        except CorruptedMemoryError as exc:
            raise MemoryCorruptionError(str(exc)) from exc

    def _scope(self, user_id: str | None, agent_name: str | None) -> MemoryScope:
        return self.service.scope(*turns.identity(user_id, agent_name))

    def _write(self, scope: MemoryScope, change: Callable[[Memory], Memory]) -> dict[str, Any]:
        """``change`` under the storage's compare-and-set loop; the document it stored."""
        with self._storage_errors(), gateway.fact_errors():
            _, after, revision = self.service.change(scope, change)
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
        self,
        thread_id: str,
        messages: list[Any],
        agent_name: str | None,
        user_id: str | None,
        *,
        now: bool,
    ) -> None:
        try:
            service = self.service
            self._ensure_model(service)
            visible = visible_messages(messages, self._hooks.keep_hidden)
            user, agent = turns.user_or_default(user_id), turns.agent_or_none(agent_name)
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
    ) -> str:
        """The memory to inject (our block's content, within ``max_injection_tokens``); "" when
        there is none. Its facts are ranked by the newest message the user said that this
        backend saw — this thread's turn start (``on_turn_start``), else the user's last
        message in an ``add`` (DeerFlow's lead agent calls this with no message, when it builds
        the system prompt) — and with none, by the query-less choice (guaranteed categories,
        then the most used, recent and confident facts, spread over topics). In tool mode the
        summaries only: the model searches the facts with DeerFlow's memory tools."""
        service = self.service
        if not service.injecting:
            return ""
        user, agent = turns.identity(user_id, agent_name)
        said = self._turns.latest(user, agent, thread_id or None)
        messages = [HumanMessage(said)] if said else []
        # tool mode: DeerFlow tells the model that only the summaries are injected and that it
        # finds the facts with its memory tools, as DeerFlow's own backend does
        block = service.memory_block(
            messages, user, agent, thread_id=thread_id or None, with_facts=self.mode != "tool"
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
        service = self.service
        messages = [HumanMessage(query)] if isinstance(query, str) and query.strip() else []
        with self._storage_errors():
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
        with self._storage_errors():
            stored = self.service.storage.load(scope)
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
        with self._storage_errors():
            self.service.forget_user(*turns.identity(user_id, agent_name))

    def clear_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Empty the memory of every agent of the user (``agent_name`` None) or of that agent;
        threads' progress is kept, so turns already read are not extracted again. Returns the
        (empty) document of the bucket."""
        service = self.service
        user, agent = turns.identity(user_id, agent_name)
        requested = self._scope(user, agent)
        scopes = {requested}
        if agent is None:
            with self._storage_errors():
                scopes.update(s for s in service.storage.list_scopes() if s.user_id == user)
        now = utc_now_iso()
        documents = {s: self._write(s, lambda m: gateway.cleared(m, now)) for s in sorted(scopes)}
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
        service = self._service
        if service is None:
            return True
        self._ensure_model(service)
        seconds = float(timeout) if isinstance(timeout, int | float) else 0.0
        if not math.isfinite(seconds) or seconds <= 0:
            seconds = 0.001
        return service.flush(seconds)

    # -- tier 3 -----------------------------------------------------------------------------------

    def warm(self) -> bool | None:
        """Load what the first injection needs (the token counter); True when ready."""
        try:
            self.service.recall.count_tokens("warm up")
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
        self.service.selector.forget(self._scope(user_id, agent_name))
        return self.get_memory(user_id=user_id, agent_name=agent_name)

    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Add a fact by hand (``manual``: extraction never changes or removes it; its
        ``source`` reads ``"manual"``). ValueError ``"content"`` (blank or too long),
        ``"confidence"`` or ``"Duplicate fact"``."""
        fact_id = new_fact_id()

        def add(memory: Memory) -> Memory:  # checks the text, category and confidence itself
            return manual.add_fact(
                memory,
                content,
                fact_id=fact_id,
                now=utc_now_iso(),
                category=category,
                confidence=confidence,
            )

        return self._write(self._scope(user_id, agent_name), add), fact_id

    def delete_fact(
        self,
        fact_id: str,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Remove one fact; KeyError when the bucket has none with this id."""

        def remove(memory: Memory) -> Memory:
            return manual.remove_fact(memory, fact_id, now=utc_now_iso())

        return self._write(self._scope(user_id, agent_name), remove)

    def update_fact(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Change the given fields of one fact, keep the others; the fact becomes ``manual``.
        KeyError when missing; ValueError like :meth:`create_fact`."""
        with gateway.fact_errors():  # bad values are refused before the fact is looked up
            text = manual.checked_text(content) if content is not None else None
            number = manual.checked_confidence(confidence) if confidence is not None else None

        def edit(memory: Memory) -> Memory:
            return manual.edit_fact(
                memory,
                fact_id,
                now=utc_now_iso(),
                content=text,
                category=category,
                confidence=number,
            )

        return self._write(self._scope(user_id, agent_name), edit)

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
    ) -> str:
        """:meth:`get_context` off the event loop."""
        return await asyncio.to_thread(
            self.get_context, user_id, agent_name=agent_name, thread_id=thread_id
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
        if service is not None:
            service.release(CLOSE_SECONDS)

"""The memory as a node pair for hand-built ``StateGraph`` s.

A LangGraph node cannot change only the *model's input*: whatever it returns is written to state.
So the pair works like this::

    class State(MemoryState):            # messages + an ephemeral ``memory_context`` key
        ...

    nodes = MemoryNodes(MemoryMiddleware.from_config("config.yaml", agent_name="coder"))
    builder.add_node("memory_inject", nodes.inject)    # writes state["memory_context"]
    builder.add_node("model", call_model)              # uses nodes.with_memory(state)
    builder.add_node("memory_capture", nodes.capture)  # usage signal, queues the turn; no writes
    builder.add_edge(START, "memory_inject"); builder.add_edge("memory_inject", "model")
    builder.add_edge("model", "memory_capture"); builder.add_edge("memory_capture", END)

``memory_context`` is an ``EphemeralValue`` channel: it is visible to the node right after the
inject node and cleared after that step, and it is never part of ``messages`` (run with
``durability="exit"`` if it must not appear in intermediate checkpoints either). The alternative
that touches no state at all is :meth:`MemoryNodes.wrap_model`, which prepends the memory inside
the model runnable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.channels import EphemeralValue
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from deermem_middleware.middleware import MemoryMiddleware, append_to_system_message
from deermem_middleware.runtime.agents import AgentEngines
from deermem_middleware.runtime.ids import (
    is_delegated_run,
    resolve_agent_name,
    resolve_thread_id,
    resolve_user_id,
)
from deermem_middleware.runtime.service import MemoryService

__all__ = ["MEMORY_CONTEXT_KEY", "MemoryNodes", "MemoryState"]

logger = logging.getLogger(__name__)

MEMORY_CONTEXT_KEY = "memory_context"


class MemoryState(TypedDict, total=False):
    """State keys the node pair uses; extend it with your own."""

    messages: Annotated[list[AnyMessage], add_messages]
    memory_context: Annotated[str, EphemeralValue]


def _runtime() -> Any:
    try:
        from langgraph.runtime import get_runtime

        return get_runtime()
    except (RuntimeError, KeyError):
        return None


def _messages(state: Any, key: str) -> Sequence[BaseMessage]:
    if isinstance(state, Mapping):
        return state.get(key) or []
    return getattr(state, key, None) or []


class MemoryNodes:
    """Inject and capture nodes over the memory engine of a :class:`MemoryMiddleware` (or a
    :class:`~deermem_middleware.runtime.MemoryService`): same config, storage, scheduler and
    caches — and the same engine choice per run: a run naming its agent (``context``,
    ``configurable``) gets that agent's settings and memory, as the middleware's runs do
    (:class:`~deermem_middleware.runtime.agents.AgentEngines`).

    ``model``: the graph's chat model. Without a configured extraction model, extraction uses
    it (as the middleware uses the agent's); :meth:`wrap_model` registers the model it wraps.
    """

    def __init__(
        self,
        middleware: MemoryMiddleware | MemoryService,
        *,
        model: Any = None,
        messages_key: str = "messages",
        context_key: str = MEMORY_CONTEXT_KEY,
    ) -> None:
        self.middleware = middleware
        self.service: MemoryService = (
            middleware.service if isinstance(middleware, MemoryMiddleware) else middleware
        )
        self.agents = (
            middleware.agents
            if isinstance(middleware, MemoryMiddleware)
            else AgentEngines(middleware)
        )
        self._model: Any = model
        if model is not None:
            self.service.use_model(model)
        self.messages_key = messages_key
        self.context_key = context_key
        self.inject: Runnable[Any, dict[str, Any]] = RunnableLambda(
            self._inject, afunc=self._ainject, name="memory_inject"
        )
        self.capture: Runnable[Any, dict[str, Any]] = RunnableLambda(
            self._capture, afunc=self._acapture, name="memory_capture"
        )

    # -- inject --------------------------------------------------------------------------------

    def _engine(
        self, runtime: Any, config: RunnableConfig
    ) -> tuple[MemoryService, str, str | None]:
        """The engine, user and agent of this run (the agent's own settings, if any)."""
        user_id = resolve_user_id(runtime, config)
        engine, agent = self.agents.resolve(resolve_agent_name(runtime, config), user_id)
        if self._model is not None:
            engine.use_model(self._model)
        return engine, user_id, agent

    def _block(self, state: Any, config: RunnableConfig | None) -> str:
        runtime = _runtime()
        if is_delegated_run(runtime, config or {}):
            return ""  # a subagent's run: not the user's conversation
        engine, user_id, agent = self._engine(runtime, config or {})
        if not engine.injecting:
            return ""
        return engine.memory_block(_messages(state, self.messages_key), user_id, agent)

    def _inject(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {self.context_key: self._block(state, config)}

    async def _ainject(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        # storage reads are blocking file I/O: off the event loop (context vars are copied)
        return {self.context_key: await asyncio.to_thread(self._block, state, config)}

    def with_memory(
        self, state: Any, messages: Sequence[BaseMessage] | None = None
    ) -> list[BaseMessage]:
        """The model's input: ``messages`` (default: the state's) with the injected memory added
        to the leading system message (or as a new one). Call it inside your model node."""
        base = list(messages if messages is not None else _messages(state, self.messages_key))
        block = state.get(self.context_key) if isinstance(state, Mapping) else None
        if not block:
            return base
        if base and isinstance(base[0], SystemMessage):
            return [append_to_system_message(base[0], block), *base[1:]]
        return [SystemMessage(block), *base]

    def wrap_model(self, model: Runnable[Any, Any]) -> Runnable[Any, Any]:
        """``model`` with the memory prepended to its input messages on every call — an
        alternative to the inject node that writes nothing to state or checkpoints. A chat
        model wrapped here is also the extraction model when none is configured."""
        self._model = model
        self.service.use_model(model)

        def prepend(messages: Sequence[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
            block = self._block({self.messages_key: messages}, config)
            return self.with_memory({self.context_key: block}, messages)

        async def aprepend(
            messages: Sequence[BaseMessage], config: RunnableConfig
        ) -> list[BaseMessage]:
            block = await asyncio.to_thread(self._block, {self.messages_key: messages}, config)
            return self.with_memory({self.context_key: block}, messages)

        return RunnableLambda(prepend, afunc=aprepend, name="memory_prepend") | model

    # -- capture -------------------------------------------------------------------------------

    def _capture(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        runtime = _runtime()
        if is_delegated_run(runtime, config or {}):
            return {}  # a subagent's run: its "user" message is the lead agent's instruction
        try:
            engine, user_id, agent = self._engine(runtime, config or {})
            if not engine.active:
                return {}
            messages = _messages(state, self.messages_key)
            thread_id = resolve_thread_id(runtime, config or {})
            engine.end_turn(messages, user_id=user_id, thread_id=thread_id, agent_name=agent)
        except Exception:
            logger.exception("memory capture failed; the conversation was not queued")
        return {}

    async def _acapture(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        # the journal write is blocking I/O: off the event loop, as the middleware's
        return await asyncio.to_thread(self._capture, state, config)

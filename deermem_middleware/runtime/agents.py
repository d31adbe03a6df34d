"""Which engine serves a run: the per-agent, per-user engine choice every adapter shares.

One engine serves any number of agents when their settings are the same (the agent only scopes
documents). An agent with settings of its own — ``memory.agents.<name>`` in a YAML file or in
DeerFlow's ``backend_config``, a DeerFlow custom agent's own ``config.yaml`` (per user),
``enabled: false`` included — gets its own shared engine (:meth:`MemoryService.acquire`).

:class:`AgentEngines` is that choice, once: the middleware, the node pair and the DeerFlow
backend each hold one, so a per-agent setting means the same in all three. It keeps the engines
it chose in a bounded LRU by (agent, user) — DeerFlow's custom agents are per user, with per-user
settings files — and releases them with the adapter.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from deermem_middleware.config import ConfigError, MemoryConfig
from deermem_middleware.config.models import AGENT_NAME_PATTERN
from deermem_middleware.runtime.service import MemoryService

__all__ = ["MAX_RUN_AGENTS", "AgentEngines", "AgentSettings"]

logger = logging.getLogger(__name__)

MAX_RUN_AGENTS = 4096
"""(agent, user) pairs whose engine an :class:`AgentEngines` remembers."""

AgentSettings = Callable[[str, str], MemoryConfig]
"""``settings(agent_name, user_id)``: the configuration of that agent for that user; may raise
:class:`ConfigError` (the agent then gets the default agent's settings, logged)."""


class AgentEngines:
    """The engine for each run's agent (see the module docstring).

    Args:
        service: the default agent's engine (the adapter's own; not released here unless
            ``owns_service``).
        settings: how an agent's settings are read (default: the base configuration under the
            agent's name — no per-agent settings).
        objects: the model, storage and embeddings objects the adapter was built with: the
            per-agent engines share them.
        per_run: whether a run's agent name picks the agent; False when the adapter was built
            for one named agent (that agent wins over the run's).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        settings: AgentSettings | None = None,
        objects: tuple[Any, Any, Any] = (None, None, None),
        per_run: bool | None = None,
    ) -> None:
        self.service = service
        self._settings = settings
        self._objects = objects
        self.per_run = service.config.agent_name is None if per_run is None else per_run
        self._agents: collections.OrderedDict[tuple[str, str], MemoryService] = (
            collections.OrderedDict()
        )
        self._own: dict[int, MemoryService] = {}
        self._lock = threading.Lock()
        self._bad_names: set[str] = set()

    def valid(self, agent_name: str) -> bool:
        """Whether ``agent_name`` can name an agent (a bad one is logged once)."""
        if AGENT_NAME_PATTERN.match(agent_name):
            return True
        if agent_name not in self._bad_names:
            self._bad_names.add(agent_name)
            logger.warning(
                "run names agent %r, which is not a valid agent name (%s); its memory is "
                "the default agent's",
                agent_name,
                AGENT_NAME_PATTERN.pattern,
            )
        return False

    def resolve(
        self, agent_name: str | None, user_id: str = "default"
    ) -> tuple[MemoryService, str | None]:
        """The engine and the agent to scope a run naming ``agent_name`` by (None: the
        engine's own agent). The agent named at construction wins; an invalid name is the
        default agent's (logged once)."""
        if not self.per_run or agent_name is None or not self.valid(agent_name):
            return self.service, None
        return self.engine(agent_name, user_id), agent_name

    def engine(self, agent_name: str | None, user_id: str = "default") -> MemoryService:
        """The engine whose settings apply to ``agent_name`` for ``user_id`` (the default
        engine for None, an invalid name, or an agent without settings of its own)."""
        if agent_name is None or not AGENT_NAME_PATTERN.match(agent_name):
            return self.service
        key = (agent_name, user_id)
        with self._lock:
            engine = self._agents.get(key)
            if engine is not None:
                self._agents.move_to_end(key)
                return engine
            engine = self._acquire(agent_name, user_id)
            self._agents[key] = engine
            if engine is not self.service:
                if id(engine) in self._own:
                    engine.release(0)  # already counted once for this adapter
                self._own[id(engine)] = engine
            if len(self._agents) > MAX_RUN_AGENTS:
                self._agents.popitem(last=False)
            return engine

    def _acquire(self, agent_name: str, user_id: str) -> MemoryService:
        base = self.service.config
        config = base.for_agent(agent_name)
        if self._settings is not None:
            try:
                config = self._settings(agent_name, user_id)
            except ConfigError as exc:
                logger.error(
                    "agent %r: its memory settings cannot be loaded (%s); using the default "
                    "agent's",
                    agent_name,
                    exc,
                )
        if config.model_dump(exclude={"agent_name"}) == base.model_dump(exclude={"agent_name"}):
            return self.service
        model, storage, embeddings = self._objects
        return MemoryService.acquire(config, model=model, storage=storage, embeddings=embeddings)

    def engines(self) -> list[MemoryService]:
        """The default engine, then every per-agent engine chosen so far."""
        with self._lock:
            own = list(self._own.values())
        return [self.service, *own]

    def flush(self, timeout: float | None = None) -> bool:
        """Flush every engine, each within ``timeout``; True when all finished in time."""
        return all([engine.flush(timeout) for engine in self.engines()])

    def flush_within(
        self, seconds: float, before: Callable[[MemoryService], None] | None = None
    ) -> bool:
        """Flush every engine within ``seconds`` in all (one hard bound, as a host's shutdown
        asks); ``before(engine)`` runs first for each. True when all finished in time."""
        deadline = time.monotonic() + seconds
        done = True
        for engine in self.engines():
            if before is not None:
                before(engine)
            done = engine.flush(max(0.001, deadline - time.monotonic())) and done
        return done

    def release(self, timeout: float | None = 10.0) -> bool:
        """Release the default engine and every per-agent one (the adapter is done with them);
        True when nothing was left pending."""
        return all([engine.release(timeout) for engine in self.engines()])

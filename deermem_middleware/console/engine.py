"""The engine a standalone console opens: the configured storage, capture off.

A console started on its own (``deermem console``, or :func:`create_console_app` without an
engine) must not run agents' work: it opens a private engine on the same storage with memory
``enabled: false`` — no scheduler, no journal replay — exactly as the ``deermem`` command does.
Mounted into the process that runs the agents, give it their engine instead, and it also sees
their in-process injection ledger.
"""

from __future__ import annotations

from pathlib import Path

from deermem_middleware.config import MemoryConfig, default_config_path, load_memory_config
from deermem_middleware.runtime.service import MemoryService

__all__ = ["tool_engine"]


def tool_engine(
    config_path: str | Path | None = None, agent_name: str | None = None
) -> MemoryService:
    """A private engine on the storage of ``config_path`` (default: the default config file, or
    the built-in defaults without one), with capture off. ``ConfigError`` names file, line, key."""
    path = Path(config_path) if config_path else default_config_path()
    config = (
        load_memory_config(path, agent_name=agent_name)
        if path
        else MemoryConfig(agent_name=agent_name)
    )
    return MemoryService(config.model_copy(update={"enabled": False}), agent_name=agent_name)

"""The engine a tool opens — the ``deermem`` command, a standalone console: the configured
storage, capture off.

A tool must not run agents' work: it opens a private engine on the same storage with memory
``enabled: false`` — no scheduler, no replay of the journal's pending captures (that would run
extractions in the tool and race its own writes). Mounted into the process that runs the agents,
the console is given their engine instead.
"""

from __future__ import annotations

from pathlib import Path

from deermem_middleware.config import MemoryConfig, default_config_path, load_memory_config
from deermem_middleware.runtime.service import MemoryService

__all__ = ["tool_config", "tool_engine"]


def tool_config(
    config_path: str | Path | None = None, agent_name: str | None = None
) -> MemoryConfig:
    """The config of ``config_path`` (default: the default config file, or the built-in defaults
    without one) for ``agent_name``. ``ConfigError`` names file, line and key."""
    path = Path(config_path) if config_path else default_config_path()
    if path:
        return load_memory_config(path, agent_name=agent_name)
    return MemoryConfig(agent_name=agent_name)


def tool_engine(config: MemoryConfig, agent_name: str | None = None) -> MemoryService:
    """A private engine on ``config``'s storage with capture off (see the module docstring)."""
    return MemoryService(config.model_copy(update={"enabled": False}), agent_name=agent_name)

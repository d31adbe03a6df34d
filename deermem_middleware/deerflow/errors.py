"""DeerFlow's memory error classes, as this package raises them.

DeerFlow's gateway maps them to statuses (a lost compare-and-set race: 409, unreadable memory:
500) and its prompt loader re-raises ``MemoryManagerError`` under ``failure_policy.read:
fail_closed``. They live beside DeerFlow's ``MemoryManager``; a DeerFlow without one of them gets
a stand-in of the same name, so the backend still loads. Imports DeerFlow (only the manager
imports this module).
"""

from __future__ import annotations

import importlib

from deerflow.agents.memory.manager import MemoryManager  # type: ignore[import-not-found]

__all__ = ["MemoryConflictError", "MemoryCorruptionError", "MemoryManagerError"]

_deerflow_manager = importlib.import_module(MemoryManager.__module__)
"""DeerFlow's contract module (its error classes live beside ``MemoryManager``)."""


class _FallbackManagerError(RuntimeError):
    """Stands in for DeerFlow's ``MemoryManagerError`` on a DeerFlow without it."""


MemoryManagerError: type[RuntimeError] = getattr(
    _deerflow_manager, "MemoryManagerError", _FallbackManagerError
)


def _deerflow_error(name: str) -> type[RuntimeError]:
    """DeerFlow's error class ``name``; a ``MemoryManagerError`` of that name without it."""
    found: type[RuntimeError] | None = getattr(_deerflow_manager, name, None)
    return found or type(name, (MemoryManagerError,), {})


MemoryConflictError = _deerflow_error("MemoryConflictError")
"""DeerFlow's error for a write that lost an optimistic-concurrency race (gateway: 409)."""
MemoryCorruptionError = _deerflow_error("MemoryCorruptionError")
"""DeerFlow's error for stored memory that cannot be read safely (gateway: 500)."""

"""Test-only stand-in for ``deerflow.agents.memory``: what DeerFlow's gateway imports from it."""

from deerflow.agents.memory.manager import (
    MemoryCallbacks,
    MemoryConflictError,
    MemoryCorruptionError,
    MemoryManager,
    MemoryManagerError,
    build_memory_manager,
)

__all__ = [
    "MemoryCallbacks",
    "MemoryConflictError",
    "MemoryCorruptionError",
    "MemoryManager",
    "MemoryManagerError",
    "build_memory_manager",
]

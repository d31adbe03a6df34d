"""The engine at run time: :class:`MemoryService` — capture, scheduling, updates, selection."""

from .service import MemoryService

__all__ = ["MemoryService"]

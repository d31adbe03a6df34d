"""The engine at run time: :class:`MemoryService` (capture, recovery, scheduling, updates,
selection, the ledger), the debounce scheduler, the updater, retries, id resolution and per-scope
stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.runtime.service import MemoryService

__all__ = ["MemoryService"]


def __getattr__(name: str) -> Any:
    # imported on first use: the service imports most of the package, and modules under
    # runtime/ are imported by modules the service itself imports
    if name == "MemoryService":
        from deermem_middleware.runtime.service import MemoryService

        return MemoryService
    raise AttributeError(name)

"""DeerFlow integration: its memory backend contract, its folders and formats, its config.

Importing this package never imports DeerFlow: the pure parts (formats, folder layout, paths)
work anywhere, and only :class:`DeermemMemoryManager` — the backend DeerFlow loads with
``memory.manager_class: deermem_middleware.deerflow:DeermemMemoryManager`` — needs DeerFlow's
``MemoryManager`` base class, so it is imported on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeermemMemoryManager"]


def __getattr__(name: str) -> Any:
    if name == "DeermemMemoryManager":
        from deermem_middleware.deerflow.manager import DeermemMemoryManager

        return DeermemMemoryManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

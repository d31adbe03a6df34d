"""Storage backends for memory documents (see :mod:`.base` for the contract)."""

from .base import (
    DEFAULT_AGENT,
    DEFAULT_USER,
    CorruptedMemoryError,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StorageError,
    StoredMemory,
)
from .json_file import JSONFileStorage
from .memory import InMemoryStorage
from .store import StoreStorage

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "CorruptedMemoryError",
    "InMemoryStorage",
    "JSONFileStorage",
    "MemoryScope",
    "MemoryStorage",
    "RevisionConflict",
    "StorageError",
    "StoreStorage",
    "StoredMemory",
]

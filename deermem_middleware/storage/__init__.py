"""Storage backends for memory documents (see :mod:`deermem_middleware.storage.base` for the
contract)."""

from deermem_middleware.storage import file_journal as _file_journal  # noqa: F401 - loaded once
from deermem_middleware.storage.base import (
    DEFAULT_AGENT,
    DEFAULT_USER,
    CorruptedMemoryError,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StorageError,
    StoredMemory,
)
from deermem_middleware.storage.json_file import JSONFileStorage
from deermem_middleware.storage.memory import InMemoryStorage
from deermem_middleware.storage.store import StoreStorage

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

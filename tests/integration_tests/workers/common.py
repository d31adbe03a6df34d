"""What the writer processes share: conversations carrying one marker each, their config, and a
middleware whose extraction model (:class:`~deermem_middleware.testing.MarkerChatModel`) turns each
marker of a conversation into one fact, ``User mentioned marker <marker>``."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.storage import JSONFileStorage
from deermem_middleware.testing import MarkerChatModel


def conversation(marker: str) -> list[BaseMessage]:
    """One exchange that carries ``marker`` (neither message is a trivial acknowledgement)."""
    return [
        HumanMessage(f"Please keep this in mind: my marker for today is {marker}."),
        AIMessage(f"Understood, I will remember that your marker is {marker}."),
    ]


def writer_config(storage_path: str, **overrides: Any) -> MemoryConfig:
    """No debounce, room for every fact, no embeddings, no flush at exit (writers flush)."""
    values: dict[str, Any] = {
        "storage_path": storage_path,
        "max_facts": 1000,
        "debounce_seconds": 0,
        "max_wait_seconds": 0,
        "embeddings": "none",
        "flush_on_exit_seconds": None,
    }
    values.update(overrides)
    return MemoryConfig(**values)


def is_dsn(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_target(location: str) -> Any:
    """The storage a test location names: a PostgreSQL DSN (namespace prefix from
    ``$DEERMEM_TEST_PREFIX``) or a JSON-file folder."""
    if is_dsn(location):
        from deermem_middleware.config import StorageConfig
        from deermem_middleware.storage.factory import open_storage

        prefix = os.environ.get("DEERMEM_TEST_PREFIX", "deermem")
        storage = StorageConfig(backend="postgres", dsn=location, prefix=prefix, pool_max_size=2)
        return open_storage(writer_config("/nonexistent", storage=storage))
    return JSONFileStorage(location)


def writer_middleware(
    storage_path: str, agent: str, *, fsync: bool = True
) -> tuple[MemoryMiddleware, MarkerChatModel]:
    """A writer on the JSON-file storage at ``storage_path`` (``fsync=True`` is the default), or
    on PostgreSQL when ``storage_path`` is a DSN."""
    model = MarkerChatModel()
    if is_dsn(storage_path):
        storage: Any = open_target(storage_path)
        config = writer_config("/nonexistent")
    else:
        storage = JSONFileStorage(storage_path, fsync=fsync)
        config = writer_config(storage_path)
    return MemoryMiddleware(config, model=model, agent_name=agent, storage=storage), model

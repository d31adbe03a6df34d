"""Opening the storage a config names (``storage.backend``)."""

from __future__ import annotations

import logging
from typing import Any

from deermem_middleware.storage.base import MemoryStorage
from deermem_middleware.storage.json_file import JSONFileStorage
from deermem_middleware.storage.store import StoreStorage

__all__ = ["open_storage", "wrap_storage"]

logger = logging.getLogger(__name__)


def wrap_storage(storage: Any) -> MemoryStorage:
    """A :class:`MemoryStorage` as is; a LangGraph ``BaseStore`` wrapped in
    :class:`StoreStorage`."""
    try:
        from langgraph.store.base import BaseStore
    except ImportError:  # pragma: no cover - langgraph is a dependency
        BaseStore = ()  # type: ignore[assignment,misc]
    if isinstance(storage, BaseStore):
        return StoreStorage(storage)
    return storage


def open_storage(config: Any) -> MemoryStorage:
    """The storage of a :class:`~deermem_middleware.config.MemoryConfig` (tables created when
    ``storage.setup`` is true)."""
    options = config.storage
    if options.backend == "file":
        return JSONFileStorage(config.storage_path)
    if options.backend == "memory":
        from langgraph.store.memory import InMemoryStore

        return StoreStorage(InMemoryStore(), prefix=options.prefix)
    if options.backend == "sqlite":
        import sqlite3

        try:
            from langgraph.store.sqlite import SqliteStore
        except ImportError as exc:
            raise ImportError(
                "storage.backend sqlite needs: pip install 'deermem-middleware[sqlite]'"
            ) from exc
        conn = sqlite3.connect(options.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=30000")
        storage = StoreStorage(SqliteStore(conn), prefix=options.prefix)
        storage.add_closer(conn)
    else:
        try:
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise ImportError(
                "storage.backend postgres needs: pip install 'deermem-middleware[postgres]'"
            ) from exc
        pool: ConnectionPool[Any] = ConnectionPool(
            options.dsn,
            min_size=options.pool_min_size,
            max_size=options.pool_max_size,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
            name="deermem",
        )
        storage = StoreStorage(PostgresStore(pool), prefix=options.prefix)
        storage.add_closer(pool)
    if options.setup:
        storage.setup()
    return storage

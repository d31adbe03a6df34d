"""Opening the storage a config names (``storage.backend``)."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from deermem_middleware.storage.base import MemoryStorage, StorageError
from deermem_middleware.storage.json_file import JSONFileStorage
from deermem_middleware.storage.outage import (
    StorageUnavailable,
    describe_dsn,
    first_line,
    is_outage,
)
from deermem_middleware.storage.store import StoreStorage

__all__ = ["connection_kwargs", "open_storage", "unreachable", "wrap_storage"]

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


def _open_sqlite(path: str) -> Any:
    """A connection to the SQLite database at ``path`` (``storage.path``), or a
    :class:`StorageError` saying what is wrong with the path: SQLite's own "unable to open
    database file" names neither the file nor the reason."""
    import sqlite3

    folder = Path(path).expanduser().parent
    if path != ":memory:" and not folder.is_dir():
        raise StorageError(
            f"storage.path {path!r}: the folder {str(folder)!r} does not exist; create it or "
            "point storage.path at a file in an existing folder"
        )
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        # the busy timeout first: switching a new file to WAL takes its lock, and processes
        # opening it together failed at once with "database is locked" (1 start in 20)
        conn.execute("PRAGMA busy_timeout=30000")
        _wal(conn)
    except sqlite3.Error as exc:
        raise StorageError(
            f"storage.path {path!r}: cannot open the SQLite database: {exc}"
        ) from None
    return conn


def _wal(conn: Any, attempts: int = 50) -> None:
    """Switch to write-ahead logging; a switch that meets another process's lock (SQLite does
    not always wait its busy timeout for it) is tried again."""
    import sqlite3

    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.02 * (attempt + 1))


def open_storage(config: Any) -> MemoryStorage:
    """The storage of a :class:`~deermem_middleware.config.MemoryConfig` (tables created when
    ``storage.setup`` is true)."""
    options = config.storage
    timeout = config.storage_timeout_seconds
    if options.backend == "file":
        return JSONFileStorage(config.storage_path)
    if options.backend == "memory":
        from langgraph.store.memory import InMemoryStore

        return StoreStorage(InMemoryStore(), prefix=options.prefix)
    if options.backend == "sqlite":
        try:
            from langgraph.store.sqlite import SqliteStore
        except ImportError as exc:
            raise ImportError(
                "storage.backend sqlite needs: pip install 'deermem-middleware[sqlite]'"
            ) from exc
        conn = _open_sqlite(options.path)
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
            kwargs={**connection_kwargs(options.dsn, timeout), "row_factory": dict_row},
            timeout=timeout,  # a connection within this, or PoolTimeout (psycopg_pool: 30 s)
            open=True,
            name="deermem",
        )
        storage = StoreStorage(PostgresStore(pool), prefix=options.prefix)
        storage.add_closer(pool)
    if options.setup:
        try:
            storage.setup()
        except Exception as exc:
            if options.backend != "postgres" or not is_outage(exc):
                raise
            storage.close()
            raise StorageUnavailable(unreachable(options.dsn or "", timeout, exc)) from exc
    return storage


def connection_kwargs(dsn: str, timeout: float) -> dict[str, Any]:
    """The psycopg connection settings of the pool (``row_factory`` aside): autocommit, no
    server-side prepared statements, and libpq's ``connect_timeout`` from ``timeout`` (whole
    seconds, 2 at least: libpq's floor) unless ``dsn`` sets its own — without one, connecting to
    a host that does not answer waits for the system's TCP timeout (minutes)."""
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}
    try:
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(dsn)
    except Exception:  # not parsable: connecting reports it
        given = {}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = max(2, math.ceil(timeout))
    return kwargs


def unreachable(dsn: str, timeout: float, exc: BaseException) -> str:
    """One line for a database that did not answer: which one (never the password), the
    settings involved, and the driver's own first line."""
    return (
        f"cannot reach {describe_dsn(dsn)} within {timeout:g}s (storage.dsn, "
        f"storage_timeout_seconds): {first_line(exc)}"
    )

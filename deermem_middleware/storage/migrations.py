"""Creating a store's tables when several processes start at once.

LangGraph's ``PostgresStore.setup()`` reads the applied migration versions, then applies the
missing ones and records each — with nothing that stops two processes doing the same at the same
moment. Replicas started together on a fresh database crashed in 5 of 14 starts of three or four
processes (measured): ``UniqueViolation`` on ``store_migrations_pkey`` or on the catalogue row of
the ``store_migrations`` type (two ``CREATE TABLE IF NOT EXISTS`` racing), or ``deadlock
detected`` (two ``CREATE INDEX CONCURRENTLY`` waiting for each other). ``SqliteStore.setup()``
has the same window between reading the version and inserting it.

So setup runs serialised across processes, and is idempotent:

- **PostgreSQL**: under a session-level advisory lock, on a connection of its own (a pool of one
  connection must not wait for itself). The lock is taken with ``pg_try_advisory_lock`` in a
  short polling loop, not ``pg_advisory_lock``: a waiter blocked inside a statement holds a
  snapshot, and ``CREATE INDEX CONCURRENTLY`` in the lock holder waits for every such snapshot
  to end — the two would wait for each other.
- **SQLite**: under an ``flock`` of a file beside the database (``<db>.setup-lock``).
- Whatever runs setup without us (another program migrating the same database) can still race:
  a setup that fails on one of those race errors is run again (it reads the versions anew and
  finds the work done), a few times, before the error is raised.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from deermem_middleware.storage.base import StorageError

__all__ = ["SETUP_LOCK_KEY", "serialised_setup"]

logger = logging.getLogger(__name__)

SETUP_LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"deermem-middleware:store-setup", digest_size=8).digest(), "big", signed=True
)
"""The PostgreSQL advisory lock (one 64-bit key) that every process holds while it sets up."""

LOCK_WAIT_SECONDS = 120.0
"""Longest wait for another process's setup (a migration that builds an index can take long)."""

RACE_RETRIES = 5
"""Setups run again after losing a race to a process that does not take the lock."""


def serialised_setup(store: Any, setup: Callable[[], None]) -> None:
    """Run ``setup`` (the store's own) so that processes sharing the database take turns."""
    names = {c.__module__ + "." + c.__name__ for c in type(store).__mro__}
    if "langgraph.store.postgres.base.PostgresStore" in names:
        with _postgres_lock(store):
            _retrying(setup, _postgres_race)
    elif "langgraph.store.sqlite.base.SqliteStore" in names:
        with _file_lock(_sqlite_path(store)):
            _retrying(setup, _sqlite_race, before_retry=lambda: _not_set_up(store))
    else:
        setup()


def _retrying(
    setup: Callable[[], None],
    is_race: Callable[[BaseException], bool],
    before_retry: Callable[[], None] | None = None,
) -> None:
    for attempt in range(RACE_RETRIES + 1):
        try:
            setup()
            return
        except Exception as exc:
            if attempt == RACE_RETRIES or not is_race(exc):
                raise
            logger.info(
                "store setup raced another process (%s: %s); running it again",
                type(exc).__name__,
                str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            )
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
            if before_retry is not None:
                before_retry()


# -- PostgreSQL ----------------------------------------------------------------------------------


def _postgres_race(exc: BaseException) -> bool:
    """Errors two concurrent migrations cause: a duplicate catalogue or version row, a table or
    index created meanwhile, a deadlock between them."""
    try:
        from psycopg import errors
    except ImportError:  # pragma: no cover - a PostgresStore implies psycopg
        return False
    return isinstance(
        exc,
        errors.UniqueViolation
        | errors.DuplicateTable
        | errors.DuplicateObject
        | errors.DeadlockDetected,
    )


@contextlib.contextmanager
def _own_connection(store: Any) -> Iterator[Any]:
    """A connection for the lock: a new one to the pool's database, or the store's only one
    (a session lock held by the connection that runs the setup does not block it)."""
    conn = store.conn
    if callable(getattr(conn, "getconn", None)):  # a ConnectionPool (not a Connection)
        import psycopg

        kwargs = dict(getattr(conn, "kwargs", None) or {})
        kwargs["autocommit"] = True
        with psycopg.connect(conn.conninfo, **kwargs) as own:
            yield own
    else:
        yield conn


def _scalar(cur: Any) -> Any:
    row = cur.fetchone()
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


@contextlib.contextmanager
def _postgres_lock(store: Any) -> Iterator[None]:
    with _own_connection(store) as conn:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        delay = 0.02
        while True:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,))
                if _scalar(cur):
                    break
            if time.monotonic() > deadline:
                raise StorageError(
                    f"store setup: another process held the setup lock for over "
                    f"{LOCK_WAIT_SECONDS:g}s (advisory lock {SETUP_LOCK_KEY})"
                )
            time.sleep(random.uniform(delay / 2, delay))
            delay = min(0.5, delay * 1.5)
        try:
            yield
        finally:
            with contextlib.suppress(Exception), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


# -- SQLite --------------------------------------------------------------------------------------


def _sqlite_race(exc: BaseException) -> bool:
    """A version row inserted meanwhile, or the database locked past its busy timeout."""
    if isinstance(exc, sqlite3.IntegrityError):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _sqlite_path(store: Any) -> Path | None:
    """The file of the store's main database (None: in memory, or not known)."""
    try:
        with store.lock:
            rows = store.conn.execute("PRAGMA database_list").fetchall()
    except Exception:  # not a plain sqlite3 connection: no file to lock beside
        return None
    for row in rows:
        if row[1] == "main" and row[2]:
            return Path(row[2])
    return None


def _not_set_up(store: Any) -> None:
    """Let ``SqliteStore.setup()`` run again after a failed attempt."""
    with contextlib.suppress(AttributeError):
        store.is_setup = False


@contextlib.contextmanager
def _file_lock(database: Path | None) -> Iterator[None]:
    if database is None:
        yield
        return
    lock = database.with_name(database.name + ".setup-lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:  # a read-only folder: no lock, the retries still hold
        logger.debug("no setup lock beside %s (%s)", database, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

"""Compare-and-set per LangGraph store kind (for :class:`.store.StoreStorage`).

``PostgresStore`` and ``SqliteStore`` get conditional statements on the store's own table (atomic
across processes and hosts); ``InMemoryStore`` a lock shared by everything in the process that
uses that store object; any other store is refused unless ``consistency="last_writer_wins"``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Literal, Protocol

__all__ = ["Consistency", "writer_for"]

logger = logging.getLogger(__name__)

Consistency = Literal["cas", "last_writer_wins"]


class Writer(Protocol):
    """Compare-and-set on one store's items (``atomic``: across processes too; ``shared``:
    other processes see the items)."""

    atomic: bool
    shared: bool

    def insert_new(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
        """Store ``value`` if no item exists; False when one does."""
        ...

    def replace_if(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], revision: int
    ) -> bool:
        """Replace the item if its ``revision`` equals ``revision``; False otherwise."""
        ...

    def delete_if(self, namespace: tuple[str, ...], key: str, field: str, expected: str) -> bool:
        """Delete the item if ``value[field] == expected`` (a missing field reads as "")."""
        ...

    def replace_where(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        field: str,
        expected: str,
    ) -> bool:
        """Replace the item if ``value[field] == expected`` (a missing field reads as "")."""
        ...

    def revision_of(self, namespace: tuple[str, ...], key: str) -> int | None:
        """The stored revision only (cheap: lets a cached document be reused)."""
        ...

    def set_aside(self, namespace: tuple[str, ...], key: str, aside: str, reason: str) -> bool:
        """Move an item whose stored text cannot be decoded (the store's own ``get`` raises)
        to key ``aside``, as ``{"reason": reason, "raw": <the stored text>}`` — readable again,
        and kept for inspection. False when there was no such item."""
        ...


def _field_text(value: dict[str, Any], field: str) -> str:
    found = value.get(field)
    return "" if found is None else str(found)


_STORE_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_STORE_LOCKS_GUARD = threading.Lock()


def _lock_for(store: Any) -> threading.Lock:
    with _STORE_LOCKS_GUARD:
        lock = _STORE_LOCKS.get(store)
        if lock is None:
            lock = _STORE_LOCKS[store] = threading.Lock()
        return lock


class _LockedWriter:
    """Read-compare-write under a lock: atomic for every user of the store *in this process*
    (right for ``InMemoryStore``); with ``atomic=False`` it is the documented last-writer-wins
    mode for stores shared by processes that cannot do better."""

    def __init__(self, store: Any, *, atomic: bool) -> None:
        self.store = store
        self.atomic = atomic
        self.shared = not atomic  # atomic here means: one process's InMemoryStore
        self._lock = _lock_for(store)

    def revision_of(self, namespace: tuple[str, ...], key: str) -> int | None:
        return self._revision(namespace, key)

    def _revision(self, namespace: tuple[str, ...], key: str) -> int | None:
        item = self.store.get(namespace, key)
        if item is None:
            return None
        value = item.value
        return int(value.get("revision", 0)) if isinstance(value, dict) else 0

    def insert_new(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
        with self._lock:
            if self.store.get(namespace, key) is not None:
                return False
            self.store.put(namespace, key, value, index=False)
            return True

    def replace_if(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], revision: int
    ) -> bool:
        with self._lock:
            if self._revision(namespace, key) != revision:
                return False
            self.store.put(namespace, key, value, index=False)
            return True

    def delete_if(self, namespace: tuple[str, ...], key: str, field: str, expected: str) -> bool:
        with self._lock:
            item = self.store.get(namespace, key)
            if item is None or not isinstance(item.value, dict):
                return False
            if _field_text(item.value, field) != expected:
                return False
            self.store.delete(namespace, key)
            return True

    def replace_where(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        field: str,
        expected: str,
    ) -> bool:
        with self._lock:
            item = self.store.get(namespace, key)
            if item is None or not isinstance(item.value, dict):
                return False
            if _field_text(item.value, field) != expected:
                return False
            self.store.put(namespace, key, value, index=False)
            return True

    def set_aside(self, namespace: tuple[str, ...], key: str, aside: str, reason: str) -> bool:
        # a store of Python objects has no stored text to keep: only its absence to make sure of
        with self._lock:
            try:
                item = self.store.get(namespace, key)
            except (ValueError, RecursionError):
                item = None
            if item is not None:
                self.store.put(
                    namespace, aside, {"reason": reason, "raw": repr(item.value)[:10_000]}
                )
            self.store.delete(namespace, key)
            return True


_CAPTURE_SQL = """
INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)
ON CONFLICT (prefix, key) DO UPDATE SET
    value = EXCLUDED.value || CASE
        WHEN jsonb_typeof(store.value->'claim') = 'object' THEN jsonb_build_object(
            'claim', store.value->'claim',
            'orphan_at', store.value->'claim'->'until')
        ELSE jsonb_build_object(
            'first', LEAST(EXCLUDED.value->'first', store.value->'first', store.value->'created'))
    END,
    updated_at = CURRENT_TIMESTAMP
"""

_ORPHANS_SQL = """
SELECT prefix, key, value FROM store
WHERE prefix LIKE %s ESCAPE '\\'
  AND CASE WHEN jsonb_typeof(value->'orphan_at') = 'number'
           THEN (value->>'orphan_at')::float8 <= %s ELSE true END
LIMIT 10000
"""


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _atomic(connection: Any) -> Any:
    """Nothing on an autocommit connection (each statement commits), else a transaction."""
    return contextlib.nullcontext() if connection.autocommit else connection.transaction()


class _PostgresWriter:
    """Conditional statements on ``PostgresStore``'s table, through its connection or pool."""

    atomic = True
    shared = True

    def __init__(self, store: Any) -> None:
        self.store = store

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        """A cursor for one statement. Every statement here is atomic on its own: on an
        autocommit connection (ours always are) it runs without ``BEGIN``/``COMMIT`` around it
        — two round trips fewer, a sixth of a capture's journal write on loopback."""
        conn = self.store.conn
        if hasattr(conn, "connection"):  # a psycopg_pool.ConnectionPool: thread-safe
            with conn.connection() as connection, _atomic(connection), connection.cursor() as cur:
                yield cur
        else:  # one connection shared with the store: serialise on the store's own lock
            with self.store.lock, _atomic(conn), conn.cursor() as cur:
                yield cur

    def insert_new(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
        from psycopg.types.json import Jsonb

        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (prefix, key) DO NOTHING",
                (".".join(namespace), key, Jsonb(value)),
            )
            return bool(cur.rowcount == 1)

    def replace_if(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], revision: int
    ) -> bool:
        from psycopg.types.json import Jsonb

        with self._cursor() as cur:
            cur.execute(
                "UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = %s AND key = %s AND (value->>'revision')::bigint = %s",
                (Jsonb(value), ".".join(namespace), key, revision),
            )
            return bool(cur.rowcount == 1)

    def delete_if(self, namespace: tuple[str, ...], key: str, field: str, expected: str) -> bool:
        with self._cursor() as cur:
            cur.execute(
                "DELETE FROM store WHERE prefix = %s AND key = %s "
                "AND COALESCE(value->>%s, '') = %s",
                (".".join(namespace), key, field, expected),
            )
            return bool(cur.rowcount == 1)

    def replace_where(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        field: str,
        expected: str,
    ) -> bool:
        from psycopg.types.json import Jsonb

        with self._cursor() as cur:
            cur.execute(
                "UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = %s AND key = %s AND COALESCE(value->>%s, '') = %s",
                (Jsonb(value), ".".join(namespace), key, field, expected),
            )
            return bool(cur.rowcount == 1)

    def capture_pending(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """A journal entry's capture in one statement, on the agent's path: the new capture,
        keeping the stored entry's claim — or, unclaimed, the time its oldest pending turns
        were captured (what :func:`~deermem_middleware.storage.pending.captured` does)."""
        from psycopg.types.json import Jsonb

        with self._cursor() as cur:
            cur.execute(_CAPTURE_SQL, (".".join(namespace), key, Jsonb(value)))

    def pending_orphans(self, prefix: tuple[str, ...], now: float) -> list[dict[str, Any]]:
        """The values under ``prefix`` whose ``orphan_at`` is at or before ``now`` (or that
        have none: entries written before it existed), with ``namespace`` and ``key`` added."""
        pattern = _like_escape(".".join(prefix)) + ".%"
        with self._cursor() as cur:
            cur.execute(_ORPHANS_SQL, (pattern, now))
            rows = cur.fetchall()
        found = []
        for row in rows:
            prefix_text, key, value = (
                (row["prefix"], row["key"], row["value"]) if isinstance(row, dict) else row
            )
            if isinstance(value, str | bytes):
                value = json.loads(value)
            found.append({"namespace": tuple(prefix_text.split(".")), "key": key, "value": value})
        return found

    def set_aside(self, namespace: tuple[str, ...], key: str, aside: str, reason: str) -> bool:
        with self._cursor() as cur:
            cur.execute(
                "UPDATE store SET key = %s, value = jsonb_build_object('reason', %s::text, "
                "'raw', value::text), updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = %s AND key = %s",
                (aside, reason, ".".join(namespace), key),
            )
            return bool(cur.rowcount == 1)

    def revision_of(self, namespace: tuple[str, ...], key: str) -> int | None:
        with self._cursor() as cur:
            cur.execute(
                "SELECT (value->>'revision')::bigint FROM store WHERE prefix = %s AND key = %s",
                (".".join(namespace), key),
            )
            row = cur.fetchone()
        if row is None:
            return None
        value = next(iter(row.values())) if isinstance(row, dict) else row[0]
        return None if value is None else int(value)


class _SqliteWriter:
    """Conditional statements on ``SqliteStore``'s table (the database file lock makes them
    atomic across processes)."""

    atomic = True
    shared = True

    def __init__(self, store: Any) -> None:
        self.store = store

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        self._ensure_setup()
        with self.store.lock:
            conn = self.store.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def insert_new(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO store (prefix, key, value) VALUES (?, ?, ?)",
                (".".join(namespace), key, json.dumps(value, ensure_ascii=False)),
            )
            return bool(cur.rowcount == 1)

    def replace_if(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], revision: int
    ) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "UPDATE store SET value = ?, updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = ? AND key = ? AND json_extract(value, '$.revision') = ?",
                (json.dumps(value, ensure_ascii=False), ".".join(namespace), key, revision),
            )
            return bool(cur.rowcount == 1)

    def delete_if(self, namespace: tuple[str, ...], key: str, field: str, expected: str) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "DELETE FROM store WHERE prefix = ? AND key = ? "
                "AND COALESCE(CAST(json_extract(value, ?) AS TEXT), '') = ?",
                (".".join(namespace), key, f"$.{field}", expected),
            )
            return bool(cur.rowcount == 1)

    def replace_where(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        field: str,
        expected: str,
    ) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "UPDATE store SET value = ?, updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = ? AND key = ? "
                "AND COALESCE(CAST(json_extract(value, ?) AS TEXT), '') = ?",
                (
                    json.dumps(value, ensure_ascii=False),
                    ".".join(namespace),
                    key,
                    f"$.{field}",
                    expected,
                ),
            )
            return bool(cur.rowcount == 1)

    def set_aside(self, namespace: tuple[str, ...], key: str, aside: str, reason: str) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(  # the TEXT column, quoted as a JSON string: no JSON parse
                "UPDATE store SET key = ?, value = json_object('reason', ?, 'raw', "
                "CAST(value AS TEXT)), updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = ? AND key = ?",
                (aside, reason, ".".join(namespace), key),
            )
            return bool(cur.rowcount == 1)

    def _ensure_setup(self) -> None:
        if not getattr(self.store, "is_setup", True):
            from deermem_middleware.storage.migrations import serialised_setup

            serialised_setup(self.store, self.store.setup)

    def revision_of(self, namespace: tuple[str, ...], key: str) -> int | None:
        self._ensure_setup()
        with self.store.lock:
            try:
                row = self.store.conn.execute(
                    "SELECT json_extract(value, '$.revision') FROM store "
                    "WHERE prefix = ? AND key = ?",
                    (".".join(namespace), key),
                ).fetchone()
            except sqlite3.OperationalError as exc:  # "malformed JSON": nested too deeply
                if "JSON" not in str(exc):
                    raise
                return -1  # not a revision any cached document has: the caller re-reads it
        return None if row is None or row[0] is None else int(row[0])


def writer_for(store: Any, consistency: Consistency) -> Writer:
    kind = type(store)
    names = {c.__module__ + "." + c.__name__ for c in kind.__mro__}
    if "langgraph.store.postgres.base.PostgresStore" in names:
        return _PostgresWriter(store)
    if "langgraph.store.sqlite.base.SqliteStore" in names:
        return _SqliteWriter(store)
    if "langgraph.store.memory.InMemoryStore" in names:
        return _LockedWriter(store, atomic=True)
    if consistency == "last_writer_wins":
        logger.warning(
            "memory on %s without compare-and-set (consistency=last_writer_wins): concurrent "
            "writers in different processes can lose updates",
            kind.__name__,
        )
        return _LockedWriter(store, atomic=False)
    raise ValueError(
        f"{kind.__name__} has no compare-and-set support here; use PostgresStore, SqliteStore or "
        "InMemoryStore, or pass consistency='last_writer_wins' to accept lost updates between "
        "processes"
    )

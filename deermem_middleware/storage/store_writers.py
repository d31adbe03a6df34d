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

from deermem_middleware.storage.store_postgres import Also, PostgresWriter

__all__ = ["Also", "Consistency", "writer_for"]

logger = logging.getLogger(__name__)

Consistency = Literal["cas", "last_writer_wins"]


class Writer(Protocol):
    """Compare-and-set on one store's items (``atomic``: across processes too; ``shared``:
    other processes see the items)."""

    atomic: bool
    shared: bool

    def insert_new(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], also: Also = None
    ) -> bool:
        """Store ``value`` (and ``also``) if no item exists; False when one does."""
        ...

    def replace_if(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        revision: int,
        also: Also = None,
    ) -> bool:
        """Replace the item (and write ``also``) if its ``revision`` equals ``revision``;
        False otherwise (nothing written)."""
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

    def insert_new(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], also: Also = None
    ) -> bool:
        with self._lock:
            if self.store.get(namespace, key) is not None:
                return False
            self.store.put(namespace, key, value, index=False)
            if also is not None:
                self.store.put(namespace, also[0], also[1], index=False)
            return True

    def replace_if(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        revision: int,
        also: Also = None,
    ) -> bool:
        with self._lock:
            if self._revision(namespace, key) != revision:
                return False
            self.store.put(namespace, key, value, index=False)
            if also is not None:
                self.store.put(namespace, also[0], also[1], index=False)
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

    def insert_new(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], also: Also = None
    ) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO store (prefix, key, value) VALUES (?, ?, ?)",
                (".".join(namespace), key, json.dumps(value, ensure_ascii=False)),
            )
            done = bool(cur.rowcount == 1)
            if done and also is not None:
                self._put(conn, namespace, also)
            return done

    def replace_if(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        revision: int,
        also: Also = None,
    ) -> bool:
        with self._transaction() as conn:
            cur = conn.execute(
                "UPDATE store SET value = ?, updated_at = CURRENT_TIMESTAMP "
                "WHERE prefix = ? AND key = ? AND json_extract(value, '$.revision') = ?",
                (json.dumps(value, ensure_ascii=False), ".".join(namespace), key, revision),
            )
            done = bool(cur.rowcount == 1)
            if done and also is not None:
                self._put(conn, namespace, also)
            return done

    @staticmethod
    def _put(conn: Any, namespace: tuple[str, ...], item: tuple[str, dict[str, Any]]) -> None:
        conn.execute(
            "INSERT INTO store (prefix, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, "
            "updated_at = CURRENT_TIMESTAMP",
            (".".join(namespace), item[0], json.dumps(item[1], ensure_ascii=False)),
        )

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
        return PostgresWriter(store)
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

"""Compare-and-set on ``PostgresStore``'s own table (for :class:`.store.StoreStorage`): one
conditional statement per write, atomic across processes and hosts, through the store's
connection or pool. A document and its derived data go in one statement (a ``WITH`` whose second
insert runs only when the first row was written)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

__all__ = ["Also", "PostgresWriter"]

Also = tuple[str, dict[str, Any]] | None
"""A second item of the same namespace (key, value) written in the same atomic step as the
first, only when the first is written (a document's derived data)."""


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


_ALSO_SQL = """
INSERT INTO store (prefix, key, value) SELECT %s, %s, %s FROM first
ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = CURRENT_TIMESTAMP
"""


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _atomic(connection: Any) -> Any:
    """Nothing on an autocommit connection (each statement commits), else a transaction."""
    return contextlib.nullcontext() if connection.autocommit else connection.transaction()


class PostgresWriter:
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
        if callable(getattr(conn, "getconn", None)):  # a psycopg_pool.ConnectionPool
            # (a plain psycopg Connection has a ``connection`` attribute too: itself)
            with conn.connection() as connection, _atomic(connection), connection.cursor() as cur:
                yield cur
        else:  # one connection shared with the store: serialise on the store's own lock
            with self.store.lock, _atomic(conn), conn.cursor() as cur:
                yield cur

    def insert_new(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], also: Also = None
    ) -> bool:
        from psycopg.types.json import Jsonb

        prefix = ".".join(namespace)
        with self._cursor() as cur:
            if also is None:
                cur.execute(
                    "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (prefix, key) DO NOTHING",
                    (prefix, key, Jsonb(value)),
                )
            else:  # one statement: the second item only if the first went in
                cur.execute(
                    "WITH first AS (INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (prefix, key) DO NOTHING RETURNING 1) " + _ALSO_SQL,
                    (prefix, key, Jsonb(value), prefix, also[0], Jsonb(also[1])),
                )
            return bool(cur.rowcount == 1)

    def replace_if(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        revision: int,
        also: Also = None,
    ) -> bool:
        from psycopg.types.json import Jsonb

        prefix = ".".join(namespace)
        with self._cursor() as cur:
            if also is None:
                cur.execute(
                    "UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
                    "WHERE prefix = %s AND key = %s AND (value->>'revision')::bigint = %s",
                    (Jsonb(value), prefix, key, revision),
                )
            else:  # one statement: the second item only if the first was replaced
                cur.execute(
                    "WITH first AS (UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
                    "WHERE prefix = %s AND key = %s AND (value->>'revision')::bigint = %s "
                    "RETURNING 1) " + _ALSO_SQL,
                    (Jsonb(value), prefix, key, revision, prefix, also[0], Jsonb(also[1])),
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

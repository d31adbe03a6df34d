"""Telling a storage that is *away* from one that is *wrong*, and naming a database for people.

A database that is down, restarting or unreachable is an outage: the request was fine, nobody
answered it, and asking again later will work. That is worth one WARNING and a retry, not a
traceback per agent turn (a dead PostgreSQL once logged one for every model call). Anything else
— a corrupted document, a full disk, a bug — keeps its own handling.

Error messages name the database by host, port, name and user, never by its DSN: a DSN often
carries the password, and error lines end up in logs and terminals.
"""

from __future__ import annotations

from deermem_middleware.storage.base import StorageError

__all__ = ["StorageUnavailable", "describe_dsn", "first_line", "is_outage"]


class StorageUnavailable(StorageError):
    """The storage did not answer in time or refused the connection: try again later."""


def is_outage(exc: BaseException) -> bool:
    """True for connection-level failures: timeouts, refused or lost connections, psycopg's
    ``OperationalError`` (which ``psycopg_pool.PoolTimeout`` is) — the storage is away, the
    request itself was fine."""
    if isinstance(exc, StorageUnavailable | TimeoutError | ConnectionError):
        return True
    try:
        import psycopg
    except ImportError:  # the postgres extra is not installed: no psycopg error can occur
        return False
    return isinstance(exc, psycopg.OperationalError)


def first_line(exc: BaseException, limit: int = 200) -> str:
    """``exc`` as one short line: its first line of text, or its type's name."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__


def describe_dsn(dsn: str) -> str:
    """The database ``dsn`` names, for people — ``PostgreSQL database 'x' at host:port as user
    'u'`` — and never its password (nor the DSN itself when libpq cannot parse it)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:  # not parsable, or no psycopg: say which setting, not what it holds
        return "the PostgreSQL database of storage.dsn (not a valid connection string)"
    database = params.get("dbname") or params.get("user") or "postgres"
    host = str(params.get("host") or "the local socket")
    port = params.get("port")
    where = f"{host}:{port}" if port else host
    user = params.get("user")
    return f"PostgreSQL database {database!r} at {where}" + (f" as user {user!r}" if user else "")

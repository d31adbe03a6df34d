"""The backends the storage conformance suite runs over, and what each one can do.

In the spirit of LangGraph's ``checkpoint-conformance``: every test takes the ``backend``
fixture and runs once per registered backend; a test marked ``@pytest.mark.requires("cap")``
is generated only for the backends that have that capability — not applicable is not a skip.
What differs per backend and the tests must not know (how to corrupt a stored document, what
the storage still holds) lives on :class:`Backend`.

PostgreSQL needs a server: ``eval "$(.ci/postgres.sh start)"`` sets ``DEERMEM_TEST_DSN``.
Without it the PostgreSQL cases skip with the reason — unless ``DEERMEM_REQUIRE_POSTGRES=1``
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import SearchItem
from langgraph.store.memory import InMemoryStore

from deermem_middleware.storage import (
    InMemoryStorage,
    JSONFileStorage,
    MemoryScope,
    MemoryStorage,
    StoreStorage,
)
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.store import label
from tests.helpers import postgres_store as open_postgres_store

from ..integration_tests.conftest import postgres_dsn


@dataclass(frozen=True)
class Capabilities:
    """What a backend does beyond the core contract (load, save, delete, list, update)."""

    quarantine: bool
    """A stored document that does not validate is kept aside and the user starts empty."""
    durable_journal: bool
    """``storage.journal()`` keeps entries in the storage itself (a new journal object, or
    another process, sees them; :meth:`purge` sweeps them)."""
    optimistic_update: bool
    """``update`` runs ``mutate`` unlocked and retries when another writer saved first (the
    file backend holds its lock instead: other writers wait, nothing conflicts)."""
    shared_journal: bool = True
    """Other processes see the journal (``journal().shared``): a capture keeps a claim in force
    and the time its thread's oldest pending capture was taken. A journal of this process only
    replaces the entry as it is (nobody else claims anything)."""
    stored_text: bool = False
    """Documents are stored as text the backend decodes itself, so a text that no JSON parser
    accepts (a 5,000-digit number, nesting 3,000 deep) can be found there."""
    derived: bool = True
    """``save(..., derived=...)`` stores derived data atomically with the document and ``load``
    hands it back with its revision (``stores_derived``): every backend here does; a third-party
    backend without it still works, and the engine derives in its process."""


CAPABILITIES: dict[str, Capabilities] = {
    "json": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=False, stored_text=True
    ),
    "memory": Capabilities(
        quarantine=False, durable_journal=False, optimistic_update=True, shared_journal=False
    ),
    "memory-store": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=True, shared_journal=False
    ),
    "sqlite-store": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=True, stored_text=True
    ),
    "loose-prefix-store": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=True, shared_journal=False
    ),
    "postgres-store": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=True, stored_text=True
    ),
    # PostgresStore.from_conn_string: one plain connection, not a pool (LangGraph's own idiom)
    "postgres-connection-store": Capabilities(
        quarantine=True, durable_journal=True, optimistic_update=True, stored_text=True
    ),
}


@dataclass
class Backend:
    """One storage under test, with the backend-specific hooks the generic tests need."""

    name: str
    storage: MemoryStorage
    caps: Capabilities
    held: Callable[[], list[str]]
    """Everything the storage holds, one readable line per file or item (name and content)."""
    corrupt: Callable[[MemoryScope], Any] | None = None
    """Store an unreadable document for a scope; returns the raw thing written."""
    quarantined: Callable[[MemoryScope], list[Any]] | None = None
    """The copies of a scope's documents kept aside, as written by ``corrupt``."""
    corrupt_text: Callable[[MemoryScope, str], None] | None = None
    """Store ``text`` verbatim as a scope's document (backends with ``stored_text``)."""
    corrupt_entry: Callable[[MemoryScope, str], None] | None = None
    """Store an unreadable journal entry for a thread (backends with ``durable_journal``)."""

    def traces(self, *needles: str) -> list[str]:
        """The lines of :attr:`held` that mention any of ``needles``."""
        return [line for line in self.held() if any(n in line for n in needles)]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires(*capabilities): run only on backends with these capabilities"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    needed = [c for mark in metafunc.definition.iter_markers("requires") for c in mark.args]
    known = {f.name for f in fields(Capabilities)}
    assert set(needed) <= known, f"unknown capabilities {set(needed) - known}"
    names = [n for n, caps in CAPABILITIES.items() if all(getattr(caps, c) for c in needed)]
    metafunc.parametrize("backend", names, indirect=True)


# -- the backends ---------------------------------------------------------------------------------


def _file_backend(root: Path) -> Backend:
    storage = JSONFileStorage(root)

    def held() -> list[str]:
        if not root.exists():
            return []
        lines = []
        for path in root.rglob("*"):
            data = path.read_bytes().decode("utf-8", "replace") if path.is_file() else ""
            lines.append(f"{path.relative_to(root)}: {data}")
        return sorted(lines)

    def corrupt(scope: MemoryScope) -> bytes:
        raw = ('{"facts": [{"id": "f", "content": "' + scope.user_id + '"').encode()
        path = storage.path_for(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        return raw

    def quarantined(scope: MemoryScope) -> list[Any]:
        path = storage.path_for(scope)
        return [p.read_bytes() for p in sorted(path.parent.glob(f"{path.name}.corrupted-*"))]

    def corrupt_text(scope: MemoryScope, text: str) -> None:
        path = storage.path_for(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def corrupt_entry(scope: MemoryScope, thread: str) -> None:
        path = FileJournal(storage.pending_root).path_for(scope, thread)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"scope": {"user_id": "', encoding="utf-8")

    return Backend(
        "json",
        storage,
        CAPABILITIES["json"],
        held,
        corrupt,
        quarantined,
        corrupt_text,
        corrupt_entry,
    )


def _memory_backend() -> Backend:
    storage = InMemoryStorage()

    def held() -> list[str]:
        return [
            f"{s.user_id}/{s.agent_name}: {json.dumps(storage.load(s).memory.to_json_dict())}"
            for s in storage.list_scopes()
        ]

    return Backend("memory", storage, CAPABILITIES["memory"], held)


def _store_backend(
    name: str,
    store: Any,
    corrupt_text: Callable[[StoreStorage, MemoryScope, str], None] | None = None,
) -> Backend:
    storage = StoreStorage(store, prefix=f"t{uuid.uuid4().hex[:12]}")  # a namespace per test

    def held() -> list[str]:
        items = store.search((storage.prefix,), limit=100_000)
        return sorted(
            f"{'/'.join(i.namespace)}/{i.key}: {json.dumps(i.value, ensure_ascii=False)}"
            for i in items
        )

    def corrupt(scope: MemoryScope) -> Any:
        value = {"revision": 3, "document": {"facts": scope.user_id}}
        store.put(storage.namespace(scope), "document", value)
        return value

    def quarantined(scope: MemoryScope) -> list[Any]:
        items = store.search(storage.namespace(scope), limit=1000)
        return [i.value["value"] for i in items if i.key.startswith("corrupted-")]

    def raw(scope: MemoryScope, text: str) -> None:
        assert corrupt_text is not None
        corrupt_text(storage, scope, text)

    def corrupt_entry(scope: MemoryScope, thread: str) -> None:
        store.put(storage.namespace(scope, "pending"), label(thread), {"turns": "torn"})

    return Backend(
        name,
        storage,
        CAPABILITIES[name],
        held,
        corrupt,
        quarantined,
        raw if corrupt_text else None,
        corrupt_entry,
    )


def _sqlite_text(conn: sqlite3.Connection) -> Callable[[StoreStorage, MemoryScope, str], None]:
    def write(storage: StoreStorage, scope: MemoryScope, text: str) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO store (prefix, key, value) VALUES (?, 'document', ?)",
            (".".join(storage.namespace(scope)), text),
        )

    return write


def _postgres_text() -> Callable[[StoreStorage, MemoryScope, str], None]:
    def write(storage: StoreStorage, scope: MemoryScope, text: str) -> None:
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(
                "INSERT INTO store (prefix, key, value) VALUES (%s, 'document', %s::jsonb) "
                "ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value",
                (".".join(storage.namespace(scope)), text),
            )

    return write


class LoosePrefixStore(InMemoryStore):
    """An in-memory store whose prefix searches match the way langgraph-checkpoint-sqlite and
    -postgres did before 3.1.1: the namespace joined with dots, compared with an unescaped,
    case-insensitive ``LIKE '<prefix>%'`` (``_`` and ``%`` are wildcards, ``bob`` finds
    ``bobby`` and ``Bob``). A storage that trusts the store's prefix semantics deletes other
    users' keys on it; ours must match namespaces exactly."""

    @staticmethod
    def _like(prefix: tuple[str, ...] | None) -> re.Pattern[str]:
        text = ".".join(prefix or ())
        pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in text)
        return re.compile(pattern, re.IGNORECASE | re.DOTALL)

    def search(  # type: ignore[override]
        self, namespace_prefix: tuple[str, ...], /, *, limit: int = 10, offset: int = 0, **_: Any
    ) -> list[Any]:
        like = self._like(namespace_prefix)
        found = [
            SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
            for namespace, items in list(self._data.items())
            if like.match(".".join(namespace))
            for i in items.values()
        ]
        return found[offset : offset + limit]

    def list_namespaces(  # type: ignore[override]
        self, *, prefix: tuple[str, ...] | None = None, limit: int = 100, offset: int = 0, **_: Any
    ) -> list[tuple[str, ...]]:
        like = self._like(prefix)
        found = sorted(n for n, items in self._data.items() if items and like.match(".".join(n)))
        return found[offset : offset + limit]


@pytest.fixture(scope="session")
def postgres_store() -> Iterator[Any]:
    with open_postgres_store(postgres_dsn()) as store:
        yield store


@pytest.fixture(scope="session")
def postgres_connection_store() -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_dsn()) as store:
        store.setup()
        yield store


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    name = request.param
    if name == "json":
        return _file_backend(tmp_path / "files")
    if name == "memory":
        return _memory_backend()
    if name == "memory-store":
        return _store_backend(name, InMemoryStore())
    if name == "loose-prefix-store":
        return _store_backend(name, LoosePrefixStore())
    if name == "sqlite-store":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(tmp_path / "m.db", check_same_thread=False, isolation_level=None)
        request.addfinalizer(conn.close)
        store = SqliteStore(conn)
        store.setup()
        return _store_backend(name, store, _sqlite_text(conn))
    assert name in ("postgres-store", "postgres-connection-store"), name
    store = request.getfixturevalue(name.replace("-", "_"))
    return _store_backend(name, store, _postgres_text())


@pytest.fixture
def storage(backend: Backend) -> MemoryStorage:
    return backend.storage

"""One conformance suite for every storage backend: JSON files, and LangGraph's InMemoryStore,
SqliteStore and PostgresStore through :class:`StoreStorage`.

PostgreSQL needs a server: ``eval "$(.ci/postgres.sh start)"`` sets ``DEERMEM_TEST_DSN``. Without
it the PostgreSQL cases skip with the reason — unless ``DEERMEM_REQUIRE_POSTGRES=1`` (CI), which
turns the skip into a failure.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import (
    Fact,
    History,
    Memory,
    Section,
    UserContext,
    Watermark,
)
from deermem_middleware.storage import (
    JSONFileStorage,
    MemoryScope,
    RevisionConflict,
    StoreStorage,
)
from deermem_middleware.storage.journal import FileJournal, job_token

from .conftest import postgres_dsn

BACKENDS = ["json", "memory-store", "sqlite-store", "postgres-store"]


@pytest.fixture(scope="module")
def postgres_store() -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[Any] = ConnectionPool(
        postgres_dsn(),
        min_size=1,
        max_size=8,
        open=True,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    store = PostgresStore(pool)
    store.setup()
    store.setup()  # idempotent
    yield store
    pool.close()


def make_storage(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    prefix = f"t{uuid.uuid4().hex[:12]}"  # every test its own namespace in a shared database
    if kind == "json":
        return JSONFileStorage(tmp_path / "files")
    if kind == "memory-store":
        from langgraph.store.memory import InMemoryStore

        return StoreStorage(InMemoryStore(), prefix=prefix)
    if kind == "sqlite-store":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(tmp_path / "m.db", check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn)
        store.setup()
        request.addfinalizer(conn.close)
        return StoreStorage(store, prefix=prefix)
    return StoreStorage(request.getfixturevalue("postgres_store"), prefix=prefix)


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return make_storage(request.param, tmp_path, request)


SCOPE = MemoryScope("alice", "coder")
ODD = MemoryScope("a.b/../c d 用户 🚀", "agent.v2")


def fact(i: int, content: str | None = None) -> Fact:
    return Fact(
        id=f"fact_{i:06d}",
        content=content or f"fact number {i}",
        category="knowledge",
        confidence=0.9,
        createdAt="2026-01-01T00:00:00Z",
        source=f"thread-{i % 3}",
    )


def rich_memory() -> Memory:
    section = Section(summary="Data engineer at Acme; 喜欢喝茶; עברית; 🚀", updatedAt="2026-02-01")
    return Memory(
        user=UserContext(workContext=section, personalContext=section),
        history=History(longTermBackground=section),
        facts=(fact(1, "用户喜欢喝茶"), fact(2, "User's RTL name: ‏שלום‏"), fact(3, "emoji 👩‍💻")),
        watermarks={"thread-1": Watermark(turn="fp-9", count=4, updatedAt="2026-02-01")},
    )


def test_round_trip_keeps_everything(storage: Any) -> None:
    assert storage.load(SCOPE).revision == 0
    assert storage.load(SCOPE).memory == Memory()
    memory = rich_memory()
    assert storage.save(SCOPE, memory, 0) == 1
    loaded = storage.load(SCOPE)
    assert loaded.revision == 1
    assert loaded.memory.to_json_dict() == memory.to_json_dict()


def test_revisions_and_conflicts(storage: Any) -> None:
    assert storage.save(SCOPE, Memory(facts=(fact(1),)), 0) == 1
    assert storage.save(SCOPE, Memory(facts=(fact(2),)), 1) == 2
    for stale in (0, 1, 3):
        with pytest.raises(RevisionConflict) as info:
            storage.save(SCOPE, Memory(facts=(fact(9),)), stale)
        assert info.value.actual == 2
    assert [f.id for f in storage.load(SCOPE).memory.facts] == ["fact_000002"]


def test_concurrent_writers_lose_nothing(storage: Any) -> None:
    """8 threads × 15 read-modify-write updates with retry on conflict → 120 facts."""
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for n in range(15):
                while True:
                    stored = storage.load(SCOPE)
                    new = fact(worker * 1000 + n)
                    memory = stored.memory.model_copy(update={"facts": (*stored.memory.facts, new)})
                    try:
                        storage.save(SCOPE, memory, stored.revision)
                        break
                    except RevisionConflict:
                        continue
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    final = storage.load(SCOPE)
    assert len({f.id for f in final.memory.facts}) == 120
    assert final.revision == 120


def test_delete(storage: Any) -> None:
    assert storage.delete(SCOPE) is False
    storage.save(SCOPE, Memory(facts=(fact(1),)), 0)
    assert storage.delete(SCOPE) is True
    assert storage.delete(SCOPE) is False
    assert storage.load(SCOPE).revision == 0
    assert storage.save(SCOPE, Memory(facts=(fact(2),)), 0) == 1  # a fresh start


def test_isolation_and_listing(storage: Any) -> None:
    scopes = [SCOPE, ODD, MemoryScope("alice", "other"), MemoryScope("alice.coder", "x")]
    for i, scope in enumerate(scopes):
        storage.save(scope, Memory(facts=(fact(i, f"only for {scope}"),)), 0)
    for scope in scopes:
        facts = storage.load(scope).memory.facts
        assert [f.content for f in facts] == [f"only for {scope}"]
    assert sorted(storage.list_scopes()) == sorted(scopes)
    storage.delete(ODD)
    assert ODD not in storage.list_scopes()
    assert storage.load(SCOPE).revision == 1


def test_large_document(storage: Any) -> None:
    memory = Memory(facts=tuple(fact(i, f"{i} " + "x" * 180 + " 长") for i in range(5000)))
    storage.save(SCOPE, memory, 0)
    loaded = storage.load(SCOPE).memory
    assert len(loaded.facts) == 5000
    assert loaded.facts[-1].content == memory.facts[-1].content


def test_journal_conformance(storage: Any, tmp_path: Path) -> None:
    journal = (
        storage.journal() if isinstance(storage, StoreStorage) else FileJournal(tmp_path / "p")
    )
    older = (Turn("user", "hi", "fp1"), Turn("assistant", "hello", "fp2"))
    newer = (*older, Turn("user", "more", "fp3"), Turn("assistant", "ok", "fp4"))
    journal.put(ODD, "thread.1/x", older)
    journal.put(ODD, "thread.1/x", newer)  # replaces
    journal.put(SCOPE, "t2", older)
    entries = {(e.scope, e.thread_id): e for e in journal.entries()}
    assert set(entries) == {(ODD, "thread.1/x"), (SCOPE, "t2")}
    assert entries[(ODD, "thread.1/x")].turns == newer
    journal.done(ODD, "thread.1/x", job_token(older))  # stale: the newer capture stays
    assert len(journal.entries()) == 2
    journal.done(ODD, "thread.1/x", job_token(newer))
    assert [(e.scope, e.thread_id) for e in journal.entries()] == [(SCOPE, "t2")]
    assert journal.forget(SCOPE) >= 1
    assert journal.entries() == []


@pytest.mark.parametrize("kind", ["memory-store", "sqlite-store", "postgres-store"])
def test_corrupted_store_document_is_kept_aside(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    storage = make_storage(kind, tmp_path, request)
    namespace = storage.namespace(SCOPE)
    storage.store.put(namespace, "document", {"revision": 3, "document": {"facts": "nope"}})
    loaded = storage.load(SCOPE)
    assert loaded.revision == 0 and loaded.memory == Memory()
    aside = [i for i in storage.store.search(namespace) if i.key.startswith("corrupted-")]
    assert len(aside) == 1 and aside[0].value["value"]["document"] == {"facts": "nope"}
    assert storage.save(SCOPE, Memory(facts=(fact(1),)), 0) == 1


def test_unknown_stores_need_an_explicit_weak_mode() -> None:
    from langgraph.store.base import BaseStore

    class PlainStore(BaseStore):
        def batch(self, ops: Any) -> list[Any]:
            raise NotImplementedError

        async def abatch(self, ops: Any) -> list[Any]:
            raise NotImplementedError

    with pytest.raises(ValueError, match="last_writer_wins"):
        StoreStorage(PlainStore())
    weak = StoreStorage(PlainStore(), consistency="last_writer_wins")
    assert weak.consistency == "last_writer_wins"

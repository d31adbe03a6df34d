"""Memory on LangGraph stores: config, factory and the middleware end to end (offline backends;
PostgreSQL is covered by the conformance suite in tests/storage_spec)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.config import ConfigError, StorageConfig
from deermem_middleware.storage import JSONFileStorage, StoreStorage
from deermem_middleware.storage.factory import open_storage
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.store import label, unlabel
from deermem_middleware.storage.store_journal import StoreJournal
from deermem_middleware.testing import ScriptedChatModel, update_json

GO = update_json(facts=[("User writes Go at a payments company", "knowledge", 0.9)])


def _config(tmp_path: Path, **storage: Any) -> MemoryConfig:
    return MemoryConfig(
        storage_path=str(tmp_path / "files"),
        storage=StorageConfig(**storage) if storage else StorageConfig(),
        debounce_seconds=0,
        flush_on_exit_seconds=None,
        embeddings="none",
    )


@pytest.mark.parametrize("name", ["alice", "a.b", "..", "用户.x", "a/b", "%2E", "x" * 150])
def test_labels_round_trip_without_dots(name: str) -> None:
    encoded = label(name)
    assert "." not in encoded and encoded
    assert unlabel(encoded) == name


@pytest.mark.parametrize("name", ["x" * 151, "u" * 10_000, "用户" * 3000, "a." * 5000])
def test_long_labels_are_a_prefix_and_a_hash(name: str) -> None:
    encoded = label(name)
    assert "." not in encoded and len(encoded) <= 150
    assert unlabel(encoded) is None  # the id is read from the stored value
    assert label(name + "!") != encoded and label(name) == encoded


def test_factory_backends(tmp_path: Path) -> None:
    assert isinstance(open_storage(_config(tmp_path)), JSONFileStorage)
    memory = open_storage(_config(tmp_path, backend="memory"))
    assert isinstance(memory, StoreStorage) and type(memory.store).__name__ == "InMemoryStore"
    sqlite = open_storage(_config(tmp_path, backend="sqlite", path=str(tmp_path / "m.db")))
    assert isinstance(sqlite, StoreStorage) and (tmp_path / "m.db").exists()
    sqlite.close()


def test_storage_config_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("memory:\n  storage:\n    backend: postgres\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.yaml:\d+.*storage.*dsn"):
        MemoryConfig.from_yaml(path)
    path.write_text("memory:\n  storage: {backend: mongo}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.yaml:2.*storage"):
        MemoryConfig.from_yaml(path)
    path.write_text("memory:\n  storage: {backend: sqlite, path: data/m.db}\n", encoding="utf-8")
    config = MemoryConfig.from_yaml(path)
    assert config.storage.path == str(tmp_path / "data" / "m.db")  # relative to the YAML file
    path.write_text("memory:\n  storage: {backend: postgres, dsn: $NO_SUCH_DSN_VAR}\n")
    with pytest.raises(ConfigError, match=r"NO_SUCH_DSN_VAR"):
        MemoryConfig.from_yaml(path)


def _converse(mw: MemoryMiddleware, thread: str) -> None:
    messages = [HumanMessage("I write Go at a payments company."), AIMessage("Noted.")]
    assert mw.capture(messages, user_id="alice", thread_id=thread)
    assert mw.flush(timeout=10)


@pytest.mark.parametrize("kind", ["memory-store", "sqlite-store", "config-memory"])
def test_middleware_on_a_store(kind: str, tmp_path: Path) -> None:
    if kind == "memory-store":
        store: Any = InMemoryStore()
        mw = MemoryMiddleware(
            _config(tmp_path), model=ScriptedChatModel(answers=[GO]), storage=store
        )
    elif kind == "sqlite-store":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(tmp_path / "m.db", check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn)
        mw = MemoryMiddleware(
            _config(tmp_path), model=ScriptedChatModel(answers=[GO]), storage=store
        )
        mw.setup()
        mw.setup()  # idempotent
    else:
        mw = MemoryMiddleware(
            _config(tmp_path, backend="memory"), model=ScriptedChatModel(answers=[GO])
        )
    assert isinstance(mw.service._storage.innermost, StoreStorage)
    assert isinstance(mw.service._journal, StoreJournal)
    _converse(mw, "t1")
    assert [f.content for f in mw.get_memory("alice").facts] == [
        "User writes Go at a payments company"
    ]
    assert mw.service.pending_entries() == []
    block = mw.render_memory([HumanMessage("Which language do I use?")], user_id="alice")
    assert "writes Go" in block
    _converse(mw, "t1")  # the same turns again: the watermark in the store skips them
    assert len(mw.get_memory("alice").facts) == 1
    assert not (tmp_path / "files").exists()  # nothing went to the file backend
    mw.close()


def test_file_backend_keeps_its_file_journal(tmp_path: Path) -> None:
    mw = MemoryMiddleware(_config(tmp_path), model=ScriptedChatModel(answers=[GO]))
    assert isinstance(mw.service._journal, FileJournal)
    mw.close()

"""JSON-file storage specifics: paths, quarantine variants, the read cache, two instances on one
folder. The contract every backend shares is checked by the conformance suite in
``tests/storage_spec``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import (
    CorruptedMemoryError,
    InMemoryStorage,
    JSONFileStorage,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
)
from tests.storage_spec.samples import ODD_IDS, add_fact_with_retry, fact, in_threads, memory

SCOPE = MemoryScope("alice", "researcher")


def _hammer(storages: list[MemoryStorage], threads: int = 8, cycles: int = 25) -> None:
    """Each thread alternates between ``storages`` while appending its facts."""

    def worker(t: int) -> None:
        for c in range(cycles):
            store = storages[(t + c) % len(storages)]
            add_fact_with_retry(store, SCOPE, fact(t * 1000 + c, f"thread {t} cycle {c}"))

    in_threads(worker, threads)


# -- JSON-file specifics -----------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> JSONFileStorage:
    return JSONFileStorage(tmp_path / "store")


def test_odd_ids_stay_inside_the_root(files: JSONFileStorage, tmp_path: Path) -> None:
    root = files.root.resolve()
    for odd in ODD_IDS:
        for scope in (MemoryScope(odd, "agent"), MemoryScope("alice", odd)):
            path = files.path_for(scope).resolve()
            assert path.is_relative_to(root), (scope, path)
            assert path.parent.parent == root / "users"
            files.save(scope, memory("x"), 0)
    escaped = [p for p in tmp_path.rglob("*") if not p.resolve().is_relative_to(root)]
    assert escaped == []


def test_distinct_ids_never_share_a_file(files: JSONFileStorage) -> None:
    scopes = {MemoryScope(u, a) for u in ODD_IDS for a in ("agent", "x.json", "..")}
    paths = {files.path_for(s) for s in scopes}
    assert len(paths) == len(scopes)


CORRUPTIONS = {
    "invalid-json": b'{"version": "1.0", "facts": [',
    "json-array": b'[{"id": "fact_1"}]',
    "string-revision": b'{"revision": "seven", "version": "1.0"}',
    "negative-revision": b'{"revision": -1}',
    "bool-revision": b'{"revision": true}',
    "not-utf8": b'{"version": "\xff\xfe"}',
}


@pytest.mark.parametrize("raw", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupted_file_is_quarantined_not_overwritten(
    files: JSONFileStorage, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = files.path_for(SCOPE)
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    with caplog.at_level(logging.ERROR):
        stored = files.load(SCOPE)
    assert stored.revision == 0 and stored.memory == Memory()
    asides = list(path.parent.glob(f"{path.name}.corrupted-*"))
    assert len(asides) == 1 and asides[0].read_bytes() == raw  # kept, byte for byte
    assert not path.exists()
    message = next(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert str(asides[0]) in message and "empty memory" in message
    assert files.save(SCOPE, memory("fresh start"), 0) == 1
    assert files.load(SCOPE).memory.facts[0].content == "fresh start"
    assert files.list_scopes() == [SCOPE]  # the quarantined copy is not a document


@pytest.mark.parametrize("raw", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupted_file_raises_and_is_never_overwritten(tmp_path: Path, raw: bytes) -> None:
    files = JSONFileStorage(tmp_path / "store", on_corruption="raise")
    path = files.path_for(SCOPE)
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    with pytest.raises(CorruptedMemoryError) as info:
        files.load(SCOPE)
    assert str(path) in str(info.value)
    for expected in (0, 1, 3):
        with pytest.raises(CorruptedMemoryError):
            files.save(SCOPE, memory("would overwrite"), expected)
    assert path.read_bytes() == raw


def test_no_temp_files_left_after_saves(files: JSONFileStorage) -> None:
    for revision in range(20):
        files.save(SCOPE, memory(f"v{revision}"), revision)
    with pytest.raises(RevisionConflict):
        files.save(SCOPE, memory("stale"), 0)
    leftovers = [p.name for p in files.root.rglob("*") if p.is_file() and p.suffix == ".tmp"]
    assert leftovers == []
    documents = list(files.root.rglob("*.json"))
    assert documents == [files.path_for(SCOPE)]


def test_saved_file_is_plain_json_with_revision(files: JSONFileStorage) -> None:
    files.save(SCOPE, memory("用户喜欢喝茶"), 0)
    data = json.loads(files.path_for(SCOPE).read_text(encoding="utf-8"))
    assert data["revision"] == 1
    assert data["facts"][0]["content"] == "用户喜欢喝茶"
    assert "用户喜欢喝茶" in files.path_for(SCOPE).read_text(encoding="utf-8")  # not \u-escaped


def test_deerflow_file_without_revision_loads_at_zero(files: JSONFileStorage) -> None:
    deerflow = {
        "version": "1.0",
        "lastUpdated": "2026-03-01T00:00:00Z",
        "user": {"workContext": {"summary": "Engineer", "updatedAt": "2026-03-01T00:00:00Z"}},
        "history": {},
        "facts": [
            {
                "id": "fact_1a2b3c4d",
                "content": "Likes tea",
                "category": "preference",
                "confidence": 0.9,
                "createdAt": "2026-03-01T00:00:00Z",
                "source": "thread_1",
            }
        ],
        "someFutureKey": [1, 2],
    }
    path = files.path_for(SCOPE)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(deerflow), encoding="utf-8")
    stored = files.load(SCOPE)
    assert stored.revision == 0
    assert stored.memory.facts[0].id == "fact_1a2b3c4d"
    assert files.save(SCOPE, stored.memory, 0) == 1
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["someFutureKey"] == [1, 2]
    assert data["facts"][0]["source"] == "thread_1"


def test_read_cache_returns_same_object_until_file_changes(files: JSONFileStorage) -> None:
    files.save(SCOPE, memory("v1"), 0)
    first = files.load(SCOPE)
    assert files.load(SCOPE) is first
    assert files.load(SCOPE).memory is first.memory

    path = files.path_for(SCOPE)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["revision"] = 7
    data["facts"][0]["content"] = "rewritten by someone else, and longer"
    path.write_text(json.dumps(data), encoding="utf-8")  # in place: same inode
    after = files.load(SCOPE)
    assert after.revision == 7
    assert after.memory.facts[0].content == "rewritten by someone else, and longer"


def test_cache_notices_external_atomic_replace(files: JSONFileStorage, tmp_path: Path) -> None:
    files.save(SCOPE, memory("v1"), 0)
    files.load(SCOPE)
    other = JSONFileStorage(tmp_path / "store")
    other.save(SCOPE, memory("v2"), 1)
    stored = files.load(SCOPE)
    assert stored.revision == 2
    assert [f.content for f in stored.memory.facts] == ["v2"]


def test_two_instances_share_revisions_and_conflict(tmp_path: Path) -> None:
    a = JSONFileStorage(tmp_path / "store")
    b = JSONFileStorage(tmp_path / "store")
    assert a.save(SCOPE, memory("from a"), 0) == 1
    seen = b.load(SCOPE)
    assert seen.revision == 1
    assert [f.content for f in seen.memory.facts] == ["from a"]
    assert b.save(SCOPE, memory("from a", "from b"), 1) == 2
    with pytest.raises(RevisionConflict):
        a.save(SCOPE, memory("lost update"), 1)
    assert [f.content for f in a.load(SCOPE).memory.facts] == ["from a", "from b"]
    assert b.list_scopes() == a.list_scopes() == [SCOPE]
    assert b.delete(SCOPE)
    assert a.load(SCOPE).revision == 0


def test_concurrency_across_two_instances_on_one_folder(tmp_path: Path) -> None:
    """Threads alternating between two storages (separate in-process locks, shared flock)."""
    a, b = JSONFileStorage(tmp_path / "store"), JSONFileStorage(tmp_path / "store")
    _hammer([a, b])
    stored = JSONFileStorage(tmp_path / "store").load(SCOPE)
    assert len(stored.memory.facts) == 200
    assert stored.revision == 200


def test_delete_missing_and_describe(files: JSONFileStorage) -> None:
    assert files.delete(SCOPE) is False
    assert files.describe(SCOPE) == str(files.path_for(SCOPE))
    assert InMemoryStorage().describe(SCOPE)

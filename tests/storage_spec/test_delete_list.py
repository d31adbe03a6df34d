"""Delete, isolation and listing: odd, long, dotted and slashed ids, a large document."""

from __future__ import annotations

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import MemoryScope, MemoryStorage

from .samples import ODD, ODD_IDS, OTHER, SCOPE, contents, fact, memory


def test_delete(storage: MemoryStorage) -> None:
    assert storage.delete(SCOPE) is False
    storage.save(SCOPE, memory("x"), 0)
    storage.save(OTHER, memory("y"), 0)
    assert storage.delete(SCOPE) is True
    assert storage.delete(SCOPE) is False
    assert storage.load(SCOPE).revision == 0
    assert storage.list_scopes() == [OTHER]
    assert contents(storage.load(OTHER).memory) == ["y"]
    assert storage.save(SCOPE, memory("again"), 0) == 1  # a fresh start


def test_scopes_are_isolated(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("alice fact"), 0)
    assert storage.load(OTHER).revision == 0
    assert storage.load(MemoryScope(SCOPE.user_id, "writer")).revision == 0
    storage.save(OTHER, memory("bob fact"), 0)
    assert contents(storage.load(SCOPE).memory) == ["alice fact"]
    assert contents(storage.load(OTHER).memory) == ["bob fact"]


def test_isolation_and_listing(storage: MemoryStorage) -> None:
    scopes = [SCOPE, ODD, MemoryScope("alice", "other"), MemoryScope("alice.coder", "x")]
    for i, scope in enumerate(scopes):
        storage.save(scope, Memory(facts=(fact(i, f"only for {scope}"),)), 0)
    for scope in scopes:
        assert contents(storage.load(scope).memory) == [f"only for {scope}"]
    assert sorted(storage.list_scopes()) == sorted(scopes)
    storage.delete(ODD)
    assert ODD not in storage.list_scopes()
    assert storage.load(SCOPE).revision == 1


def test_list_scopes(storage: MemoryStorage) -> None:
    scopes = [SCOPE, OTHER, MemoryScope("alice", "writer"), MemoryScope()]
    for scope in scopes:
        storage.save(scope, memory("x"), 0)
    assert sorted(storage.list_scopes()) == sorted(scopes)


def test_odd_ids_round_trip(storage: MemoryStorage) -> None:
    """Any user id or agent name is a valid scope: stored apart and listed back verbatim."""
    scopes = [MemoryScope(user, "agent") for user in ODD_IDS]
    scopes += [MemoryScope("alice", agent) for agent in ODD_IDS]
    for index, scope in enumerate(scopes):
        storage.save(scope, memory(f"memory {index}"), 0)
    assert sorted(storage.list_scopes()) == sorted(set(scopes))
    for index, scope in enumerate(scopes):
        assert contents(storage.load(scope).memory) == [f"memory {index}"]


LONG_IDS = [
    "用户" * 20,  # 40 CJK characters: 360 bytes once percent-encoded
    "https://accounts.example.com/oauth2/" + "x" * 240,
    "u" * 300,
    "u" * 10_000,  # PostgreSQL's index rows hold a few kB: the label must be hashed
    "用户" * 2000,
]


@pytest.mark.parametrize(
    "long_id", LONG_IDS, ids=["cjk-40", "url-276", "ascii-300", "ascii-10k", "cjk-4k"]
)
def test_long_ids_round_trip(storage: MemoryStorage, long_id: str) -> None:
    """Any id is a valid scope, however long (file names are limited to 255 bytes)."""
    scopes = [MemoryScope(long_id, "agent"), MemoryScope("alice", long_id)]
    for scope in scopes:
        assert storage.load(scope).revision == 0
        assert storage.save(scope, memory(long_id[:10]), 0) == 1
        assert contents(storage.load(scope).memory) == [long_id[:10]]
    assert sorted(storage.list_scopes()) == sorted(scopes)
    assert storage.delete(scopes[0]) is True
    assert storage.list_scopes() == [scopes[1]]


def test_large_document(storage: MemoryStorage) -> None:
    document = Memory(facts=tuple(fact(i, f"{i} " + "x" * 180 + " 长") for i in range(5000)))
    storage.save(SCOPE, document, 0)
    loaded = storage.load(SCOPE).memory
    assert len(loaded.facts) == 5000
    assert loaded.facts[-1].content == document.facts[-1].content
    assert loaded.to_json_dict() == document.to_json_dict()

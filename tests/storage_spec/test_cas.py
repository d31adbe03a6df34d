"""Compare-and-set: round trips, revisions and conflicts, concurrent writers, ``update``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import MemoryScope, MemoryStorage, RevisionConflict, StoreStorage

from .samples import (
    SCOPE,
    add_fact_with_retry,
    contents,
    fact,
    in_threads,
    memory,
    rich_memory,
)


def test_backends_satisfy_the_protocol(storage: MemoryStorage) -> None:
    assert isinstance(storage, MemoryStorage)


def test_empty_load_is_revision_zero(storage: MemoryStorage) -> None:
    stored = storage.load(SCOPE)
    assert stored.revision == 0
    assert stored.memory == Memory()
    assert storage.list_scopes() == []


def test_round_trip_keeps_everything(storage: MemoryStorage) -> None:
    document = rich_memory()
    assert storage.save(SCOPE, document, 0) == 1
    loaded = storage.load(SCOPE)
    assert loaded.revision == 1
    assert loaded.memory.to_json_dict() == document.to_json_dict()


def test_unicode_content_round_trips(storage: MemoryStorage) -> None:
    document = memory("用户喜欢喝茶", "emoji 🦌🍵", 'quotes "\\ and \n newlines')
    storage.save(SCOPE, document, 0)
    assert storage.load(SCOPE).memory.to_json_dict() == document.to_json_dict()


def test_save_returns_next_revision_and_load_sees_it(storage: MemoryStorage) -> None:
    assert storage.save(SCOPE, memory("likes tea"), 0) == 1
    assert storage.save(SCOPE, memory("likes tea", "owns a cat"), 1) == 2
    stored = storage.load(SCOPE)
    assert stored.revision == 2
    assert contents(stored.memory) == ["likes tea", "owns a cat"]


def test_stale_revision_conflicts_and_writes_nothing(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("v1"), 0)
    storage.save(SCOPE, memory("v2"), 1)
    for stale in (0, 1, 3, 99):
        with pytest.raises(RevisionConflict) as info:
            storage.save(SCOPE, memory(f"stale {stale}"), stale)
        assert info.value.scope == SCOPE
        assert info.value.expected == stale
        assert info.value.actual == 2
    stored = storage.load(SCOPE)
    assert stored.revision == 2
    assert contents(stored.memory) == ["v2"]


def test_concurrent_writers_lose_nothing(storage: MemoryStorage) -> None:
    """8 threads x 25 load/apply/save cycles, retrying on conflict: all 200 facts survive."""

    def writer(worker: int) -> None:
        for n in range(25):
            add_fact_with_retry(
                storage, SCOPE, fact(worker * 1000 + n, f"thread {worker} cycle {n}")
            )

    in_threads(writer)
    final = storage.load(SCOPE)
    assert len(final.memory.facts) == 200
    assert len({f.id for f in final.memory.facts}) == 200
    assert final.revision == 200


def _append(i: int) -> Callable[[Memory], Memory]:
    return lambda current: current.model_copy(update={"facts": (*current.facts, fact(i))})


def test_update_applies_and_returns_the_new_revision(storage: MemoryStorage) -> None:
    assert storage.update(SCOPE, _append(1)) == 1
    assert storage.update(SCOPE, _append(2)) == 2
    stored = storage.load(SCOPE)
    assert stored.revision == 2
    assert [f.id for f in stored.memory.facts] == ["fact_000001", "fact_000002"]


def test_update_sees_the_stored_document(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("stored first"), 0)
    seen: list[Memory] = []

    def mutate(current: Memory) -> Memory:
        seen.append(current)
        return memory(*contents(current), "added")

    assert storage.update(SCOPE, mutate) == 2
    assert contents(seen[-1]) == ["stored first"]
    assert contents(storage.load(SCOPE).memory) == ["stored first", "added"]


@pytest.mark.parametrize("answer", ["none", "same"])
def test_update_with_nothing_to_write_writes_nothing(storage: MemoryStorage, answer: str) -> None:
    """``mutate`` returning None, or the document itself, leaves revision and document alone."""
    storage.save(SCOPE, memory("kept"), 0)
    before = storage.load(SCOPE)
    calls: list[Memory] = []

    def mutate(current: Memory) -> Memory | None:
        calls.append(current)
        return None if answer == "none" else current

    assert storage.update(SCOPE, mutate) == 1
    assert len(calls) == 1
    after = storage.load(SCOPE)
    assert after.revision == before.revision == 1
    assert after.memory.to_json_dict() == before.memory.to_json_dict()
    nobody = MemoryScope("nobody", "x")
    assert storage.update(nobody, lambda current: None) == 0
    assert nobody not in storage.list_scopes()  # nothing created either


def test_update_raising_writes_nothing(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("kept"), 0)

    def mutate(current: Memory) -> Memory:
        raise LookupError("no such fact")

    with pytest.raises(LookupError, match="no such fact"):
        storage.update(SCOPE, mutate)
    stored = storage.load(SCOPE)
    assert stored.revision == 1
    assert contents(stored.memory) == ["kept"]
    assert storage.update(SCOPE, _append(7)) == 2  # nothing left locked or half-written


@pytest.mark.requires("optimistic_update")
def test_update_reloads_and_reapplies_after_a_lost_race(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("first"), 0)
    seen: list[list[str]] = []

    def mutate(current: Memory) -> Memory:
        seen.append(contents(current))
        if len(seen) == 1:  # another writer saves between our load and our save
            storage.save(SCOPE, memory("first", "raced"), 1)
        return memory(*contents(current), "mine")

    assert storage.update(SCOPE, mutate) == 3
    assert seen == [["first"], ["first", "raced"]]
    assert contents(storage.load(SCOPE).memory) == ["first", "raced", "mine"]


@pytest.mark.requires("optimistic_update")
def test_update_gives_up_after_max_conflicts(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("v1"), 0)
    calls: list[int] = []

    def always_raced(current: Memory) -> Memory:
        calls.append(1)
        stored = storage.load(SCOPE)
        storage.save(SCOPE, memory(f"raced {len(calls)}"), stored.revision)
        return memory("never stored")

    with pytest.raises(RevisionConflict):
        storage.update(SCOPE, always_raced, max_conflicts=2)
    assert len(calls) == 3
    assert contents(storage.load(SCOPE).memory) == ["raced 3"]


def test_concurrent_updates_lose_nothing(storage: MemoryStorage) -> None:
    """8 threads x 10 ``update`` calls on one document: the CAS loop keeps all 80 facts."""

    def worker(w: int) -> None:
        for n in range(10):
            storage.update(SCOPE, _append(w * 100 + n))

    in_threads(worker)
    final = storage.load(SCOPE)
    assert len({f.id for f in final.memory.facts}) == 80
    assert final.revision == 80


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

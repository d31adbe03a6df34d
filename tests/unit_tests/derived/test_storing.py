"""Every write derives: ``DerivingStorage`` stores each document with its snapshot."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from deermem_middleware.derived.derive import Deriver
from deermem_middleware.derived.snapshot import DerivedSnapshot, decode_snapshot, text_digests
from deermem_middleware.derived.storing import DerivingStorage
from deermem_middleware.derived.view import DerivedView
from deermem_middleware.memory.document import Memory
from deermem_middleware.screen import TextAssessment
from deermem_middleware.storage.base import (
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StoredMemory,
)
from deermem_middleware.storage.memory import InMemoryStorage
from tests.helpers import make_fact

from .fakes import CountingEmbed, CountingScreen

SCOPE = MemoryScope("alice", "assistant")
TEXTS = [
    "User has a dog named Biscuit",
    "User works as a data engineer at Acme Corp",
    "User is training for a marathon in October",
    "User prefers dark mode in the code editor",
    "User lives in Lyon",
]


def memory_of(*texts: str) -> Memory:
    return Memory(facts=tuple(make_fact(f"f{i}", t) for i, t in enumerate(texts)))


def snapshot_of(stored: StoredMemory) -> DerivedSnapshot:
    assert stored.derived is not None, "no snapshot stored"
    return decode_snapshot(stored.derived)


def missing(storage: DerivingStorage, stored: StoredMemory) -> int:
    view = DerivedView.of(
        stored.memory, snapshot_of(stored), storage.deriver.made_by, exact=stored.derived_exact
    )
    return view.missing


@pytest.fixture
def screen() -> CountingScreen:
    return CountingScreen()


@pytest.fixture
def embed() -> CountingEmbed:
    return CountingEmbed()


@pytest.fixture
def deriver(screen: CountingScreen, embed: CountingEmbed) -> Deriver:
    return Deriver(screen=screen, embed=embed, embedding="fake-16")


def test_update_stores_an_exact_complete_snapshot(deriver: Deriver) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    assert storage.stores_derived
    assert storage.update(SCOPE, lambda m: memory_of(*TEXTS[:3])) == 1
    stored = storage.load(SCOPE)
    assert stored.derived_exact and stored.derived_revision == 1
    snapshot = snapshot_of(stored)
    np.testing.assert_array_equal(snapshot.digest, text_digests(TEXTS[:3]))
    assert snapshot.made_by == deriver.made_by
    assert snapshot.vector_rows.all() and missing(storage, stored) == 0


def test_save_stores_the_snapshot_too(deriver: Deriver) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    assert storage.save(SCOPE, memory_of(*TEXTS[:2]), 0) == 1
    stored = storage.load(SCOPE)
    assert stored.derived_exact and missing(storage, stored) == 0
    with pytest.raises(RevisionConflict):
        storage.save(SCOPE, memory_of(*TEXTS), 0)
    assert storage.load(SCOPE).derived == stored.derived


def test_a_later_update_derives_only_the_new_fact(
    deriver: Deriver, screen: CountingScreen, embed: CountingEmbed
) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    storage.update(SCOPE, lambda m: memory_of(*TEXTS[:3]))
    screen.seen.clear()
    embed.calls.clear()
    assert storage.update(SCOPE, lambda m: memory_of(*TEXTS[:4])) == 2
    assert screen.seen == [TEXTS[3]] and embed.calls == [[TEXTS[3]]]
    assert missing(storage, storage.load(SCOPE)) == 0


@pytest.mark.parametrize("unchanged", [lambda m: m, lambda m: None], ids=["same", "none"])
def test_an_update_that_changes_nothing_writes_nothing(
    deriver: Deriver, screen: CountingScreen, unchanged: object
) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    storage.update(SCOPE, lambda m: memory_of(*TEXTS[:3]))
    before = storage.load(SCOPE)
    screen.seen.clear()
    assert storage.update(SCOPE, unchanged) == 1  # type: ignore[arg-type]
    after = storage.load(SCOPE)
    assert storage.revision(SCOPE) == 1
    assert after is before or (after.memory, after.derived) == (before.memory, before.derived)
    assert screen.seen == []


def test_a_write_over_the_budget_is_completed_by_store_snapshot(
    deriver: Deriver, screen: CountingScreen, embed: CountingEmbed
) -> None:
    told: list[MemoryScope] = []
    at_revision: list[int] = []

    def incomplete(scope: MemoryScope) -> None:
        told.append(scope)
        at_revision.append(storage.revision(scope))

    storage = DerivingStorage(InMemoryStorage(), deriver, budget=2, incomplete=incomplete)
    memory = memory_of(*TEXTS)
    assert storage.update(SCOPE, lambda m: memory) == 1
    assert told == [SCOPE]
    assert at_revision == [1], "the background is told once the write is done"
    stored = storage.load(SCOPE)
    assert stored.derived_exact and missing(storage, stored) == 3
    assert embed.seen == TEXTS[3:]  # the newest first

    # the background's work, off the lock: everything, reusing the stored rows
    screen.seen.clear()
    embed.calls.clear()
    derivation = storage.derivation(stored.memory, [snapshot_of(stored)], budget=None)
    assert derivation.complete
    assert sorted(screen.seen) == sorted(TEXTS[:3]) and embed.seen == TEXTS[:3]
    screen.seen.clear()
    embed.calls.clear()
    assert storage.store_snapshot(SCOPE, derivation.snapshot) == 2
    assert screen.seen == [] and embed.calls == []  # nothing derived again under the lock
    assert told == [SCOPE]
    done = storage.load(SCOPE)
    assert done.memory == memory
    assert done.derived_exact and done.derived_revision == 2
    assert missing(storage, done) == 0
    # and once complete, another background step has nothing to write
    assert storage.store_snapshot(SCOPE, derivation.snapshot) == 2


def test_a_deriver_that_fails_does_not_cost_the_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(text: str) -> TextAssessment:
        raise RuntimeError("screen bug")

    told: list[MemoryScope] = []
    storage = DerivingStorage(InMemoryStorage(), Deriver(screen=broken), incomplete=told.append)
    with caplog.at_level(logging.ERROR, logger="deermem_middleware.derived.storing"):
        assert storage.update(SCOPE, lambda m: memory_of(*TEXTS[:2])) == 1
    stored = storage.load(SCOPE)
    assert [f.content for f in stored.memory.facts] == TEXTS[:2]
    assert stored.derived is None
    assert told == [SCOPE]
    assert any(r.exc_info and "screen bug" in str(r.exc_info[1]) for r in caplog.records)
    assert storage.save(SCOPE, memory_of(*TEXTS[:3]), 1) == 2  # save alike
    assert storage.load(SCOPE).derived is None and told == [SCOPE, SCOPE]


def test_a_write_reuses_a_snapshot_left_stale_by_a_writer_that_does_not_derive(
    deriver: Deriver, screen: CountingScreen, embed: CountingEmbed
) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    storage.update(SCOPE, lambda m: memory_of(*TEXTS[:3]))
    storage.inner.save(SCOPE, memory_of(*TEXTS[:4]), 1)  # an older release: no snapshot
    stale = storage.load(SCOPE)
    assert stale.derived is not None and not stale.derived_exact
    assert missing(storage, stale) == 1
    screen.seen.clear()
    embed.calls.clear()
    assert storage.update(SCOPE, lambda m: memory_of(*TEXTS)) == 3
    assert sorted(screen.seen) == sorted(TEXTS[3:]) and embed.seen == TEXTS[3:]
    done = storage.load(SCOPE)
    assert done.derived_exact and missing(storage, done) == 0


def test_an_unchanged_document_with_a_stale_or_unreadable_snapshot_gets_a_new_one(
    deriver: Deriver,
) -> None:
    storage = DerivingStorage(InMemoryStorage(), deriver)
    storage.update(SCOPE, lambda m: memory_of(*TEXTS[:3]))
    storage.inner.save(SCOPE, storage.load(SCOPE).memory, 1)  # the snapshot is now stale
    assert storage.update(SCOPE, lambda m: m) == 3
    assert storage.load(SCOPE).derived_exact
    storage.inner.save(SCOPE, storage.load(SCOPE).memory, 3, derived=b"junk")
    assert storage.update(SCOPE, lambda m: m) == 5
    fixed = storage.load(SCOPE)
    assert fixed.derived_exact and missing(storage, fixed) == 0


class DictStorage(MemoryStorage):
    """A backend that keeps no derived data (``stores_derived`` False)."""

    def __init__(self) -> None:
        self.docs: dict[MemoryScope, StoredMemory] = {}
        self.derived_seen: list[bytes | None] = []

    def load(self, scope: MemoryScope) -> StoredMemory:
        return self.docs.get(scope) or StoredMemory(Memory(), 0)

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        self.derived_seen.append(derived)
        actual = self.load(scope).revision
        if actual != expected_revision:
            raise RevisionConflict(scope, expected_revision, actual)
        self.docs[scope] = StoredMemory(memory, actual + 1)
        return actual + 1

    def delete(self, scope: MemoryScope) -> bool:
        return self.docs.pop(scope, None) is not None

    def list_scopes(self) -> list[MemoryScope]:
        return sorted(self.docs)


def test_a_backend_without_derived_data_never_receives_it(
    deriver: Deriver, screen: CountingScreen
) -> None:
    inner = DictStorage()
    storage = DerivingStorage(inner, deriver)
    assert not storage.stores_derived
    assert storage.update(SCOPE, lambda m: memory_of(*TEXTS[:2])) == 1
    assert storage.save(SCOPE, memory_of(*TEXTS[:3]), 1) == 2
    assert storage.update(SCOPE, lambda m: m) == 2
    assert inner.derived_seen == [None, None]
    stored = storage.load(SCOPE)
    assert [f.content for f in stored.memory.facts] == TEXTS[:3] and stored.derived is None
    assert screen.seen == [], "nothing should be derived for a backend that cannot keep it"
    assert storage.list_scopes() == [SCOPE] and storage.delete(SCOPE)

"""Derived data and the cheap revision: what a backend must provide so that a user's first read
in a process loads what was derived when the memory was written, and a warm read asks only for
the revision (``stores_derived``, :meth:`MemoryStorage.revision`)."""

from __future__ import annotations

import base64
import threading

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import MemoryStorage, RevisionConflict
from deermem_middleware.storage.base import StoredMemory

from .conftest import Backend
from .samples import OTHER, SCOPE, memory

pytestmark = pytest.mark.requires("derived")


def test_derived_data_round_trips_with_its_revision(storage: MemoryStorage) -> None:
    assert storage.stores_derived
    blob = bytes(range(256)) * 40  # any bytes: storage never reads them
    assert storage.save(SCOPE, memory("likes tea"), 0, derived=blob) == 1
    stored = storage.load(SCOPE)
    assert (stored.derived, stored.derived_revision, stored.derived_exact) == (blob, 1, True)
    assert storage.save(SCOPE, memory("likes tea", "owns a cat"), 1, derived=b"second") == 2
    stored = storage.load(SCOPE)
    assert (stored.derived, stored.derived_revision) == (b"second", 2)
    assert storage.load(OTHER).derived is None


def test_a_save_without_derived_data_keeps_the_old_marked_stale(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("likes tea"), 0, derived=b"of revision one")
    storage.save(SCOPE, memory("likes tea", "owns a cat"), 1)  # a writer that does not derive
    stored = storage.load(SCOPE)
    assert stored.revision == 2
    assert (stored.derived, stored.derived_revision) == (b"of revision one", 1)
    assert not stored.derived_exact  # the reader matches it fact by fact


def test_a_lost_race_writes_no_derived_data(storage: MemoryStorage) -> None:
    storage.save(SCOPE, memory("v1"), 0, derived=b"one")
    storage.save(SCOPE, memory("v2"), 1, derived=b"two")
    with pytest.raises(RevisionConflict):
        storage.save(SCOPE, memory("stale"), 1, derived=b"stale")
    stored = storage.load(SCOPE)
    assert (stored.derived, stored.derived_revision) == (b"two", 2)


def test_update_derives_and_an_unchanged_document_with_nothing_new_writes_nothing(
    storage: MemoryStorage,
) -> None:
    seen: list[tuple[int, bytes | None]] = []

    def derive(document: Memory, stored: StoredMemory) -> bytes | None:
        seen.append((stored.revision, stored.derived))
        if document is stored.memory and stored.derived_exact:
            return None  # nothing new for an unchanged document
        return f"facts={len(document.facts)}".encode()

    revision = storage.update(SCOPE, lambda m: memory("likes tea"), derive=derive)
    assert revision == 1 and storage.load(SCOPE).derived == b"facts=1"
    # the document unchanged and nothing new derived: no write, no new revision
    assert storage.update(SCOPE, lambda m: m, derive=derive) == 1
    # the document unchanged but new derived data (a background step): stored with it
    storage.save(SCOPE, storage.load(SCOPE).memory, 1)  # leaves the data stale
    assert storage.update(SCOPE, lambda m: m, derive=derive) == 3
    stored = storage.load(SCOPE)
    assert (stored.revision, stored.derived, stored.derived_exact) == (3, b"facts=1", True)
    assert [r for r, _ in seen] == [0, 1, 2]


def test_concurrent_updates_each_store_their_own_documents_data(storage: MemoryStorage) -> None:
    """Whatever interleaving, the stored data is the one derived from the stored document."""

    def derive(document: Memory, stored: StoredMemory) -> bytes:
        return ",".join(f.content for f in document.facts).encode()

    def add(text: str) -> None:
        storage.update(
            SCOPE,
            lambda m: m.model_copy(update={"facts": (*m.facts, *memory(text).facts)}),
            derive=derive,
        )

    threads = [threading.Thread(target=add, args=(f"fact {i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = storage.load(SCOPE)
    assert stored.revision == 8 and stored.derived_exact
    assert stored.derived == ",".join(f.content for f in stored.memory.facts).encode()


def test_revision_alone_agrees_with_load(backend: Backend) -> None:
    storage = backend.storage
    assert storage.revision(SCOPE) == 0
    storage.save(SCOPE, memory("likes tea"), 0, derived=b"x")
    assert storage.revision(SCOPE) == 1 == storage.load(SCOPE).revision
    storage.save(SCOPE, memory("likes tea", "owns a cat"), 1)
    assert storage.revision(SCOPE) == 2
    storage.delete(SCOPE)
    assert storage.revision(SCOPE) == 0


def test_delete_and_purge_leave_no_derived_data(backend: Backend) -> None:
    storage = backend.storage
    marker = b"DERIVED-MARKER-" + SCOPE.user_id.encode()
    storage.save(SCOPE, memory("likes tea"), 0, derived=marker)
    storage.save(SCOPE, memory("likes tea", "owns a cat"), 1, derived=marker + b"-2")
    assert storage.delete(SCOPE)
    assert storage.load(SCOPE).derived is None
    storage.save(SCOPE, memory("likes tea"), 0, derived=marker)
    storage.purge(SCOPE.user_id)
    assert storage.load(SCOPE).derived is None
    encoded = base64.b64encode(marker).decode()[:16]  # how a store keeps it
    assert not backend.traces("DERIVED-MARKER", encoded, ".derived-")

"""A stored document that cannot be read is kept aside, never overwritten, and the user starts
from an empty memory."""

from __future__ import annotations

import logging

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import RevisionConflict

from .conftest import Backend
from .samples import OTHER, SCOPE, contents, memory

pytestmark = pytest.mark.requires("quarantine")


def test_corrupted_document_is_kept_aside(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    assert backend.corrupt is not None and backend.quarantined is not None
    storage = backend.storage
    storage.save(OTHER, memory("bob's"), 0)
    raw = backend.corrupt(SCOPE)
    with caplog.at_level(logging.ERROR):
        loaded = storage.load(SCOPE)
    assert loaded.revision == 0 and loaded.memory == Memory()
    assert backend.quarantined(SCOPE) == [raw]  # kept as it was
    assert any("empty memory" in r.getMessage() for r in caplog.records)
    assert storage.load(SCOPE).revision == 0  # and only once
    assert backend.quarantined(SCOPE) == [raw]
    assert storage.list_scopes() == [OTHER]  # the copy kept aside is not a document
    assert contents(storage.load(OTHER).memory) == ["bob's"]


def test_save_at_zero_works_after_quarantine(backend: Backend) -> None:
    assert backend.corrupt is not None and backend.quarantined is not None
    storage = backend.storage
    raw = backend.corrupt(SCOPE)
    assert storage.load(SCOPE).revision == 0
    assert storage.save(SCOPE, memory("fresh start"), 0) == 1
    assert contents(storage.load(SCOPE).memory) == ["fresh start"]
    assert sorted(storage.list_scopes()) == [SCOPE]
    assert backend.quarantined(SCOPE) == [raw]


def test_a_writer_finding_a_corrupted_document_quarantines_it(backend: Backend) -> None:
    assert backend.corrupt is not None and backend.quarantined is not None
    storage = backend.storage
    raw = backend.corrupt(SCOPE)
    with pytest.raises(RevisionConflict) as info:
        storage.save(SCOPE, memory("stale writer"), 4)  # its revision no longer exists
    assert info.value.actual == 0
    assert backend.quarantined(SCOPE) == [raw]
    assert storage.save(SCOPE, memory("after reload"), 0) == 1


def test_update_over_a_corrupted_document_starts_empty(backend: Backend) -> None:
    assert backend.corrupt is not None and backend.quarantined is not None
    storage = backend.storage
    raw = backend.corrupt(SCOPE)
    seen: list[Memory] = []

    def mutate(current: Memory) -> Memory:
        seen.append(current)
        return memory(*contents(current), "learnt")

    assert storage.update(SCOPE, mutate) == 1
    assert seen[-1] == Memory()
    assert contents(storage.load(SCOPE).memory) == ["learnt"]
    assert backend.quarantined(SCOPE) == [raw]

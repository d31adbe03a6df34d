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


UNDECODABLE = {  # texts no JSON parser accepts, each once a traceback on every update
    "long-number": '{"revision": 1, "document": {"facts": [], "n": ' + "9" * 5000 + "}}",
    "deep-nesting": '{"revision": 1, "document": {"facts": ' + "[" * 3000 + "]" * 3000 + "}}",
}


@pytest.mark.requires("stored_text")
@pytest.mark.parametrize("kind", sorted(UNDECODABLE))
def test_an_undecodable_document_is_kept_aside(
    backend: Backend, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A stored text that makes the JSON parser raise ``ValueError`` (a number of more than
    4,300 digits) or ``RecursionError`` (deep nesting) is quarantined like any other corrupted
    document: the user starts empty, the next update is stored, everyone else is listed."""
    assert backend.corrupt_text is not None
    storage = backend.storage
    storage.save(OTHER, memory("bob's"), 0)
    backend.corrupt_text(SCOPE, UNDECODABLE[kind])
    assert OTHER in storage.list_scopes()  # the listing survives it
    with caplog.at_level(logging.ERROR):
        assert storage.load(SCOPE).revision == 0
    assert storage.update(SCOPE, lambda current: memory(*contents(current), "learnt")) == 1
    assert contents(storage.load(SCOPE).memory) == ["learnt"]
    assert sorted(storage.list_scopes()) == sorted([OTHER, SCOPE])
    assert any("corrupted" in line for line in backend.held())  # kept for inspection


@pytest.mark.requires("stored_text")
@pytest.mark.parametrize("kind", sorted(UNDECODABLE))
def test_an_undecodable_document_loads_empty_at_once(backend: Backend, kind: str) -> None:
    assert backend.corrupt_text is not None
    backend.corrupt_text(SCOPE, UNDECODABLE[kind])
    assert backend.storage.load(SCOPE).revision == 0
    assert backend.storage.save(SCOPE, memory("fresh"), 0) == 1
    assert backend.storage.purge(SCOPE.user_id).documents == 1
    assert not backend.traces("corrupted")  # forgetting the user takes the copy too

"""``purge``: a user's documents and everything else the storage holds that names them — one
agent's or every agent's — and nothing of anyone else. Then the same through the engine
(``MemoryService.forget_user``), which also drops pending captures and cached vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from deermem_middleware import MemoryConfig
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import CorruptedMemoryError, MemoryScope, MemoryStorage
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.json_file import file_name
from deermem_middleware.storage.store import label

from .conftest import Backend
from .samples import contents, memory, turns

URSULA = "ursula@example.com"
VICTOR = "victor@example.com"
PLANNER, CODER, SCRATCH = (MemoryScope(URSULA, a) for a in ("planner", "coder", "scratch"))
VICTORS = MemoryScope(VICTOR, "planner")
FACTS = {PLANNER: "Ursula breeds axolotls", CODER: "Ursula flies to Reykjavik on Friday"}
PENDING = {PLANNER: "I am learning the hurdy-gurdy", CODER: "I write Rust on weekends"}
VICTOR_FACT = "Victor restores vintage radios"
VICTOR_PENDING = "I am repairing a Grundig set"


def needles(user: str, *texts: str) -> list[str]:
    """How a user can show up in what a storage holds: the id, as a file name or a label."""
    return [user, file_name(user), label(user), *texts]


URSULA_NEEDLES = needles(URSULA, *FACTS.values(), *PENDING.values())
VICTOR_NEEDLES = needles(VICTOR, VICTOR_FACT, VICTOR_PENDING)


def populate(backend: Backend, journal: PendingJournal) -> None:
    """Ursula: two agents with a fact and a pending capture each, and (where the backend
    quarantines) a corrupted document kept aside. Victor: a fact and a pending capture."""
    storage = backend.storage
    for scope, text in (*FACTS.items(), (VICTORS, VICTOR_FACT)):
        storage.save(scope, memory(text), 0)
    for scope, text in (*PENDING.items(), (VICTORS, VICTOR_PENDING)):
        journal.put(scope, "thread-pending", turns(text, "Noted."))
    if backend.caps.quarantine:
        assert backend.corrupt is not None and backend.quarantined is not None
        backend.corrupt(SCRATCH)
        assert storage.load(SCRATCH).revision == 0
        assert backend.quarantined(SCRATCH)
    assert backend.traces(URSULA) and backend.traces(VICTOR)


def pending_of(journal: PendingJournal) -> set[MemoryScope]:
    return {e.scope for e in journal.entries()}


def test_purge_every_agent(backend: Backend) -> None:
    storage = backend.storage
    populate(backend, storage.journal())
    victor_before = backend.traces(*VICTOR_NEEDLES)
    where = {scope: storage.describe(scope) for scope in FACTS}

    receipt = storage.purge(URSULA)

    assert (receipt.documents, receipt.facts) == (2, 2)
    assert sorted(receipt.texts) == sorted(FACTS.values())
    for scope in FACTS:
        assert f"document {where[scope]} (revision 1, 1 fact(s))" in receipt.lines
    assert backend.traces(*URSULA_NEEDLES) == []  # nothing left that names her
    assert backend.traces(*VICTOR_NEEDLES) == victor_before
    assert storage.list_scopes() == [VICTORS]
    assert contents(storage.load(VICTORS).memory) == [VICTOR_FACT]
    if backend.caps.durable_journal:
        assert pending_of(storage.journal()) == {VICTORS}
    if backend.caps.quarantine:
        assert receipt.files + receipt.keys >= 1  # the copy kept aside went too
    again = storage.purge(URSULA)
    assert (again.documents, again.lines) == (0, [])


def test_purge_one_agent_keeps_the_others(backend: Backend) -> None:
    storage = backend.storage
    populate(backend, storage.journal())
    victor_before = backend.traces(*VICTOR_NEEDLES)

    receipt = storage.purge(URSULA, "planner")

    assert (receipt.documents, receipt.facts, receipt.texts) == (1, 1, [FACTS[PLANNER]])
    assert backend.traces(FACTS[PLANNER], PENDING[PLANNER]) == []
    assert sorted(storage.list_scopes()) == sorted([CODER, VICTORS])
    assert contents(storage.load(CODER).memory) == [FACTS[CODER]]
    assert backend.traces(*VICTOR_NEEDLES) == victor_before
    if backend.caps.durable_journal:
        assert pending_of(storage.journal()) == {CODER, VICTORS}
        assert backend.traces(PENDING[CODER])
    if backend.caps.quarantine:
        assert backend.quarantined is not None and backend.quarantined(SCRATCH)


@pytest.mark.requires("quarantine")
def test_purge_of_the_corrupted_agent_takes_its_copies(backend: Backend) -> None:
    assert backend.quarantined is not None
    storage = backend.storage
    populate(backend, storage.journal())
    receipt = storage.purge(URSULA, "scratch")
    assert receipt.documents == 0 and receipt.files + receipt.keys >= 1
    assert backend.quarantined(SCRATCH) == []
    assert sorted(storage.list_scopes()) == sorted([CODER, PLANNER, VICTORS])


def test_an_unreadable_document_is_deleted_all_the_same(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = backend.storage
    populate(backend, storage.journal())
    real_load = storage.load

    def load(scope: MemoryScope) -> Any:
        if scope == PLANNER:
            raise CorruptedMemoryError(storage.describe(scope), "unreadable on purpose")
        return real_load(scope)

    monkeypatch.setattr(storage, "load", load)
    receipt = storage.purge(URSULA)
    assert (receipt.documents, receipt.facts, receipt.texts) == (2, 1, [FACTS[CODER]])
    assert f"document {storage.describe(PLANNER)} (unreadable, 0 fact(s))" in receipt.lines
    monkeypatch.undo()
    assert storage.list_scopes() == [VICTORS]
    assert backend.traces(FACTS[PLANNER]) == []


def test_purging_someone_unknown_changes_nothing(backend: Backend) -> None:
    storage = backend.storage
    populate(backend, storage.journal())
    before = backend.held()
    for receipt in (storage.purge("nobody@example.com"), storage.purge(URSULA, "ghost")):
        assert receipt.lines == [] and receipt.texts == []
        assert (receipt.documents, receipt.facts, receipt.files, receipt.keys) == (0, 0, 0, 0)
    assert backend.held() == before


@pytest.mark.parametrize(
    ("user", "agent"), [("", None), ("   ", None), ("a\x00b", None), (URSULA, "")]
)
def test_purge_refuses_blank_ids(backend: Backend, user: str, agent: str | None) -> None:
    """A blank id must not name every user's folder, nor match anyone."""
    storage = backend.storage
    populate(backend, storage.journal())
    before = backend.held()
    with pytest.raises(ValueError):
        storage.purge(user, agent)
    assert backend.held() == before


# -- through the engine -------------------------------------------------------------------------


def _service(storage: MemoryStorage, tmp_path: Path, **kwargs: Any) -> MemoryService:
    config = MemoryConfig(storage_path=str(tmp_path / "unused"), embeddings="none")
    return MemoryService(config, storage=storage, **kwargs)


def test_forget_user_drops_pending_captures_and_documents(backend: Backend, tmp_path: Path) -> None:
    service = _service(backend.storage, tmp_path)
    assert service._journal is not None
    populate(backend, service._journal)
    try:
        seen: list[list[MemoryScope]] = []
        receipt = service.forget_user(URSULA, confirm=lambda scopes: seen.append(scopes) or True)
    finally:
        service.close()
    assert receipt is not None
    assert seen == [[CODER, PLANNER]]
    assert (receipt.documents, receipt.facts, receipt.pending) == (2, 2, 2)
    assert "pending captures of agent 'planner': 1" in receipt.lines
    assert pending_of(service._journal) == {VICTORS}
    assert backend.traces(*URSULA_NEEDLES) == []
    assert backend.storage.list_scopes() == [VICTORS]


def test_forget_user_of_one_agent(backend: Backend, tmp_path: Path) -> None:
    service = _service(backend.storage, tmp_path)
    assert service._journal is not None
    populate(backend, service._journal)
    try:
        receipt = service.forget_user(URSULA, "planner")
    finally:
        service.close()
    assert receipt is not None
    assert (receipt.documents, receipt.pending, receipt.texts) == (1, 1, [FACTS[PLANNER]])
    assert pending_of(service._journal) == {CODER, VICTORS}
    assert sorted(backend.storage.list_scopes()) == sorted([CODER, VICTORS])


def test_forget_user_declined_deletes_nothing(backend: Backend, tmp_path: Path) -> None:
    service = _service(backend.storage, tmp_path)
    assert service._journal is not None
    populate(backend, service._journal)
    before = backend.held()
    try:
        assert service.forget_user(URSULA, confirm=lambda scopes: False) is None
        assert pending_of(service._journal) == {PLANNER, CODER, VICTORS}
    finally:
        service.close()
    assert backend.held() == before


def test_forget_user_drops_the_vectors_of_the_deleted_facts(
    backend: Backend, tmp_path: Path
) -> None:
    service = _service(backend.storage, tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert service._journal is not None and service._selector.embeddings is not None
    populate(backend, service._journal)
    vectors = service._selector.embeddings
    vectors.embed([*FACTS.values(), VICTOR_FACT])
    try:
        receipt = service.forget_user(URSULA)
    finally:
        service.close()
    assert receipt is not None
    assert sorted(vectors.missing([*FACTS.values(), VICTOR_FACT])) == sorted(FACTS.values())
    assert receipt.lines[-1] == "embedding cache: dropped the vectors of 2 fact text(s)"

"""Forgetting a user (or one of their agents) never touches another user or agent whose id looks
alike: an id that extends it (``bob`` / ``bobby``), differs in case (``Bob``), or that a SQL
``LIKE`` wildcard would match (``user_1`` / ``userX1``, ``a%`` / ``a%25``).

Before 3.1.1, langgraph-checkpoint-sqlite and -postgres matched namespace prefixes with an
unescaped ``LIKE '<path>%'``; a purge that deleted whatever the store's prefix search returned
deleted those neighbours too. The ``loose-prefix-store`` backend reproduces that search, so
these tests fail on any storage that trusts the store's prefix semantics, whichever store
version is installed; CI also runs them at the lowest versions the package allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deermem_middleware import MemoryConfig
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import MemoryScope

from .conftest import Backend
from .samples import contents, memory, turns

# (the user forgotten, agent or None for all, the neighbours that must survive)
CASES = [
    ("bob", None, ["bobby", "Bob", "bob.smith", "bob_"]),
    ("user_1", "coder", ["userX1", "user_10", "USER_1"]),
    ("a%", None, ["a%25", "ab", "a"]),
    ("alice", "coder", []),  # only the same user's look-alike agents
    ("u" * 10_000, None, ["u" * 10_001, "u" * 9_999, "u" * 100]),  # hashed names
]
CASE_IDS = ["bob", "user_1", "a%", "alice-coder", "ascii-10k"]
AGENTS = ["coder", "coder.json", "coder.json.v2", "coderX", "Coder", "c_der"]


def _scopes(users: list[str]) -> list[MemoryScope]:
    return [MemoryScope(user, agent) for user in users for agent in AGENTS]


def _seed(service: MemoryService, scopes: list[MemoryScope]) -> None:
    assert service._journal is not None
    for scope in scopes:
        service._storage.save(scope, memory(f"{scope.user_id}|{scope.agent_name}"), 0)
        service._journal.put(scope, "thread-1", turns(f"pending {scope.user_id}", "ok"))


@pytest.mark.parametrize(("user", "agent", "neighbours"), CASES, ids=CASE_IDS)
def test_forget_keeps_look_alike_users_and_agents(
    backend: Backend, tmp_path: Path, user: str, agent: str | None, neighbours: list[str]
) -> None:
    config = MemoryConfig(storage_path=str(tmp_path / "unused"), embeddings="none")
    service = MemoryService(config, storage=backend.storage)
    everyone = _scopes([user, *neighbours])
    try:
        _seed(service, everyone)
        gone = {s for s in everyone if s.user_id == user and agent in (None, s.agent_name)}
        kept = [s for s in everyone if s not in gone]
        receipt = service.forget_user(user, agent)
        assert receipt is not None
        assert receipt.documents == len(gone)
        assert receipt.pending == len(gone)
        assert sorted(backend.storage.list_scopes()) == sorted(kept)
        for scope in kept:  # every neighbour's document and pending capture, intact
            assert contents(backend.storage.load(scope).memory) == [
                f"{scope.user_id}|{scope.agent_name}"
            ]
        assert service._journal is not None
        assert sorted(e.scope for e in service.pending_entries()) == sorted(kept)
    finally:
        service.close()


def test_journal_forget_is_exact(backend: Backend, tmp_path: Path) -> None:
    """The journal alone: forgetting ``bob``'s pending captures leaves ``bobby``'s."""
    journal = backend.storage.journal()
    scopes = [MemoryScope(u, "coder") for u in ("bob", "bobby", "Bob", "bob_")]
    for scope in scopes:
        journal.put(scope, "t", turns(f"pending {scope.user_id}", "ok"))
    assert journal.forget(scopes[0]) == 1
    assert sorted(e.scope for e in journal.entries()) == sorted(scopes[1:])

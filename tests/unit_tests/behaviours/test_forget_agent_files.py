"""Forgetting one agent on JSON files removes its document and the files beside it — and no
other agent's: agent ``coder``'s old prefix match (``coder.json.``) also took the documents of
agents ``coder.json`` (``coder.json.json``) and ``coder.json.v2``."""

from __future__ import annotations

from pathlib import Path

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from tests.helpers import make_fact

AGENTS = ("coder", "coder.json", "coder.json.v2", "coder.json.lock", "coder.json.corrupted-x")


def test_forgetting_an_agent_leaves_agents_whose_names_extend_it(tmp_path: Path) -> None:
    storage = JSONFileStorage(tmp_path)
    for agent in AGENTS:
        memory = Memory(facts=(make_fact(f"f_{len(agent)}", f"fact of {agent}"),))
        storage.save(MemoryScope("alice", agent), memory, 0)
    folder = tmp_path / "users" / "alice"
    # what the storage leaves beside coder's document: a quarantined copy, a temp write
    (folder / "coder.json.corrupted-20261202T050000123456Z").write_text("{")
    (folder / ".coder.json.k3j_9x2a.tmp").write_text("{")
    before = {p.name for p in folder.iterdir()}
    assert "coder.json.lock" in before  # the save's lock sidecar

    receipt = storage.purge("alice", "coder")

    left = {p.name for p in folder.iterdir()}
    gone = before - left
    assert gone == {
        "coder.json",
        "coder.json.lock",
        "coder.json.corrupted-20261202T050000123456Z",
        ".coder.json.k3j_9x2a.tmp",
    }, receipt.lines
    survivors = sorted(s.agent_name for s in storage.list_scopes())
    assert survivors == sorted(AGENTS[1:])
    for agent in AGENTS[1:]:
        (fact,) = storage.load(MemoryScope("alice", agent)).memory.facts
        assert fact.content == f"fact of {agent}"

"""Switching DeerFlow's memory backend to ours keeps the user's memory
(:mod:`deermem_middleware.storage.carry_over`).

DeerFlow's folders are our fixtures in DeerFlow's shapes (``tests/fixtures/deerflow_memory``: the
four v1.0 places, HEAD's Markdown layout), copied into the data folder DeerFlow's factory hands
the backend; the manager is built the way DeerFlow's factory builds it (our model of its
contract). Each test checks that DeerFlow's files are byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from deermem_middleware import MemoryConfig
from deermem_middleware.config import load_memory_config
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.storage.carry_over import CarryOverStorage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "deerflow_memory"
V1 = FIXTURES / "v1-locations"
V2 = FIXTURES / "v2-markdown"
OURS = "deermem_middleware"
CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
LOGGER = "deermem_middleware.storage.carry_over"


def _tree(root: Path) -> dict[str, str]:
    """Every file of DeerFlow's under ``root`` (ours excluded) and its hash."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and OURS not in p.relative_to(root).parts
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A DeerFlow data folder holding the v1 places and HEAD's Markdown layout together."""
    root = tmp_path / ".deer-flow"
    shutil.copytree(V1, root)
    shutil.copytree(V2, root, dirs_exist_ok=True)
    return root


@pytest.fixture
def managers(contract: ModuleType, home: Path) -> Iterator[Any]:
    built: list[Any] = []

    def make(**backend_config: Any) -> Any:
        config = {"embeddings": "none", "debounce_seconds": 3600, **backend_config}
        manager = contract.build_memory_manager(CLASS, config, runtime_home=home)
        built.append(manager)
        return manager

    yield make
    for manager in built:
        manager.close()


def _facts(document: dict[str, Any]) -> set[str]:
    return {f["id"] for f in document["facts"]}


def test_a_switched_user_sees_every_fact_and_gets_them_injected(
    managers: Any, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = _tree(home)
    manager = managers()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        bob = manager.get_memory(user_id="bob")  # v1: users/bob/memory.json (an id map)
        dana = manager.get_memory(user_id="dana")  # v2: summaries + Markdown facts
    assert _facts(bob) == {"fact_b_rust", "fact_b_cat"}
    assert {"fact_d_violin", "fact_d_tabs", "fact_d_manual", "fact_d_fix"} <= _facts(dana)
    assert "fact_d_deleted" not in _facts(dana)  # HEAD's .v1.bak is never read
    assert dana["user"]["topOfMind"]["summary"] == "Dana: topOfMind summary."
    lines = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]
    assert len(lines) == 2  # one INFO line per scope carried over
    assert "user 'bob' agent '__default__'" in lines[0].getMessage()
    assert "2 fact(s) found, 2 added" in lines[0].getMessage()
    # the next thread's prompt has them (no message: DeerFlow's get_context)
    context = manager.get_context("bob")
    assert "Rust" in context or "rust" in context
    assert _tree(home) == before


def test_every_agent_and_the_default_user_are_carried_over(managers: Any, home: Path) -> None:
    manager = managers()
    assert _facts(manager.get_memory(user_id="bob", agent_name="planner")) == {
        "fact_bp_morning",
        "fact_bp_cat",
    }
    default = manager.get_memory()  # the global memory.json: user "default"
    assert {"fact_g_tea", "fact_g_null", "fact_g_fix"} <= _facts(default)
    assert _facts(manager.get_memory(agent_name="planner")) >= {"fact_p_weekly", "fact_p_goal"}


def test_a_second_start_does_not_import_twice(
    managers: Any, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = managers()
    stored = first.get_memory(user_id="bob")
    first.close()
    scope = MemoryScope("bob", "__default__")
    record = JSONFileStorage(home / OURS).load(scope).memory.carriedOver
    assert record is not None and record.facts == 2 and record.files == ("users/bob/memory.json",)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        again = managers().get_memory(user_id="bob")
    assert again["revision"] == stored["revision"] == 1
    assert _facts(again) == _facts(stored)
    assert not [r for r in caplog.records if r.name == LOGGER]
    assert JSONFileStorage(home / OURS).load(scope).memory.carriedOver == record


def test_concurrent_first_reads_import_once(home: Path) -> None:
    """Eight readers, each with its own wrapper (as separate processes or replicas would have),
    over one storage: one write, the facts once."""
    inner = JSONFileStorage(home / OURS)
    scope = MemoryScope("bob", "__default__")
    start = threading.Barrier(8)
    results: list[int] = []

    def read() -> None:
        storage = CarryOverStorage(inner, home, max_facts=100)
        start.wait()
        results.append(storage.load(scope).revision)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [1] * 8
    stored = inner.load(scope)
    assert stored.revision == 1
    assert sorted(f.id for f in stored.memory.facts) == ["fact_b_cat", "fact_b_rust"]


def test_the_config_key_turns_it_off(managers: Any, home: Path) -> None:
    before = _tree(home)
    manager = managers(carry_over_deerflow_memory=False)
    assert manager.get_memory(user_id="bob")["facts"] == []
    assert manager.get_context("bob") == ""
    assert _tree(home) == before


def test_clearing_keeps_the_record_so_nothing_comes_back(managers: Any) -> None:
    first = managers()
    assert first.get_memory(user_id="bob")["facts"]
    first.clear_memory(user_id="bob")
    first.close()
    assert managers().get_memory(user_id="bob")["facts"] == []


def test_an_erased_user_is_not_carried_over_again(managers: Any, home: Path) -> None:
    before = _tree(home)
    first = managers()
    first.delete_memory(user_id="dana")  # before any read: nothing of ours yet
    first.close()
    second = managers()
    assert second.get_memory(user_id="dana")["facts"] == []
    assert second.get_memory(user_id="dana", agent_name="writer")["facts"] == []
    record = JSONFileStorage(home / OURS).load(MemoryScope("dana", "__default__")).memory
    assert record.carriedOver is not None and record.carriedOver.erased
    assert _tree(home) == before  # DeerFlow's copy is DeerFlow's to delete


def test_the_receipt_of_an_erasure_names_deerflows_files(home: Path) -> None:
    config = MemoryConfig(
        storage_path=str(home / OURS), deerflow_memory_folder=str(home), embeddings="none"
    )
    service = MemoryService(config)
    try:
        receipt = service.forget_user("bob")
    finally:
        service.close()
    assert receipt is not None
    assert any("DeerFlow's own memory" in line for line in receipt.lines)


def test_a_scope_deerflow_cannot_name_is_not_looked_up(home: Path) -> None:
    inner = JSONFileStorage(home / OURS)
    storage = CarryOverStorage(inner, home, max_facts=100)
    for scope in (MemoryScope("../bob", "__default__"), MemoryScope("bob", "no_underscores")):
        assert storage.load(scope).revision == 0
    assert inner.list_scopes() == []


def test_the_middleware_on_deerflows_config_carries_over_too(home: Path) -> None:
    """The two-line setup: our middleware reads DeerFlow's ``config.yaml`` (storage in
    DeerFlow's data folder), so the engine knows the folder and carries the user over."""
    config_file = home.parent / "config.yaml"
    config_file.write_text(
        f"memory:\n  manager_class: noop\n  storage_path: {home}\n  embeddings: none\n",
        encoding="utf-8",
    )
    config = load_memory_config(config_file)
    assert config.deerflow_memory_folder == str(home)
    before = _tree(home)
    service = MemoryService(config)
    try:
        block = service.memory_block([HumanMessage("what pet do I have?")], "bob", None)
    finally:
        service.close()
    assert "cat" in block.lower()
    assert _tree(home) == before


def test_a_plain_config_has_no_deerflow_folder(tmp_path: Path) -> None:
    path = tmp_path / "memory.yaml"
    path.write_text("memory:\n  storage_path: mem\n", encoding="utf-8")
    assert load_memory_config(path).deerflow_memory_folder is None


COGNITIVE = {
    "summary": "Prefers conclusions first, then the details.",
    "updatedAt": "2026-01-11T09:30:00Z",
    "scope": "user",
}
"""A section a newer DeerFlow writes (its pull request #3182) that we do not model."""


def test_a_section_we_do_not_model_is_carried_over_exported_as_read_and_not_injected(
    managers: Any, home: Path
) -> None:
    path = home / "users" / "bob" / "memory.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["user"]["cognitiveStyle"] = COGNITIVE
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    manager = managers()

    exported = manager.export_memory(user_id="bob")
    assert json.dumps(exported["user"]["cognitiveStyle"]) == json.dumps(COGNITIVE)
    assert "conclusions first" not in manager.get_context("bob")
    # import into another user and export again: the section comes back byte for byte
    manager.import_memory(exported, user_id="carol")
    again = manager.export_memory(user_id="carol")
    assert json.dumps(again["user"]["cognitiveStyle"]) == json.dumps(COGNITIVE)
    assert [f["id"] for f in again["facts"]] == [f["id"] for f in exported["facts"]]

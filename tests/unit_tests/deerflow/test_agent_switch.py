"""A DeerFlow custom agent's ``config.yaml`` switching its memory off; the backend honouring it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from deermem_middleware.deerflow.agent_switch import (
    AgentSwitch,
    SwitchFormatError,
    memory_switched_off,
)
from deermem_middleware.testing import ScriptedChatModel, update_json

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"


def _agent(home: Path, name: str, body: Any, *, user: str | None = "default") -> Path:
    folder = home / "users" / user / "agents" / name if user else home / "agents" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(body if isinstance(body, str) else yaml.safe_dump(body), encoding="utf-8")
    return path


# -- the pure reading ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "off"),
    [
        (None, False),
        ({"name": "plain"}, False),
        ({"memory": {"enabled": False}}, True),  # DeerFlow #4184
        ({"memory_enabled": False}, True),  # DeerFlow #5167
        ({"memory": {"enabled": "false"}}, True),  # pydantic's reading, as DeerFlow's
        ({"memory_enabled": "no"}, True),
        ({"memory": {"enabled": True}}, False),
        ({"memory": {}}, False),  # present but empty: enabled (DeerFlow's default)
        ({"memory": None, "memory_enabled": None}, False),
        ({"memory": {"enabled": True}, "memory_enabled": False}, True),  # either one is enough
        ({"memory": {"enabled": False}, "memory_enabled": True}, True),  # never switches on
    ],
)
def test_either_key_switches_memory_off_and_nothing_switches_it_on(data: Any, off: bool) -> None:
    assert memory_switched_off(data) is off


@pytest.mark.parametrize(
    "data",
    [["a", "list"], {"memory": "off"}, {"memory": {"enabled": "maybe"}}, {"memory_enabled": 2}],
)
def test_a_malformed_switch_is_an_error_naming_it(data: Any) -> None:
    with pytest.raises(SwitchFormatError):
        memory_switched_off(data)


# -- the files ----------------------------------------------------------------------------------


def test_the_per_user_file_wins_over_the_legacy_shared_one(tmp_path: Path) -> None:
    switch = AgentSwitch(tmp_path)
    _agent(tmp_path, "worker", {"memory_enabled": False}, user=None)  # legacy: off for all
    assert switch.off("worker", "alice") and switch.off("worker", None)
    _agent(tmp_path, "worker", {"name": "worker"}, user="alice")  # alice's own: on
    assert not switch.off("worker", "alice")
    assert switch.off("worker", "bob")
    assert not switch.off("other", "alice")  # no file
    assert not switch.off(None, "alice")  # no agent: DeerFlow's global memory
    assert not switch.off("../etc", "alice")  # not an agent name DeerFlow accepts


def test_folder_names_are_lower_case_as_deerflow_makes_them(tmp_path: Path) -> None:
    _agent(tmp_path, "worker", {"memory": {"enabled": False}})
    assert AgentSwitch(tmp_path).off("Worker", "default")


def test_the_file_is_parsed_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _agent(tmp_path, "worker", {"memory": {"enabled": False}})
    switch = AgentSwitch(tmp_path)
    parsed: list[str] = []
    real = yaml.safe_load

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(yaml, "safe_load", counting)
    assert switch.off("worker", "default") and switch.off("worker", "default")
    assert len(parsed) == 1
    path.write_text(yaml.safe_dump({"memory": {"enabled": True}}), encoding="utf-8")
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    assert not switch.off("worker", "default")
    assert len(parsed) == 2


def test_a_malformed_file_is_logged_once_and_leaves_memory_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _agent(tmp_path, "worker", "memory: {enabled: [unclosed\n")
    switch = AgentSwitch(tmp_path)
    with caplog.at_level(logging.WARNING, logger="deermem_middleware.deerflow.agent_switch"):
        assert not switch.off("worker", "default")
        assert not switch.off("worker", "default")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()


def test_without_a_home_deerflows_own_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEER_FLOW_HOME", str(tmp_path))
    _agent(tmp_path, "worker", {"memory_enabled": False})
    assert AgentSwitch().off("worker", "default")


# -- the backend --------------------------------------------------------------------------------


def _conversation(user: str, reply: str) -> list[BaseMessage]:
    return [HumanMessage(user), AIMessage(reply)]


@pytest.fixture
def build(
    contract: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Any]]:
    """A manager built as DeerFlow's factory builds it, DeerFlow's data folder at ``tmp_path``."""
    monkeypatch.setenv("DEER_FLOW_HOME", str(tmp_path))
    built: list[Any] = []

    def make(model: Any = None) -> Any:
        config = {"debounce_seconds": 3600, "flush_on_exit_seconds": None, "embeddings": "none"}
        manager = contract.build_memory_manager(
            MANAGER_CLASS,
            config,
            runtime_home=tmp_path,
            host_hooks=contract.default_host_hooks(lambda: model),
        )
        built.append(manager)
        return manager

    yield make
    for manager in built:
        manager.close()


@pytest.mark.parametrize("body", [{"memory": {"enabled": False}}, {"memory_enabled": False}])
def test_an_opted_out_agent_is_neither_captured_nor_given_context(
    build: Callable[..., Any], tmp_path: Path, body: dict[str, Any]
) -> None:
    extractor = ScriptedChatModel(
        answers=[update_json(facts=[("The user writes Go", "knowledge", 0.9)])] * 2
    )
    manager = build(extractor)
    _agent(tmp_path, "stateless", body, user="alice")
    for agent in ("stateless", "coder"):
        manager.create_fact("Alice lives in Lyon", user_id="alice", agent_name=agent)
    said = _conversation("I write Go services.", "Noted.")
    manager.add("t-1", said, user_id="alice", agent_name="stateless")
    manager.add_nowait("t-2", said, user_id="alice", agent_name="stateless")
    manager.add_nowait("t-3", said, user_id="alice", agent_name="coder")
    assert manager.shutdown_flush(10.0)
    assert len(extractor.calls) == 1  # coder's turn only
    assert manager.get_context("alice", agent_name="stateless") == ""
    assert manager.get_context("alice", agent_name="stateless", query="Where do I live?") == ""
    assert "Lyon" in manager.get_context("alice", agent_name="coder")
    assert "Lyon" in manager.get_context("alice", agent_name="coder", query="Where do I live?")
    # the switch is per user: bob's "stateless" agent has no such file
    manager.create_fact("Bob lives in Oslo", "context", 0.9, user_id="bob", agent_name="stateless")
    assert "Oslo" in manager.get_context("bob", agent_name="stateless")

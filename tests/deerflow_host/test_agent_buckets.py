"""A user's summaries are shared by all their agents, facts are each agent's — on DeerFlow itself.

DeerFlow's contract (its ``MemoryManager.clear_memory``, DeerMem's storage, pull request #4594's
``?agent_name=`` routes): the six summaries are the user's; facts live in one bucket per agent;
clearing one agent keeps the summaries; clearing the user clears everything. Here DeerFlow's
factory builds our backend from DeerFlow's ``config.yaml``, Kim's DeerFlow memory (a v1.0
``users/kim/memory.json``) is already in the data folder, and a turn of Kim's custom agent
``coder`` is captured with the call DeerFlow's ``MemoryMiddleware`` makes
(``add(thread_id, messages, agent_name=..., user_id=...)``) and extracted at DeerFlow's
shutdown flush. The extraction model is scripted (what it answers is the point, not how well
the tiny local model writes JSON); everything else — the factory, the router behind DeerFlow's
``AuthMiddleware``, the backend's files — is DeerFlow's and ours for real.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware.testing import ScriptedChatModel, update_json
from tests.deerflow_host.conftest import DeerFlowHost, deerflow_v1_memory
from tests.deerflow_host.test_real_deerflow import manager_mode

USER = "kim"
AGENT = "coder"
WORK = "Kim builds data pipelines at a logistics company"
"""Kim's work summary in DeerFlow's own memory file: every agent's."""
DEFAULT_FACT = "Kim drinks green tea in the morning"
"""A fact of Kim's default agent (DeerFlow's global memory)."""
FOCUS = "Kim is porting the ingestion service to Rust this month"
"""The summary the coder agent's extraction writes: the user's, so every agent sees it."""
CODER_FACT = "Kim uses cargo-nextest to run Rust tests"


def _seed_kims_deerflow_memory(host: DeerFlowHost) -> None:
    document = deerflow_v1_memory(
        [
            {
                "id": "fact_kim_tea",
                "content": DEFAULT_FACT,
                "category": "preference",
                "confidence": 0.9,
                "createdAt": "2026-04-01T08:00:00Z",
                "source": "thread-kim-0",
            }
        ]
    )
    document["user"]["workContext"] = {"summary": WORK, "updatedAt": "2026-04-01T08:00:00Z"}
    folder = host.home / "users" / USER
    folder.mkdir(parents=True)
    (folder / "memory.json").write_text(json.dumps(document, indent=2), encoding="utf-8")


def _page(host: DeerFlowHost) -> dict[str, Any]:
    """Kim's Memory page: DeerFlow's gateway, no agent named (the default bucket)."""
    with host.gateway() as gateway:
        response = gateway.get("/api/memory", headers=host.as_user(USER))
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def _summary(memory: dict[str, Any], group: str, name: str) -> str:
    return str(memory[group][name]["summary"])


def _contents(memory: dict[str, Any]) -> list[str]:
    return [str(f["content"]) for f in memory["facts"]]


def test_summaries_are_the_users_and_facts_each_agents(
    deerflow_host: DeerFlowHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = deerflow_host
    _seed_kims_deerflow_memory(host)
    extraction = ScriptedChatModel(
        answers=[
            update_json(sections={"topOfMind": FOCUS}, facts=[(CODER_FACT, "knowledge", 0.95)])
        ]
    )
    from deermem_middleware.deerflow import manager as manager_module

    monkeypatch.setattr(manager_module, "host_chat_model", lambda factory: extraction)
    manager = manager_mode(host)

    # Kim's DeerFlow memory, carried over: the summary is every agent's, the fact the default's
    coder = manager.get_memory(user_id=USER, agent_name=AGENT)
    assert _summary(coder, "user", "workContext") == WORK
    assert _contents(coder) == []

    # a turn of the coder agent, captured as DeerFlow's MemoryMiddleware captures it
    manager.add(
        "thread-kim-coder",
        [HumanMessage("I'm porting ingestion to Rust; I run tests with nextest."), AIMessage("OK")],
        agent_name=AGENT,
        user_id=USER,
    )
    assert host.shutdown_flush()
    assert len(extraction.calls) == 1

    page = _page(host)  # the default agent: the coder's summary, not its fact
    assert _summary(page, "user", "topOfMind") == FOCUS
    assert _summary(page, "user", "workContext") == WORK
    assert _contents(page) == [DEFAULT_FACT]
    coder = manager.get_memory(user_id=USER, agent_name=AGENT)
    assert _summary(coder, "user", "topOfMind") == FOCUS
    assert _contents(coder) == [CODER_FACT]

    # what DeerFlow's lead agent injects for each agent (its get_context: no message)
    for_coder = manager.get_context(USER, agent_name=AGENT)
    assert FOCUS in for_coder and WORK in for_coder and CODER_FACT in for_coder
    assert DEFAULT_FACT not in for_coder
    for_default = manager.get_context(USER)
    assert FOCUS in for_default and DEFAULT_FACT in for_default
    assert CODER_FACT not in for_default

    # clearing one agent (pull request #4594's DELETE /api/memory?agent_name=coder calls this)
    cleared = manager.clear_memory(user_id=USER, agent_name=AGENT)
    assert cleared["facts"] == []
    assert _summary(cleared, "user", "topOfMind") == FOCUS
    page = _page(host)
    assert _contents(page) == [DEFAULT_FACT]
    assert _summary(page, "user", "topOfMind") == FOCUS

    # a new fact for the coder again, then the Memory page's "clear all": everything goes
    manager.create_fact(CODER_FACT, "knowledge", 0.9, user_id=USER, agent_name=AGENT)
    with host.gateway() as gateway:
        response = gateway.delete("/api/memory", headers=host.as_user(USER))
    assert response.status_code == 200, response.text
    for memory in (_page(host), manager.get_memory(user_id=USER, agent_name=AGENT)):
        assert memory["facts"] == []
        assert not any(s["summary"] for g in ("user", "history") for s in memory[g].values())

    # one document for Kim in our folder, DeerFlow's files as they were
    assert sorted(p.name for p in (host.ours / "users" / USER).glob("*.json")) == [
        "__default__.json"
    ]
    host.assert_deerflow_files_untouched()

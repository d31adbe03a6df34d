"""The console over the engine the agents use: what a real ``create_agent`` run injected shows
in the console's ledger, and a person's edit in the console is what the next model call gets."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.console import create_console_app
from deermem_middleware.memory.manual import add_fact
from deermem_middleware.testing import RecordingAgentModel, system_text

BEARER = {"Authorization": "Bearer editor-token"}


def _run(agent: Any, text: str, thread: str) -> None:
    agent.invoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread, "user_id": "alice"}},
    )


def test_the_console_shares_the_agents_engine(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=RecordingAgentModel())
    service = mw.service
    scope = service.scope("alice")
    service.change(
        scope,
        lambda m: add_fact(
            m, "Writes backend services in Go", fact_id="fact_go", now="2026-11-01T00:00:00Z"
        ),
    )
    model = RecordingAgentModel()
    agent = create_agent(model, [], middleware=[mw], checkpointer=InMemorySaver())
    host = FastAPI()  # the host app that serves the agent mounts the console beside it
    host.mount("/memory", create_console_app(service, tokens={"editor-token": ("sam", "edit")}))
    client = TestClient(host)

    _run(agent, "Which language should the new worker use?", "t1")
    assert "Writes backend services in Go" in system_text(model.seen[0])
    ledger = client.get("/memory/api/ledger", headers=BEARER).json()["records"]
    assert ledger and ledger[0]["user"] == "alice" and ledger[0]["thread"] == "t1"
    assert "fact_go" in [f["id"] for f in ledger[0]["facts"]]

    facts = client.get("/memory/api/facts", params={"user": "alice"}, headers=BEARER).json()
    (fact,) = facts["facts"]
    answer = client.patch(
        "/memory/api/facts/fact_go",
        headers=BEARER,
        json={
            "user": "alice",
            "version": fact["version"],
            "content": "Writes backend services in Rust",
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["fact"]["manual"] is True  # extraction never changes it now

    _run(agent, "Which language should the new worker use?", "t2")
    injected = system_text(model.seen[-1])
    assert "Writes backend services in Rust" in injected
    assert "in Go" not in injected
    (entry, *_) = client.get("/memory/api/audit", headers=BEARER).json()["entries"]
    assert (entry["action"], entry["operator"]) == ("fact.edit", "sam")
    assert entry["before"]["content"] == "Writes backend services in Go"
    assert entry["after"]["content"] == "Writes backend services in Rust"
    mw.close()

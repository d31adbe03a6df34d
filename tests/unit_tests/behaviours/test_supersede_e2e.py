"""A changed fact end to end: a real ``create_agent`` graph with MemoryMiddleware.

Thread 1 stores "User uses MySQL"; in thread 2 the user moves to PostgreSQL and the extraction
answers with a new fact that *supersedes* the MySQL one (by the id it reads in its prompt); in
thread 3 only PostgreSQL reaches the agent's model, while the stored memory keeps the MySQL fact as
history, linked to its replacement. The agent and extraction models are scripted; the graph,
middleware, scheduler, updater and file storage are the real ones.
"""

from __future__ import annotations

import re
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.testing import (
    RecordingAgentModel,
    ScriptedChatModel,
    system_text,
    update_json,
)

MYSQL = "User uses MySQL"
POSTGRES = "User uses PostgreSQL"

_FACT_LINE = re.compile(r"^- (fact_\w+) \| \w+ \| [\d.]+ \| (.*)$", re.MULTILINE)


def _extraction(messages: list[BaseMessage]) -> str:
    """What a good extraction model answers, reading the ids from its prompt's memory lines."""
    prompt = str(messages[-1].content)
    conversation = prompt.split("<conversation>", 1)[1]
    shown = {content: fact_id for fact_id, content in _FACT_LINE.findall(prompt)}
    if "moved from MySQL to PostgreSQL" in conversation:
        return update_json(
            facts=[
                {
                    "content": POSTGRES,
                    "category": "context",
                    "confidence": 0.95,
                    "sourceKind": "stated",
                    "supersedes": [shown[MYSQL]],
                }
            ]
        )
    if "I use MySQL" in conversation:
        return update_json(
            facts=[
                {
                    "content": MYSQL,
                    "category": "context",
                    "confidence": 0.95,
                    "sourceKind": "stated",
                }
            ]
        )
    return update_json(facts=[])


def test_a_superseded_fact_is_no_longer_injected_but_kept_for_audit(tmp_path: Path) -> None:
    config = MemoryConfig(
        storage_path=str(tmp_path / "memory"),
        debounce_seconds=0.0,
        max_wait_seconds=1.0,
        embeddings="none",
    )
    extractor = ScriptedChatModel(answers=[_extraction])
    mw = MemoryMiddleware(config, model=extractor)
    model = RecordingAgentModel()
    agent = create_agent(
        model, [], system_prompt="You are helpful.", middleware=[mw], checkpointer=InMemorySaver()
    )

    def say(thread: str, text: str) -> None:
        agent.invoke(
            {"messages": [HumanMessage(text)]},
            {"configurable": {"thread_id": thread, "user_id": "alice"}},
        )
        assert mw.flush(timeout=10)

    try:
        say("t1", "I use MySQL for everything.")
        [mysql] = mw.get_memory("alice").facts
        assert (mysql.content, mysql.status, mysql.sourceKind) == (MYSQL, "active", "stated")

        say("t2", "I moved from MySQL to PostgreSQL last month.")
        # the extraction saw the MySQL fact and its id in thread 2's prompt
        assert f"{mysql.id} | context | 0.95 | {MYSQL}" in str(extractor.calls[-1][-1].content)

        say("t3", "Which database do I use?")
        injected = system_text(model.seen[-1])
        assert "<memory>" in injected
        assert POSTGRES in injected
        assert "MySQL" not in injected

        facts = {f.content: f for f in mw.get_memory("alice").facts}
        assert set(facts) == {MYSQL, POSTGRES}
        assert facts[POSTGRES].status == "active"
        assert facts[MYSQL].id == mysql.id
        assert facts[MYSQL].status == "superseded"
        assert facts[MYSQL].supersededBy == facts[POSTGRES].id
        # thread 3's extraction prompt shows only the active fact: history is not re-extracted
        last_prompt = str(extractor.calls[-1][-1].content)
        assert POSTGRES in last_prompt and mysql.id not in last_prompt
    finally:
        mw.close()

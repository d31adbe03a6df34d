"""End to end against a real model over HTTP: ChatOpenAI -> llama.cpp server -> SmolLM2-135M.

The tiny model's *content* is poor and not asserted; these tests pin the path (structured output
through a real grammar-constrained server), the bounds, and the whole agent loop.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.extraction.local_llm import LocalLLMServer
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import (
    FACT_CATEGORIES,
    MAX_FACT_CHARS,
    MAX_FACTS_PER_UPDATE,
    MAX_SUMMARY_CHARS,
    SECTION_FIELDS,
    Memory,
)
from deermem_middleware.testing import SystemPromptRecorder

TURNS = [
    Turn("user", "Hi, I'm Maya, a backend engineer at a fintech startup. I write Go.", "t1"),
    Turn("assistant", "Nice to meet you, Maya! Go is a great fit for backend work.", "t2"),
    Turn("user", "I prefer short answers with code examples.", "t3"),
    Turn("assistant", "Understood: short answers with code.", "t4"),
]


class _RequestLog:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> None:
        self.bodies.append(json.loads(request.content))


def test_extraction_uses_json_schema_and_respects_caps(local_llm: LocalLLMServer) -> None:
    log = _RequestLog()
    model = local_llm.chat_model(http_client=httpx.Client(event_hooks={"request": [log]}))
    result = MemoryExtractor(model).extract(Memory(), TURNS)

    assert result.method == "json_schema"
    assert result.calls == 1 and len(log.bodies) == 1
    body = log.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    schema_text = json.dumps(body["response_format"])
    assert '"maxLength"' in schema_text and '"maxItems"' in schema_text
    assert body["repeat_penalty"] == 1.1  # local-only sampling option, sent to loopback only
    assert result.input_tokens > 0 and result.output_tokens > 0

    update = result.update
    assert len(update.newFacts) <= MAX_FACTS_PER_UPDATE
    for fact in update.newFacts:
        assert 0.0 <= fact.confidence <= 1.0
        assert 0 < len(fact.content) <= MAX_FACT_CHARS
        assert fact.category in FACT_CATEGORIES
    for name in SECTION_FIELDS:
        assert len(update.section(name).summary) <= MAX_SUMMARY_CHARS
    assert update.factsToRemove == []  # no facts were shown, so the grammar allows no removals


def _setup(local_llm: LocalLLMServer, tmp_path: Path) -> tuple[MemoryMiddleware, Any, Path]:
    # threshold 0: whatever the tiny model extracts is stored, so injection has content to show
    config = MemoryConfig(
        storage_path=str(tmp_path / "memory"),
        debounce_seconds=30.0,
        fact_confidence_threshold=0.0,
    )
    middleware = MemoryMiddleware(config, model=local_llm.chat_model())
    agent = create_agent(
        local_llm.chat_model(max_tokens=48),
        [],
        system_prompt="You are a helpful assistant. Answer in one sentence.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    return middleware, agent, Path(middleware.service._storage.describe(middleware.scope("maya")))


def _check_memory_file(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["revision"] >= 1
    assert "t1" not in document["watermarks"]  # watermarks are per thread id
    assert "thread-1" in document["watermarks"]
    assert document["facts"] or any(
        document[group][name]["summary"]
        for group, names in (
            ("user", ("workContext", "personalContext", "topOfMind")),
            ("history", ("recentMonths", "earlierContext", "longTermBackground")),
        )
        for name in names
    ), "the real model produced neither facts nor a summary"
    return document


def test_create_agent_writes_memory_and_injects_it_sync(
    local_llm: LocalLLMServer, tmp_path: Path
) -> None:
    middleware, agent, path = _setup(local_llm, tmp_path)
    user = {"configurable": {"thread_id": "thread-1", "user_id": "maya"}}
    agent.invoke({"messages": [HumanMessage(TURNS[0].text)]}, user)
    assert middleware.flush(timeout=600)
    _check_memory_file(path)

    recorder = SystemPromptRecorder()
    other = {"configurable": {"thread_id": "thread-2", "user_id": "maya"}, "callbacks": [recorder]}
    result = agent.invoke({"messages": [HumanMessage("What language do I use?")]}, other)
    assert "<memory>" in recorder.systems[0]
    persisted = "\n".join(str(m.content) for m in result["messages"])
    assert "<memory>" not in persisted
    middleware.close(timeout=600)


async def test_create_agent_writes_memory_and_injects_it_async(
    local_llm: LocalLLMServer, tmp_path: Path
) -> None:
    middleware, agent, path = _setup(local_llm, tmp_path)
    user = {"configurable": {"thread_id": "thread-1", "user_id": "maya"}}
    await agent.ainvoke({"messages": [HumanMessage(TURNS[0].text)]}, user)
    assert await middleware.aflush(timeout=600)
    _check_memory_file(path)

    recorder = SystemPromptRecorder()
    other = {"configurable": {"thread_id": "thread-2", "user_id": "maya"}, "callbacks": [recorder]}
    await agent.ainvoke({"messages": [HumanMessage("What language do I use?")]}, other)
    assert "<memory>" in recorder.systems[0]
    await middleware.aclose(timeout=600)


def test_provider_local_config_starts_and_stops_its_own_server(tmp_path: Path) -> None:
    """`model: {provider: local}` in YAML: the middleware starts llama-server for extraction and
    `close()` stops it."""
    from tests.integration_tests.conftest import require_local_llm
    from tests.integration_tests.test_local_server import _alive

    require_local_llm()
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        "memory:\n"
        f"  storage_path: {tmp_path / 'memory'}\n"
        "  fact_confidence_threshold: 0.0\n"
        "  model:\n"
        "    provider: local\n"
        "    max_tokens: 512\n",
        encoding="utf-8",
    )
    from langchain_core.messages import AIMessage

    middleware = MemoryMiddleware.from_config(config_file)
    middleware.capture(
        [HumanMessage(TURNS[0].text, id="h1"), AIMessage(TURNS[1].text, id="a1")],
        user_id="maya",
        thread_id="t1",
    )
    assert middleware.flush(timeout=600)
    (server,) = middleware.service._resources
    pid = server.pid
    assert pid is not None and _alive(pid)
    stored = middleware.service.load(middleware.scope("maya"))
    assert stored.revision >= 1
    assert "t1" in stored.memory.watermarks
    middleware.close()
    assert not _alive(pid)


def test_the_intent_judge_script_gets_a_verdict_for_every_row_from_a_real_server(
    local_llm: LocalLLMServer, tmp_path: Path, capsys: Any
) -> None:
    """The measurement script over HTTP (``--base-url``): the schema holds on a real grammar-
    constrained server, so every row is answered and counted; the verdicts themselves (of a
    135M model) are not asserted."""
    from tests.unit_tests.project.test_judge_script import judge

    out = tmp_path / "judge.json"
    argv = ["--base-url", local_llm.base_url, "--model", local_llm.alias, "--parts", "heldout12"]
    argv += ["--limit", "3", "--batch", "4", "--max-tokens", "256", "--json-out", str(out)]
    assert judge.main(argv) == 0
    result = json.loads(out.read_text("utf-8"))
    assert result["rows"] == 6
    total = result["tallies"]["all/all"]
    assert (total["instructions"], total["lookalikes"], total["unanswered"]) == (3, 3, 0)
    assert total["judge_caught"] + len(total["missed"]) == 3
    assert total["judge_kept"] + len(total["lost"]) == 3
    assert "| heldout12 | all |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "max_tokens",
    [1024, 1500],
    ids=["compact_shape", "full_shape"],  # the bundled default; the YAML default
)
def test_the_small_model_stores_nothing_it_invented(
    local_llm: LocalLLMServer, tmp_path: Path, max_tokens: int
) -> None:
    """The README's first example on the bundled model: from "I'm Alice. I write Go at a
    payments company." it once stored "Alice is a freelance writer and uses PayPal … the GoFox
    team" at confidence 1.00. Whatever the model proposes now, no stored fact names what Alice
    did not say, and every stored fact reads in the third person."""
    config = MemoryConfig(storage_path=str(tmp_path / "memory"), debounce_seconds=30.0)
    middleware = MemoryMiddleware(config, model=local_llm.chat_model(max_tokens=max_tokens))
    agent = create_agent(
        local_llm.chat_model(max_tokens=60),
        [],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    monday: Any = {"configurable": {"thread_id": "monday", "user_id": "alice"}}
    agent.invoke(
        {"messages": [HumanMessage("I'm Alice. I write Go at a payments company.")]}, monday
    )
    middleware.flush()
    facts = [f.content for f in middleware.get_memory("alice").facts]
    middleware.close()
    said = {w.lower() for w in re.findall(r"\w+", "I'm Alice. I write Go at a payments company.")}
    for fact in facts:
        assert not re.search(r"paypal|gofox|freelanc", fact, re.IGNORECASE), facts
        names = re.findall(r"(?<!^)(?<![.!?] )\b[A-Z][a-z]+", fact)
        assert all(n.lower() in said or n == "User" for n in names), facts
        assert not re.match(r"(I|I'm|My|We)\b", fact), facts

"""MemoryMiddleware in real `create_agent` graphs: capture in one thread, inject in the next.

The agent's model and the extraction model are scripted fakes (our wiring is under test, not an
LLM); the graph, checkpointer and middleware machinery are LangChain/LangGraph's own.
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.storage import JSONFileStorage
from deermem_middleware.testing import (
    RecordingAgentModel,
    ScriptedChatModel,
    system_text,
    update_json,
)

GO_FACT = "The user writes backend services in Go"


def _extractor(*facts: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        answers=[
            update_json(
                sections={"workContext": "Backend engineer."},
                facts=[(f, "knowledge", 0.95) for f in facts],
            )
        ]
    )


def _agent(mw: MemoryMiddleware, model: RecordingAgentModel, **kwargs: Any) -> Any:
    return create_agent(
        model,
        [],
        system_prompt="You are helpful.",
        middleware=[mw],
        checkpointer=InMemorySaver(),
        **kwargs,
    )


def _cfg(thread: str, user: str = "alice") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def _persisted_text(agent: Any, thread: str) -> str:
    state = agent.get_state({"configurable": {"thread_id": thread}})
    return "\n".join(str(m.content) for m in state.values["messages"])


def test_fact_from_thread_a_is_injected_in_thread_b_invoke(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor(GO_FACT))
    model = RecordingAgentModel()
    agent = _agent(mw, model)

    agent.invoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert mw.flush(timeout=10)
    assert [f.content for f in mw.get_memory("alice").facts] == [GO_FACT]

    agent.invoke({"messages": [HumanMessage("Which language should I use?")]}, _cfg("B"))
    system = system_text(model.seen[-1])
    assert "You are helpful." in system
    assert "<memory>" in system and GO_FACT in system
    assert "Backend engineer." in system
    # the injected block reaches the model but is never written into the thread
    assert "<memory>" not in _persisted_text(agent, "B")
    assert GO_FACT not in _persisted_text(agent, "B")
    mw.close()


async def test_fact_from_thread_a_is_injected_in_thread_b_ainvoke(
    memory_config: MemoryConfig,
) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor(GO_FACT))
    model = RecordingAgentModel()
    agent = _agent(mw, model)

    await agent.ainvoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert await mw.aflush(timeout=10)
    await agent.ainvoke({"messages": [HumanMessage("Which language should I use?")]}, _cfg("B"))

    assert GO_FACT in system_text(model.seen[-1])
    assert "<memory>" not in _persisted_text(agent, "B")
    await mw.aclose()


def test_users_never_see_each_others_facts(memory_config: MemoryConfig) -> None:
    extractor = ScriptedChatModel(
        answers=[
            lambda msgs: (
                update_json(facts=[("Alice keeps bees", "context", 0.95)])
                if "bees" in str(msgs[-1].content)
                else update_json(facts=[("Bob collects stamps", "context", 0.95)])
            )
        ]
    )
    mw = MemoryMiddleware(memory_config, model=extractor)
    model = RecordingAgentModel()
    agent = _agent(mw, model)
    agent.invoke({"messages": [HumanMessage("I keep bees.")]}, _cfg("a1", "alice"))
    agent.invoke({"messages": [HumanMessage("I collect stamps.")]}, _cfg("b1", "bob"))
    assert mw.flush(timeout=10)

    agent.invoke({"messages": [HumanMessage("What do I do for fun?")]}, _cfg("a2", "alice"))
    alice_view = system_text(model.seen[-1])
    agent.invoke({"messages": [HumanMessage("What do I do for fun?")]}, _cfg("b2", "bob"))
    bob_view = system_text(model.seen[-1])

    assert "bees" in alice_view and "stamps" not in alice_view
    assert "stamps" in bob_view and "bees" not in bob_view
    mw.close()


def test_user_id_from_runtime_context(memory_config: MemoryConfig) -> None:
    """`context={"user_id": ...}` wins over configurable and scopes the memory."""
    mw = MemoryMiddleware(memory_config, model=_extractor(GO_FACT))
    model = RecordingAgentModel()
    agent = _agent(mw, model, context_schema=dict)
    agent.invoke(
        {"messages": [HumanMessage("I write Go.")]},
        {"configurable": {"thread_id": "A"}},
        context={"user_id": "carol"},
    )
    assert mw.flush(timeout=10)
    assert mw.get_memory("carol").facts
    assert not mw.get_memory("default").facts
    mw.close()


def test_capture_is_debounced_per_thread_across_turns(memory_config: MemoryConfig) -> None:
    """Three quick turns in one thread -> one extraction that sees all of them."""
    memory_config = memory_config.model_copy(update={"debounce_seconds": 30.0})
    extractor = _extractor(GO_FACT)
    mw = MemoryMiddleware(memory_config, model=extractor)
    agent = _agent(mw, RecordingAgentModel())
    for text in ("I write Go.", "At a fintech startup.", "Mostly payment APIs."):
        agent.invoke({"messages": [HumanMessage(text)]}, _cfg("A"))
    assert mw.flush(timeout=10)
    assert len(extractor.calls) == 1
    prompt = str(extractor.calls[0][-1].content)
    assert "I write Go." in prompt and "Mostly payment APIs." in prompt
    mw.close()


def test_without_checkpointer_conversations_still_captured(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor(GO_FACT))
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw])
    agent.invoke({"messages": [HumanMessage("I write Go.")]})
    assert mw.flush(timeout=10)
    memory = mw.get_memory()
    assert [f.content for f in memory.facts] == [GO_FACT]
    assert all(key.startswith("anon-") for key in memory.watermarks)
    mw.close()


def test_agent_model_is_the_fallback_extraction_model(memory_config: MemoryConfig) -> None:
    """No model configured anywhere: the agent's own model extracts."""
    model = RecordingAgentModel()
    mw = MemoryMiddleware(memory_config)
    agent = _agent(mw, model)
    agent.invoke({"messages": [HumanMessage("I write Go.")]}, _cfg("A"))
    calls_before = len(model.seen)
    assert mw.flush(timeout=10)
    # the recording model answers "answer N" (not JSON): extraction is attempted with it and fails
    assert len(model.seen) > calls_before
    assert any(
        "extraction" in str(m.content).lower() or "memory" in str(m.content).lower()
        for m in model.seen[-1]
    )
    mw.close()


def test_corrupted_memory_file_never_breaks_the_agent(
    memory_config: MemoryConfig, caplog: pytest.LogCaptureFixture
) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor(GO_FACT))
    path = Path(mw.service._storage.describe(mw.scope("alice")))
    path.parent.mkdir(parents=True)
    path.write_text("{ not json", encoding="utf-8")
    model = RecordingAgentModel()
    agent = _agent(mw, model)

    result = agent.invoke({"messages": [HumanMessage("Hello there, I write Go.")]}, _cfg("A"))
    assert result["messages"][-1].content.startswith("answer")
    assert "<memory>" not in system_text(model.seen[-1])
    assert any(str(path) in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert mw.flush(timeout=10)
    asides = list(path.parent.glob(f"{path.name}.corrupted-*"))
    assert [a.read_text(encoding="utf-8") for a in asides] == ["{ not json"]  # kept aside
    assert mw.get_memory("alice").facts  # and memory works again from empty
    mw.close()

    strict = MemoryMiddleware(
        memory_config,
        model=_extractor(GO_FACT),
        storage=JSONFileStorage(memory_config.storage_path, on_corruption="raise"),
    )
    path.write_text("{ broken again", encoding="utf-8")
    model = RecordingAgentModel()
    _agent(strict, model).invoke({"messages": [HumanMessage("Hi, I write Go.")]}, _cfg("B"))
    assert "<memory>" not in system_text(model.seen[-1])
    strict.close(timeout=1)
    assert path.read_text(encoding="utf-8") == "{ broken again"  # "raise": never touched


def test_injection_disabled_still_captures(memory_config: MemoryConfig) -> None:
    cfg = memory_config.model_copy(update={"injection_enabled": False})
    mw = MemoryMiddleware(cfg, model=_extractor(GO_FACT))
    model = RecordingAgentModel()
    agent = _agent(mw, model)
    agent.invoke({"messages": [HumanMessage("I write Go.")]}, _cfg("A"))
    assert mw.flush(timeout=10)
    agent.invoke({"messages": [HumanMessage("Which language?")]}, _cfg("B"))
    assert mw.get_memory("alice").facts
    assert "<memory>" not in system_text(model.seen[-1])
    mw.close()


def _two_agent_yaml(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            memory:
              enabled: true
              storage_path: {tmp_path / "store"}
              debounce_seconds: 0.05
            """
        ),
        encoding="utf-8",
    )
    agent_dir = tmp_path / "agents" / "quiet"
    agent_dir.mkdir(parents=True)
    (agent_dir / "config.yaml").write_text(
        "name: quiet\ndescription: an agent without memory\nmemory:\n  enabled: false\n",
        encoding="utf-8",
    )
    return config


def test_yaml_two_agents_one_disabled(tmp_path: Path) -> None:
    """Per-agent switch by name: `quiet` neither injects nor captures; `coder` does both."""
    config = _two_agent_yaml(tmp_path)
    coder_extractor = _extractor(GO_FACT)
    quiet_extractor = _extractor("The user likes tea")
    coder = MemoryMiddleware.from_config(config, agent_name="coder", model=coder_extractor)
    quiet = MemoryMiddleware.from_config(config, agent_name="quiet", model=quiet_extractor)
    assert coder.active and not quiet.active

    coder_model, quiet_model = RecordingAgentModel(), RecordingAgentModel()
    coder_agent = _agent(coder, coder_model)
    quiet_agent = _agent(quiet, quiet_model)
    coder_agent.invoke({"messages": [HumanMessage("I write Go.")]}, _cfg("c1"))
    quiet_agent.invoke({"messages": [HumanMessage("I like tea.")]}, _cfg("q1"))
    assert coder.flush(timeout=10) and quiet.flush(timeout=10)

    assert len(coder_extractor.calls) == 1
    assert quiet_extractor.calls == []  # no capture
    assert not quiet.get_memory("alice").facts

    # even with a memory document present for the quiet agent, nothing is injected
    quiet.service._storage.save(quiet.scope("alice"), coder.get_memory("alice"), 0)
    quiet_agent.invoke({"messages": [HumanMessage("Which language?")]}, _cfg("q2"))
    assert "<memory>" not in system_text(quiet_model.seen[-1])
    coder_agent.invoke({"messages": [HumanMessage("Which language?")]}, _cfg("c2"))
    assert GO_FACT in system_text(coder_model.seen[-1])
    coder.close()
    quiet.close()


def test_no_argument_constructor_reads_deermem_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _two_agent_yaml(tmp_path)
    monkeypatch.setenv("DEERMEM_CONFIG", str(config))
    mw = MemoryMiddleware()
    assert mw.config.debounce_seconds == 0.05
    assert mw.agent_name == "__default__"
    quiet = MemoryMiddleware(agent_name="quiet")
    assert not quiet.active
    assert quiet.agent_name == "quiet"


def test_pending_update_is_flushed_at_interpreter_exit(tmp_path: Path) -> None:
    """A process that exits during the debounce still stores its update (bounded atexit flush),
    through the real ChatOpenAI structured-output path."""
    import subprocess
    import sys

    from deermem_middleware import JSONFileStorage, MemoryScope

    script = textwrap.dedent(
        """
        import sys
        from langchain_core.messages import AIMessage, HumanMessage
        from deermem_middleware import MemoryConfig, MemoryMiddleware
        from deermem_middleware.testing import OpenAIStub, update_json

        stub = OpenAIStub([(200, update_json(facts=[("Remembered at exit", "context", 0.9)]))])
        config = MemoryConfig(storage_path=sys.argv[1], debounce_seconds=600, grounding="off")
        mw = MemoryMiddleware(config, model=stub.model())
        mw.capture(
            [HumanMessage("I am leaving soon.", id="h1"), AIMessage("Bye!", id="a1")],
            user_id="u",
            thread_id="t",
        )
        print("exiting with", mw.service._scheduler.pending(), "pending", flush=True)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "exiting with 1 pending" in done.stdout
    assert "cannot schedule new futures" not in done.stderr
    memory = JSONFileStorage(tmp_path).load(MemoryScope("u")).memory
    assert [f.content for f in memory.facts] == ["Remembered at exit"]


def _conversation(n: int, text: str) -> list[Any]:
    from langchain_core.messages import AIMessage

    messages: list[Any] = []
    for i in range(n):
        messages += [HumanMessage(f"{text} ({i})", id=f"h{i}"), AIMessage(f"noted {i}", id=f"a{i}")]
    return messages


def test_burst_of_captures_is_one_extraction_and_threads_are_independent(
    memory_config: MemoryConfig,
) -> None:
    """5 captures of one growing thread -> 1 extraction; 50 threads -> 50 extractions."""
    extractor = _extractor(GO_FACT)
    mw = MemoryMiddleware(
        memory_config.model_copy(update={"debounce_seconds": 30.0}), model=extractor
    )
    for turn in range(1, 6):
        mw.capture(_conversation(turn, "I write Go"), user_id="alice", thread_id="burst")
    assert mw.flush(timeout=30)
    assert len(extractor.calls) == 1
    assert "I write Go (4)" in str(extractor.calls[0][-1].content)  # the newest capture won

    for thread in range(50):
        mw.capture(_conversation(1, f"thread {thread}"), user_id="alice", thread_id=f"t{thread}")
    assert mw.flush(timeout=60)
    assert len(extractor.calls) == 51
    assert len(mw.get_memory("alice").watermarks) == 51
    mw.close()


@pytest.mark.parametrize("name", ["a/b", "..", "a b", "用户", ""])
def test_agent_name_argument_is_validated_like_the_config(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="agent name"):
        MemoryMiddleware(MemoryConfig(storage_path=str(tmp_path)), agent_name=name)

"""The middleware in hosts like DeerFlow and the LangGraph server: its name, whose conversation a
run is (user, agent), and which runs are not the user's at all (subagents).

Real ``create_agent`` graphs throughout; the models are scripted fakes.
"""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.middleware import MIDDLEWARE_NAME
from deermem_middleware.runtime.ids import (
    is_delegated_run,
    resolve_agent_name,
    resolve_user_id,
)
from deermem_middleware.testing import RecordingAgentModel, ScriptedChatModel, update_json


def _extractor() -> ScriptedChatModel:
    return ScriptedChatModel(
        answers=[update_json(facts=[("The user writes Go services", "knowledge", 0.95)])]
    )


class _ToolCallingModel(GenericFakeChatModel):
    """Replays AI messages, tool calls included; tool binding is a no-op."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _extracted_threads(extractor: ScriptedChatModel) -> list[str]:
    """The conversations the extraction model was asked about, as text."""
    return ["\n".join(str(m.content) for m in call) for call in extractor.calls]


# -- the name -------------------------------------------------------------------------------


class MemoryMiddleware_(AgentMiddleware):  # renamed below to DeerFlow's class name
    """Stands in for DeerFlow's own ``MemoryMiddleware``, which DeerFlow always adds: same class
    name, so the same default middleware name."""

    def __init__(self) -> None:
        super().__init__()
        self.ran = 0

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.ran += 1


MemoryMiddleware_.__name__ = "MemoryMiddleware"


def test_runs_beside_deerflows_own_memory_middleware(memory_config: MemoryConfig) -> None:
    theirs = MemoryMiddleware_()
    assert theirs.name == "MemoryMiddleware"
    extractor = _extractor()
    ours = MemoryMiddleware(memory_config, model=extractor)
    assert ours.name == MIDDLEWARE_NAME != theirs.name
    agent = create_agent(
        RecordingAgentModel(), [], middleware=[theirs, ours], checkpointer=InMemorySaver()
    )
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice"}},
    )
    assert ours.flush(timeout=10)
    assert theirs.ran == 1
    assert [f.content for f in ours.get_memory("alice").facts] == ["The user writes Go services"]
    ours.close()


def test_two_of_ours_with_one_name_are_still_refused(memory_config: MemoryConfig) -> None:
    """The name is fixed, so LangChain's duplicate check still catches a doubled middleware."""
    first = MemoryMiddleware(memory_config)
    second = MemoryMiddleware(memory_config)
    with pytest.raises(AssertionError, match="duplicate"):
        create_agent(RecordingAgentModel(), [], middleware=[first, second])
    first.close()
    second.close()


# -- who: the resolvers -------------------------------------------------------------------------


class _Runtime:
    def __init__(self, context: Any = None) -> None:
        self.context = context


class _ServerUser:
    """The LangGraph server's user object (``BaseUser``): an ``identity`` property."""

    def __init__(self, identity: str) -> None:
        self._identity = identity

    @property
    def identity(self) -> str:
        return self._identity


@pytest.mark.parametrize(
    ("context", "configurable", "expected"),
    [
        ({"user_id": "ctx"}, {"user_id": "conf"}, "ctx"),
        (None, {"user_id": "conf", "langgraph_auth_user_id": "auth"}, "conf"),
        (None, {"langgraph_auth_user_id": "auth-7"}, "auth-7"),
        (None, {"langgraph_auth_user": _ServerUser("server-user")}, "server-user"),
        (None, {"langgraph_auth_user": {"identity": "dict-user"}}, "dict-user"),
        ({"user_id": "  "}, {"langgraph_auth_user_id": "auth"}, "auth"),
        ({"user_id": 42}, {}, "42"),
        (None, {}, "default"),
    ],
)
def test_user_id_sources_in_order(
    context: Any, configurable: dict[str, Any], expected: str
) -> None:
    assert resolve_user_id(_Runtime(context), {"configurable": configurable}) == expected


def test_agent_name_from_context_then_configurable() -> None:
    both = {"configurable": {"agent_name": "from-conf"}}
    assert resolve_agent_name(_Runtime({"agent_name": "from-ctx"}), both) == "from-ctx"
    assert resolve_agent_name(_Runtime(None), both) == "from-conf"
    assert resolve_agent_name(_Runtime(None), {"configurable": {}}) is None


@pytest.mark.parametrize(
    ("config", "delegated"),
    [
        ({"configurable": {"checkpoint_ns": "model:1"}}, False),
        ({"configurable": {"checkpoint_ns": "agent:1|model:2"}}, False),  # an agent node
        ({"configurable": {"checkpoint_ns": "tools:1|model:2"}}, True),  # under a tool call
        ({"metadata": {"langgraph_checkpoint_ns": "tools:1|after_agent:2"}}, True),
        ({"configurable": {"is_subagent": True}}, True),
        ({"metadata": {"subagent_type": "general-purpose"}}, True),
        ({"configurable": {"is_subagent": False}}, False),
    ],
)
def test_delegated_runs(config: dict[str, Any], delegated: bool) -> None:
    assert is_delegated_run(_Runtime(None), config) is delegated


def test_a_context_marker_is_a_delegated_run() -> None:
    assert is_delegated_run(_Runtime({"subagent_name": "researcher"}), {})


# -- who: in real runs ----------------------------------------------------------------------


def test_server_identity_decides_whose_memory_it_is(memory_config: MemoryConfig) -> None:
    """A LangGraph server run with custom auth: the user is ``langgraph_auth_user_id``."""
    mw = MemoryMiddleware(memory_config, model=_extractor())
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1", "langgraph_auth_user_id": "user-9"}},
    )
    assert mw.flush(timeout=10)
    assert mw.get_memory("user-9").facts
    assert not mw.get_memory("default").facts
    mw.close()


def _two_agent_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            memory:
              storage_path: {tmp_path / "memory"}
              debounce_seconds: 3600
              flush_on_exit_seconds: null
              embeddings: none
              agents:
                quiet:
                  enabled: false
            """
        ),
        encoding="utf-8",
    )
    return path


def test_agent_name_comes_from_the_run_when_none_was_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built with no arguments (DeerFlow's ``extensions.middlewares``), the middleware files each
    run under the agent the run names; an agent with its own settings (``quiet``: disabled) is
    honoured per run, and one without shares the default engine."""
    monkeypatch.setenv("DEERMEM_CONFIG", str(_two_agent_config(tmp_path)))
    extractor = _extractor()
    mw = MemoryMiddleware(model=extractor)
    assert mw.agent_name == "__default__"
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    for thread, name in (("t-coder", "coder"), ("t-quiet", "quiet"), ("t-plain", None)):
        context = {"user_id": "alice", **({"agent_name": name} if name else {})}
        agent.invoke(
            {"messages": [HumanMessage(f"I write Go services ({thread}).")]},
            {"configurable": {"thread_id": thread}},
            context=context,
        )
    assert mw.flush(timeout=10)
    assert len(extractor.calls) == 2  # coder and the default agent; quiet captures nothing
    assert mw.get_memory("alice", "coder").facts
    assert mw.get_memory("alice").facts  # the run without an agent name
    assert not mw.get_memory("alice", "quiet").facts
    engine, agent_name = mw._engine_for("coder")
    assert engine is mw.service and agent_name == "coder"
    quiet_engine, _ = mw._engine_for("quiet")
    assert quiet_engine is not mw.service and not quiet_engine.active
    mw.close()
    assert quiet_engine.closed


def test_an_explicit_agent_name_wins_over_the_run(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor(), agent_name="coder")
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice", "agent_name": "other"}},
    )
    assert mw.flush(timeout=10)
    assert mw.get_memory("alice", "coder").facts
    assert not mw.get_memory("alice", "other").facts
    mw.close()


def test_an_invalid_agent_name_from_a_run_falls_back_to_the_default_agent(
    memory_config: MemoryConfig, caplog: pytest.LogCaptureFixture
) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor())
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice", "agent_name": "../etc"}},
    )
    assert mw.flush(timeout=10)
    assert mw.get_memory("alice").facts
    assert "not a valid agent name" in caplog.text
    mw.close()


# -- subagents --------------------------------------------------------------------------------


@pytest.fixture
def other_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A persistent event loop on its own thread, where a host runs its subagents."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.mark.parametrize("how", ["invoke", "other_loop"])
def test_a_subagent_run_from_a_tool_is_not_captured(
    memory_config: MemoryConfig, how: str, request: pytest.FixtureRequest
) -> None:
    """Configured middlewares reach subagents too (DeerFlow adds ``extensions.middlewares`` to
    both). The subagent's "user" message is the lead's instruction: never the user's memory."""
    extractor = _extractor()
    mw = MemoryMiddleware(memory_config, model=extractor)
    sub_model = RecordingAgentModel(answers=["sub-agent result"])
    subagent = create_agent(sub_model, [], middleware=[mw])
    loop = request.getfixturevalue("other_loop") if how == "other_loop" else None

    @tool
    def delegate(task: str) -> str:
        """Hand a task to the research subagent."""
        payload = {"messages": [HumanMessage(task)]}
        if loop is None:
            out = subagent.invoke(payload)
        else:  # submitted to another loop, as hosts with a subagent loop do
            out = asyncio.run_coroutine_threadsafe(subagent.ainvoke(payload), loop).result(30)
        # a long subagent run outlasts the debounce: whatever it queued runs now
        assert mw.flush(timeout=10)
        return str(out["messages"][-1].content)

    lead_model = _ToolCallingModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "delegate", "args": {"task": "SECRET-TASK list files"}, "id": "c"}
                    ],
                ),
                AIMessage("Done: the files are listed."),
            ]
        )
    )
    lead = create_agent(lead_model, [delegate], middleware=[mw], checkpointer=InMemorySaver())
    lead.invoke(
        {"messages": [HumanMessage("I write Go services; list my files.")]},
        {"configurable": {"thread_id": "lead-1", "user_id": "alice"}},
    )
    assert sub_model.calls, "the subagent ran"
    assert mw.flush(timeout=10)
    conversations = _extracted_threads(extractor)
    assert len(conversations) == 1  # the lead's turn only
    assert "I write Go services" in conversations[0]
    assert "SECRET-TASK" not in conversations[0].split("<conversation>")[-1]
    mw.close()


def test_a_subagent_gets_no_user_memory_injected(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=_extractor())
    seed = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    seed.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "seed", "user_id": "alice"}},
    )
    assert mw.flush(timeout=10)
    assert mw.get_memory("alice").facts
    sub_model = RecordingAgentModel(answers=["ok"])
    subagent = create_agent(sub_model, [], middleware=[mw])
    subagent.invoke(
        {"messages": [HumanMessage("Which language does the user write?")]},
        {"configurable": {"user_id": "alice", "is_subagent": True}},
    )
    assert all("<memory>" not in str(m.content) for m in sub_model.calls[-1])
    mw.close()


def test_an_agent_that_is_a_node_of_a_bigger_graph_is_still_captured(
    memory_config: MemoryConfig,
) -> None:
    extractor = _extractor()
    mw = MemoryMiddleware(memory_config, model=extractor)
    inner = create_agent(RecordingAgentModel(), [], middleware=[mw])
    outer = StateGraph(MessagesState)
    outer.add_node("assistant", inner)
    outer.add_edge(START, "assistant")
    graph = outer.compile(checkpointer=InMemorySaver())
    graph.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice"}},
    )
    assert mw.flush(timeout=10)
    assert len(extractor.calls) == 1
    assert mw.get_memory("alice").facts
    mw.close()


def test_deerflow_per_user_agent_settings_apply_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeerFlow's custom agents are per user: alice's ``coder`` has memory off in
    ``users/alice/agents/coder/config.yaml``; bob's ``coder`` has no file of its own."""
    home = tmp_path / "deerflow-home"
    monkeypatch.setenv("DEER_FLOW_HOME", str(home))
    for name in ("DEERMEM_CONFIG", "DEER_FLOW_PROJECT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        "config_version: 1\nsandbox: {use: example:Sandbox}\n"
        "memory:\n  debounce_seconds: 3600\n  flush_on_exit_seconds: null\n  embeddings: none\n",
        encoding="utf-8",
    )
    agent_file = home / "users" / "alice" / "agents" / "coder" / "config.yaml"
    agent_file.parent.mkdir(parents=True)
    agent_file.write_text("name: coder\nmemory:\n  enabled: false\n", encoding="utf-8")
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(config))
    extractor = _extractor()
    mw = MemoryMiddleware(model=extractor)
    assert str(mw.config.storage_path).startswith(str(home))
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    for user in ("alice", "bob"):
        agent.invoke(
            {"messages": [HumanMessage("I write Go services.")]},
            {"configurable": {"thread_id": f"t-{user}"}},
            context={"user_id": user, "agent_name": "coder"},
        )
    assert mw.flush(timeout=10)
    assert len(extractor.calls) == 1
    assert mw.get_memory("bob", "coder").facts
    assert not mw.get_memory("alice", "coder").facts
    mw.close()


# -- the documented DeerFlow setups ---------------------------------------------------------


def _load_class_path(path: str) -> type[AgentMiddleware]:
    """What DeerFlow's ``extensions.middlewares`` loader does with an entry: import
    ``module:Class``, check it is an ``AgentMiddleware``; the caller builds it with no
    arguments."""
    import importlib

    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, AgentMiddleware)
    return cls


def test_the_two_line_middleware_setup_runs_in_a_deerflow_shaped_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/deerflow.md, "As a middleware": ``memory.manager_class: noop`` (DeerFlow's own memory
    stores nothing) and our class in ``extensions.middlewares``; DeerFlow's own middleware
    stays in the stack, as DeerFlow always adds it."""
    import yaml

    home = tmp_path / ".deer-flow"
    monkeypatch.setenv("DEER_FLOW_HOME", str(home))
    for name in ("DEERMEM_CONFIG", "DEER_FLOW_PROJECT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    fixture = Path(__file__).parents[2] / "fixtures" / "deerflow_config" / "head_shape.yaml"
    text = fixture.read_text(encoding="utf-8")
    text = text.replace("  manager_class: deermem\n", "  manager_class: noop\n", 1)
    text += "\nextensions:\n  middlewares:\n    - deermem_middleware:MemoryMiddleware\n"
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(config))
    entries = yaml.safe_load(text)["extensions"]["middlewares"]

    built = [_load_class_path(entry)() for entry in entries]  # per request, no arguments
    ours = built[0]
    assert isinstance(ours, MemoryMiddleware)
    ours.service.use_model(_extractor())  # the host's default model would be used here
    theirs = MemoryMiddleware_()
    agent = create_agent(
        RecordingAgentModel(), [], middleware=[theirs, *built], checkpointer=InMemorySaver()
    )
    agent.invoke(
        {"messages": [HumanMessage("I write Go services.")]},
        {"configurable": {"thread_id": "t1"}},
        context={"user_id": "alice", "thread_id": "t1"},
    )
    assert ours.flush(timeout=10)
    assert theirs.ran == 1
    assert ours.get_memory("alice").facts
    files = sorted(p.relative_to(home).as_posix() for p in home.rglob("*.json"))
    assert files and all(f.startswith("deermem_middleware/") for f in files), files
    # the next request builds it again: the same engine, no new threads
    threads = set(threading.enumerate())  # others may end meanwhile; none may start
    again = _load_class_path(entries[0])()
    assert again.service is ours.service
    assert [t.name for t in threading.enumerate() if t not in threads] == []
    ours.close()
    again.close()

"""The node pair in a hand-built StateGraph: inject node -> model node -> capture node."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deermem_middleware import (
    MemoryConfig,
    MemoryMiddleware,
    MemoryNodes,
    MemoryService,
    MemoryState,
)
from deermem_middleware.memory.manual import add_fact
from deermem_middleware.testing import (
    RecordingAgentModel,
    ScriptedChatModel,
    system_text,
    update_json,
)

GO_FACT = "The user writes backend services in Go"


def _graph(nodes: MemoryNodes, model: RecordingAgentModel) -> Any:
    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.with_memory(state))]}

    async def acall_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(nodes.with_memory(state))]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(MemoryState)
    builder.add_node("memory_inject", nodes.inject)
    builder.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    builder.add_node("memory_capture", nodes.capture)
    builder.add_edge(START, "memory_inject")
    builder.add_edge("memory_inject", "model")
    builder.add_edge("model", "memory_capture")
    builder.add_edge("memory_capture", END)
    return builder.compile(checkpointer=InMemorySaver())


def _middleware(config: MemoryConfig) -> MemoryMiddleware:
    extractor = ScriptedChatModel(answers=[update_json(facts=[(GO_FACT, "knowledge", 0.95)])])
    return MemoryMiddleware(config, model=extractor)


def _cfg(thread: str, user: str = "alice") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def _persisted(graph: Any, thread: str) -> str:
    state = graph.get_state({"configurable": {"thread_id": thread}})
    return "\n".join(str(m.content) for m in state.values["messages"])


def test_node_pair_invoke(memory_config: MemoryConfig) -> None:
    mw = _middleware(memory_config)
    model = RecordingAgentModel()
    graph = _graph(MemoryNodes(mw), model)

    graph.invoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert mw.flush(timeout=10)
    result = graph.invoke({"messages": [HumanMessage("Which language?")]}, _cfg("B"))

    assert GO_FACT in system_text(model.seen[-1])
    assert "memory_context" not in result  # ephemeral: gone after the model step
    assert "<memory>" not in _persisted(graph, "B")
    mw.close()


async def test_node_pair_ainvoke(memory_config: MemoryConfig) -> None:
    mw = _middleware(memory_config)
    model = RecordingAgentModel()
    graph = _graph(MemoryNodes(mw), model)

    await graph.ainvoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert await mw.aflush(timeout=10)
    await graph.ainvoke({"messages": [HumanMessage("Which language?")]}, _cfg("B"))

    assert GO_FACT in system_text(model.seen[-1])
    assert "<memory>" not in _persisted(graph, "B")
    other = await graph.ainvoke({"messages": [HumanMessage("Which language?")]}, _cfg("C", "bob"))
    assert other["messages"][-1].content.startswith("answer")
    assert GO_FACT not in system_text(model.seen[-1])
    await mw.aclose()


def test_with_memory_merges_into_leading_system_message(memory_config: MemoryConfig) -> None:
    nodes = MemoryNodes(_middleware(memory_config))
    state = {
        "messages": [SystemMessage("Be brief."), HumanMessage("hi")],
        "memory_context": "<memory>x</memory>",
    }
    merged = nodes.with_memory(state)
    assert len(merged) == 2
    assert merged[0].content == "Be brief.\n\n<memory>x</memory>"
    assert nodes.with_memory({"messages": [HumanMessage("hi")]})[0].type == "human"


def test_wrap_model_touches_no_state(memory_config: MemoryConfig) -> None:
    """The wrapper alternative: memory added inside the model runnable, nothing in state."""
    mw = _middleware(memory_config)
    nodes = MemoryNodes(mw)
    model = RecordingAgentModel()
    wrapped = nodes.wrap_model(model)

    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [wrapped.invoke(state["messages"])]}

    builder = StateGraph(MemoryState)
    builder.add_node("model", call_model)
    builder.add_node("memory_capture", nodes.capture)
    builder.add_edge(START, "model")
    builder.add_edge("model", "memory_capture")
    builder.add_edge("memory_capture", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    graph.invoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert mw.flush(timeout=10)
    graph.invoke({"messages": [HumanMessage("Which language?")]}, _cfg("B"))
    assert GO_FACT in system_text(model.seen[-1])
    checkpoints = list(graph.checkpointer.list({"configurable": {"thread_id": "B"}}))
    assert all("memory_context" not in c.checkpoint["channel_values"] for c in checkpoints)
    mw.close()


def test_disabled_middleware_nodes_do_nothing(memory_config: MemoryConfig) -> None:
    mw = _middleware(memory_config.model_copy(update={"enabled": False}))
    model = RecordingAgentModel()
    graph = _graph(MemoryNodes(mw), model)
    graph.invoke({"messages": [HumanMessage("I write backend services in Go.")]}, _cfg("A"))
    assert mw.flush(timeout=10)
    assert not mw.get_memory("alice").facts


# -- per-agent settings -----------------------------------------------------------------------


def _agents_yaml(tmp_path: Any) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(
        "memory:\n"
        f"  storage_path: {tmp_path / 'memory'}\n"
        "  debounce_seconds: 3600\n"
        "  flush_on_exit_seconds: null\n"
        "  embeddings: none\n"
        "  top_k: 4\n"
        "  agents:\n"
        "    brief: {top_k: 1}\n"
        "    quiet: {enabled: false}\n",
        encoding="utf-8",
    )
    return path


def _agent_cfg(thread: str, agent: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "alice", "agent_name": agent}}


def test_node_pair_honours_each_runs_agent_settings(tmp_path: Any) -> None:
    """Built on a middleware with no agent named (as DeerFlow builds it), the node pair serves
    each run with its agent's own settings, as the middleware does: ``brief`` (``top_k: 1``)
    gets one fact, ``quiet`` (``enabled: false``) neither injects nor captures."""
    extractor = ScriptedChatModel(answers=[update_json(facts=[(GO_FACT, "knowledge", 0.95)])])
    mw = MemoryMiddleware.from_config(_agents_yaml(tmp_path), model=extractor)
    nodes = MemoryNodes(mw)
    model = RecordingAgentModel()
    graph = _graph(nodes, model)
    topics = ("Go services", "Go tooling", "Go testing", "Go modules")
    for agent in ("brief", "quiet", "coder"):
        for i, topic in enumerate(topics):
            mw.service.change(
                mw.scope("alice", agent),
                lambda m, i=i, topic=topic: add_fact(
                    m, f"The user asks about {topic}", fact_id=f"f{i}", now="2026-01-01T00:00:00Z"
                ),
            )

    shown = {}
    for agent in ("coder", "brief", "quiet"):
        graph.invoke({"messages": [HumanMessage("Go questions?")]}, _agent_cfg(f"t-{agent}", agent))
        shown[agent] = system_text(model.seen[-1]).count("The user asks about")
    assert shown == {"coder": 4, "brief": 1, "quiet": 0}

    assert mw.flush(timeout=10)
    assert len(extractor.calls) == 2  # coder and brief; quiet captures nothing
    mw.close()


def test_node_pair_over_an_engine_scopes_each_run_by_its_agent(memory_config: MemoryConfig) -> None:
    """Over a bare engine with no agent configured, a run naming its agent reads that agent's
    memory, as the middleware's runs do."""
    engine = MemoryService(memory_config)
    model = RecordingAgentModel()
    graph = _graph(MemoryNodes(engine), model)
    engine.change(
        engine.scope("alice", "coder"),
        lambda m: add_fact(m, GO_FACT, fact_id="f1", now="2026-01-01T00:00:00Z"),
    )
    graph.invoke({"messages": [HumanMessage("Which language?")]}, _agent_cfg("t1", "coder"))
    assert GO_FACT in system_text(model.seen[-1])
    graph.invoke({"messages": [HumanMessage("Which language?")]}, _agent_cfg("t2", "writer"))
    assert GO_FACT not in system_text(model.seen[-1])
    engine.close()

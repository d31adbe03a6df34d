"""End to end on DeerFlow itself: its lead agent, its gateway, its config, with our memory.

Everything DeerFlow does here is DeerFlow's own code at its locked versions (fixtures in
``conftest.py``): ``config.yaml`` loaded by ``get_app_config()``, the backend built by
``get_memory_manager()``, turns run by ``make_lead_agent``'s graph with ``astream``, the
memory API served by DeerFlow's router behind DeerFlow's ``AuthMiddleware``. The model is the
bundled SmolLM2-135M behind llama.cpp's OpenAI-compatible server, as ChatOpenAI entries of
DeerFlow's ``models:``. It is tiny, so what it extracts is not asserted beyond "something was
stored"; the assertions that must be exact use facts added deterministically (DeerFlow's
gateway, our ``deermem`` command, DeerFlow's memory file of another user carried over).

Where DeerFlow differs from a first reading of the scenarios (measured on DeerFlow's code and
in these runs, not assumed):

- **Memory is not in the system prompt.** ``apply_prompt_template`` builds a static system
  prompt (identical across users and threads, for prefix caching; 11,947 characters here).
  DeerFlow's ``DynamicContextMiddleware`` calls ``get_context`` once per thread, before the
  first model call of the thread's first turn (``abefore_agent``, in a worker thread, given 5
  seconds), and puts the answer, wrapped in ``<memory>``, into a hidden ``HumanMessage`` (id
  ``<message id>__memory``) of the thread's state; the model receives it as a user-role message
  after the (coalesced) system message, and the thread's later turns reuse that frozen block.
  So "the next thread's prompt" is asserted on the messages the model receives (recorded
  through the run's callbacks) and on that state message. Our middleware, in the two-line
  setup, appends to the system message of every model call instead.
- **``get_context`` gets no thread and no turn.** DeerFlow calls
  ``get_context(user_id=..., agent_name=...)`` without ``thread_id`` and never calls
  ``on_turn_start``, so our ranking by the turn's message has nothing to rank by there.
  Captures arrive through ``aadd`` (the async run path) with all of the thread's messages.
  The gateway's routes pass ``user_id`` (the caller's) and never ``agent_name``.
- **Tool mode: the model's call is scripted.** SmolLM2-135M never called ``memory_search``
  (asked "Which editor do I use?", "Use the memory_search tool to look up my editor.", "Call
  memory_search with query 'editor'.": three plain answers, no tool call), so the model's call
  is written into the thread as the model's output (``update_state(..., as_node="model")``) and
  DeerFlow's graph goes on from there: its tool node runs DeerFlow's ``memory_search`` with the
  run's runtime context, then the real model answers.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from tests.deerflow_host.conftest import (
    EXTRACTION_MODEL,
    OTHER_USER,
    OTHER_USERS_FACT,
    DeerFlowHost,
    ManagerCalls,
    text_of,
)

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
BACKEND_CONFIG = {"debounce_seconds": 0.5, "embeddings": "none"}
FLUSH_SECONDS = 240
"""DeerFlow's ``memory.shutdown_flush_timeout_seconds`` here (the tiny model on two shared
cores takes seconds; the bound is for a loaded CI machine)."""
USER = "maya"
SAYS = (
    "Please remember this about me: my name is Maya, I am a backend engineer in Lisbon, "
    "I write Go every day and I use Neovim."
)
EDITOR_FACT = "Maya configures every project for the Helix editor"
MEMORY_TOOLS = {"memory_search", "memory_add", "memory_update", "memory_delete"}


def memory_messages(messages: list[Any]) -> list[str]:
    """The texts of the user-role messages that are a ``<memory>`` block (DeerFlow's system
    prompt itself mentions ``<memory>`` tags, in its instructions)."""
    texts = [text_of(m).strip() for m in messages if isinstance(m, HumanMessage)]
    return [t for t in texts if t.startswith("<memory>")]


def stored_something(memory: dict[str, Any]) -> bool:
    summaries = [s.get("summary") for group in ("user", "history") for s in memory[group].values()]
    return bool(memory["facts"]) or any(summaries)


def manager_mode(host: DeerFlowHost, **memory: Any) -> Any:
    """DeerFlow configured with our backend; the manager DeerFlow built (and warmed)."""
    from deermem_middleware.deerflow import DeermemMemoryManager  # imports DeerFlow

    host.write_config(
        {
            "manager_class": MANAGER_CLASS,
            "shutdown_flush_timeout_seconds": FLUSH_SECONDS,
            "backend_config": dict(BACKEND_CONFIG),
            **memory,
        }
    )
    manager = host.memory_manager()
    assert isinstance(manager, DeermemMemoryManager), type(manager)
    return manager


# -- 1. DeerFlow's memory backend ------------------------------------------------------------------


def test_manager_mode_stores_a_real_turn_and_a_gateway_fact_reaches_the_next_thread(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls
) -> None:
    """``manager_class`` ours: a real turn is captured and extracted, shows on the Memory page,
    and a fact added there is in the memory DeerFlow gives the model in the next thread."""
    host = deerflow_host
    manager = manager_mode(host)
    assert manager.mode == "middleware"

    first = host.run_turn(USER, "thread-1", SAYS)
    assert first.model_calls and first.answers, "the real model did not answer"
    # DeerFlow asked for the user's memory once, before the first model call: no thread, no turn
    [context_call] = manager_calls.of("get_context")
    assert context_call.kwargs == {"user_id": USER, "agent_name": None}
    assert manager_calls.of("on_turn_start") == []
    # ... and handed the finished turn to our backend, on the async path
    [capture] = manager_calls.of("aadd")
    thread_id, messages = capture.args
    assert thread_id == "thread-1"
    assert capture.kwargs["user_id"] == USER
    assert capture.kwargs["agent_name"] is None
    assert any(isinstance(m, HumanMessage) and SAYS in text_of(m) for m in messages)
    assert any(isinstance(m, AIMessage) for m in messages)

    # the gateway's shutdown drain runs the extraction with DeerFlow's default model
    assert host.shutdown_flush(), "the extraction did not finish within the flush budget"
    with host.gateway() as gateway:
        response = gateway.get("/api/memory", headers=host.as_user(USER))
        assert response.status_code == 200, response.text
        memory = response.json()
        assert stored_something(memory), f"the real model's extraction stored nothing: {memory}"

        # a fact added on DeerFlow's Memory page ...
        response = gateway.post(
            "/api/memory/facts",
            json={"content": EDITOR_FACT, "category": "preference", "confidence": 0.95},
            headers=host.as_user(USER),
        )
        assert response.status_code == 200, response.text
        [added] = [f for f in response.json()["facts"] if f["content"] == EDITOR_FACT]
        assert added["source"] == "manual"

    # ... is in the memory DeerFlow gives the model in the user's next thread
    manager_calls.clear()
    second = host.run_turn(USER, "thread-2", "Which editor should I set up for my Go service?")
    [context_call] = manager_calls.of("get_context")
    assert context_call.kwargs == {"user_id": USER, "agent_name": None}
    [block] = memory_messages(second.model_calls[0])
    assert EDITOR_FACT in block
    assert block.endswith("</memory>")
    [state_block] = [
        m
        for m in second.state["messages"]
        if isinstance(m, HumanMessage) and str(m.id).endswith("__memory")
    ]
    assert EDITOR_FACT in text_of(state_block)
    assert state_block.additional_kwargs.get("hide_from_ui") is True
    # another user's memory never reaches Maya's thread
    assert OTHER_USERS_FACT not in "\n".join(text_of(m) for m in second.model_calls[0])

    host.assert_deerflow_files_untouched()


def test_manager_mode_every_memory_route_answers_through_our_backend(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls
) -> None:
    """The Memory page's routes (view, reload, export, import, clear, fact add/edit/delete)
    through DeerFlow's router and response models, with DeerFlow's status codes."""
    host = deerflow_host
    manager_mode(host)
    maya = host.as_user(USER)
    with host.gateway() as gateway:
        view = gateway.get("/api/memory", headers=maya)
        assert view.status_code == 200, view.text
        assert view.json()["facts"] == []
        assert view.json()["lastUpdated"]

        # DeerFlow's own memory of another user, carried over from DeerFlow's file (read only)
        priya = gateway.get("/api/memory", headers=host.as_user(OTHER_USER))
        assert priya.status_code == 200, priya.text
        assert [f["content"] for f in priya.json()["facts"]] == [OTHER_USERS_FACT]

        add = gateway.post(
            "/api/memory/facts",
            json={"content": "Maya deploys to Kubernetes", "category": "context"},
            headers=maya,
        )
        assert add.status_code == 200, add.text
        [fact] = add.json()["facts"]
        assert fact["content"] == "Maya deploys to Kubernetes"
        assert fact["source"] == "manual"
        assert fact["createdAt"]
        fact_id = fact["id"]

        duplicate = gateway.post(
            "/api/memory/facts", json={"content": "Maya deploys to Kubernetes"}, headers=maya
        )
        assert duplicate.status_code == 409, duplicate.text

        edit = gateway.patch(
            f"/api/memory/facts/{fact_id}",
            json={"content": "Maya deploys to Kubernetes on GKE"},
            headers=maya,
        )
        assert edit.status_code == 200, edit.text
        [edited] = edit.json()["facts"]
        assert (edited["id"], edited["content"]) == (fact_id, "Maya deploys to Kubernetes on GKE")
        assert edited["category"] == "context"  # an omitted field is kept
        bad = gateway.patch(f"/api/memory/facts/{fact_id}", json={"confidence": 2}, headers=maya)
        assert bad.status_code == 422, bad.text  # refused by the router's request model
        missing = gateway.patch("/api/memory/facts/fact_nope", json={"content": "x"}, headers=maya)
        assert missing.status_code == 404, missing.text

        reload = gateway.post("/api/memory/reload", headers=maya)
        assert reload.status_code == 200, reload.text
        assert [f["id"] for f in reload.json()["facts"]] == [fact_id]

        export = gateway.get("/api/memory/export", headers=maya)
        assert export.status_code == 200, export.text
        exported = export.json()
        assert [f["content"] for f in exported["facts"]] == ["Maya deploys to Kubernetes on GKE"]

        imported_fact = {
            "id": "fact_imported",
            "content": "Maya reviews pull requests every morning",
            "category": "behavior",
            "confidence": 0.8,
            "createdAt": "2026-05-02T08:00:00Z",
            "source": "thread-old",
        }
        payload = {**exported, "facts": [imported_fact]}
        imported = gateway.post("/api/memory/import", json=payload, headers=maya)
        assert imported.status_code == 200, imported.text
        assert [f["content"] for f in imported.json()["facts"]] == [imported_fact["content"]]
        assert imported.json()["facts"][0]["id"] == "fact_imported"

        remove = gateway.delete("/api/memory/facts/fact_imported", headers=maya)
        assert remove.status_code == 200, remove.text
        assert remove.json()["facts"] == []
        gone = gateway.delete("/api/memory/facts/fact_imported", headers=maya)
        assert gone.status_code == 404, gone.text

        gateway.post("/api/memory/facts", json={"content": "Maya likes tea"}, headers=maya)
        clear = gateway.delete("/api/memory", headers=maya)
        assert clear.status_code == 200, clear.text
        assert clear.json()["facts"] == []
        assert gateway.get("/api/memory", headers=maya).json()["facts"] == []

        config = gateway.get("/api/memory/config", headers=maya)
        assert config.status_code == 200, config.text
        assert config.json()["manager_class"] == MANAGER_CLASS
        status = gateway.get("/api/memory/status", headers=maya)
        assert status.status_code == 200, status.text
        assert status.json()["data"]["facts"] == []

        # Priya's memory was not touched by any of Maya's calls
        priya = gateway.get("/api/memory", headers=host.as_user(OTHER_USER))
        assert [f["content"] for f in priya.json()["facts"]] == [OTHER_USERS_FACT]

    # every route reached our backend for the user named by the caller, never naming an agent
    routed = [c for c in manager_calls.calls if c.method not in ("warm", "search")]
    assert {c.method for c in routed} >= {
        "get_memory",
        "reload_memory",
        "create_fact",
        "update_fact",
        "delete_fact",
        "import_memory",
        "clear_memory",
    }
    assert {c.kwargs.get("user_id") for c in routed} == {USER, OTHER_USER}
    assert all(c.kwargs.get("agent_name") is None for c in routed)

    host.assert_deerflow_files_untouched()


# -- 2. the two-line middleware setup -------------------------------------------------------------


def test_two_line_middleware_setup_captures_and_injects_before_every_model_call(
    deerflow_host: DeerFlowHost, our_middlewares: list[Any]
) -> None:
    """``manager_class: noop`` + ``extensions.middlewares``: DeerFlow builds ours, which
    captures the real turn and injects a stored fact before every model call."""
    from langgraph.checkpoint.memory import InMemorySaver

    from deermem_middleware.cli import main as deermem

    host = deerflow_host
    host.write_config(
        {
            "manager_class": "noop",
            "shutdown_flush_timeout_seconds": FLUSH_SECONDS,
            # ours, flat (DeerFlow's noop backend ignores them)
            "debounce_seconds": 30,
            "embeddings": "none",
            "model_name": EXTRACTION_MODEL,
        },
        middlewares=["deermem_middleware:MemoryMiddleware"],
    )
    assert type(host.memory_manager()).__name__ == "NoopMemoryManager"

    first = host.run_turn(USER, "thread-1", SAYS)
    assert first.model_calls and first.answers, "the real model did not answer"
    # DeerFlow built ours from its config, with no arguments, beside its own MemoryMiddleware
    assert our_middlewares, "DeerFlow did not build deermem_middleware:MemoryMiddleware"
    middleware, args, kwargs = our_middlewares[-1]
    assert (args, kwargs) == ((), {})
    nodes = set(first.agent.nodes)
    assert "DeermemMemoryMiddleware.after_agent" in nodes
    assert "MemoryMiddleware.after_agent" in nodes
    # ours captured the turn: journalled for Maya's thread, then extracted by flush()
    pending = host.ours / "pending" / USER / "__default__" / "thread-1.json"
    assert pending.is_file(), sorted(p.name for p in host.ours.rglob("*"))
    assert middleware.flush(FLUSH_SECONDS), "the extraction did not finish"
    assert not pending.exists()
    memory = middleware.get_memory(USER)
    assert any("thread-1" in key for key in memory.watermarks), memory.watermarks

    # a fact stored for Maya (by our command, as an operator would) ...
    assert deermem(["fact", "add", EDITOR_FACT, "--user", USER, "--category", "preference"]) == 0
    saver = InMemorySaver()
    second = host.run_turn(USER, "thread-2", "Which editor should I set up?", checkpointer=saver)
    # ... is in the system message of the next thread's model calls (DeerFlow's own: none)
    assert second.model_calls
    for call in second.model_calls:
        assert isinstance(call[0], SystemMessage)
        assert EDITOR_FACT in text_of(call[0])
        assert memory_messages(call) == []
    # and ours injects before every model call, so a fact stored after the thread began reaches
    # its next turn (DeerFlow's own injection is frozen at a thread's first turn)
    later_fact = "Maya wants answers with a code sample"
    assert deermem(["fact", "add", later_fact, "--user", USER, "--category", "preference"]) == 0
    third = host.run_turn(USER, "thread-2", "And which linter?", checkpointer=saver)
    assert third.model_calls
    for call in third.model_calls:
        assert later_fact in text_of(call[0])
        assert EDITOR_FACT in text_of(call[0])
        assert sum(later_fact in text_of(m) for m in call) == 1  # per call, not kept in the state
    assert not any(later_fact in text_of(m) for m in third.state["messages"])

    host.assert_deerflow_files_untouched()


# -- 3. tool mode ---------------------------------------------------------------------------------


def test_tool_mode_deerflows_memory_search_finds_a_fact_stored_through_our_backend(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls
) -> None:
    """``memory.mode: tool``: DeerFlow binds its memory tools, and its ``memory_search`` run by
    its tool node finds a fact stored through our backend."""
    from langgraph.checkpoint.memory import InMemorySaver

    host = deerflow_host
    manager = manager_mode(host, mode="tool")
    assert manager.mode == "tool"
    with host.gateway() as gateway:
        response = gateway.post(
            "/api/memory/facts",
            json={"content": EDITOR_FACT, "category": "preference", "confidence": 0.9},
            headers=host.as_user(USER),
        )
        assert response.status_code == 200, response.text
    [fact] = response.json()["facts"]

    run = host.build_agent(USER, "thread-tool")
    run.agent.checkpointer = InMemorySaver()
    # DeerFlow bound its memory tools and told the model to use them
    assert set(run.agent.nodes["tools"].bound.tools_by_name) >= MEMORY_TOOLS
    first = run.go({"messages": [HumanMessage("Which editor do I use?")]})
    assert first.model_calls and first.answers, "the real model did not answer"
    assert "<memory_tool_system>" in text_of(first.model_calls[0][0])
    # ... and, as its prompt says, injected no facts: those are the tools' (summaries only)
    assert all(EDITOR_FACT not in block for block in memory_messages(first.model_calls[0]))
    manager_calls.clear()
    # the model's tool call (scripted: see the module docstring), then DeerFlow's graph goes on
    call_id = "call_memory_search_1"
    run.agent.update_state(
        run.config,
        {
            "messages": [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "memory_search", "args": {"query": "editor"}, "id": call_id}
                    ],
                )
            ]
        },
        as_node="model",
    )
    after = run.go(None)
    messages = after.state["messages"]
    [result] = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    found = json.loads(text_of(result))
    assert found["count"] >= 1, found
    assert found["results"][0]["id"] == fact["id"]
    assert found["results"][0]["content"] == EDITOR_FACT
    search = manager_calls.of("search")[0]
    assert search.args[0] == "editor"
    assert search.kwargs["user_id"] == USER
    assert search.kwargs["agent_name"] is None
    assert after.model_calls, "the model did not run after the tool"
    # tool mode: DeerFlow hands no conversation to the backend (the model adds facts itself)
    assert manager_calls.of("add") == manager_calls.of("aadd") == []

    host.assert_deerflow_files_untouched()

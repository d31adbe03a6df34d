"""DeerFlow PR #4732 end to end: each turn's memory is recalled by that turn's message.

With the pull request, DeerFlow's ``DynamicContextMiddleware`` asks a backend that declares
``supports_query_aware_context`` for memory before every real user turn —
``aget_context(user_id, agent_name=..., thread_id=..., query=<the turn's message>)`` — and
puts the answer, wrapped in ``<memory>``, in front of that message in the model request only
(never in the thread's state). Here DeerFlow's real lead agent (``make_lead_agent``, the local
SmolLM2 behind DeerFlow's ``models:``) holds a two-turn conversation in one checkpointed thread;
the facts are added through DeerFlow's gateway. Only per-turn recall is on
(``session_injection_enabled: false``), so what each model call receives is what that turn's
``get_context`` answered.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from tests.deerflow_host.conftest import DeerFlowHost, ManagerCalls, text_of

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
USER = "maya"
THREAD = "thread-recall"
BIKE = "Maya rides a Canyon road bicycle with 28 mm tubeless tyres"
"""The fact only the second message is about."""
OTHER_FACTS = (
    "Maya bakes sourdough bread with a rye starter every weekend",
    "Maya is perfecting croissant dough lamination for baking",
    "Maya grows basil and tomatoes on her balcony",
    "Maya plays the cello in an amateur orchestra",
    "Maya works as a backend engineer writing Go services",
)
FIRST = "My sourdough bread came out flat again. Any baking tips?"
SECOND = "Which tyre pressure should I use on my road bicycle?"


def memory_blocks(messages: list) -> list[str]:
    """The ``<memory>`` blocks among the user-role messages a model call received."""
    texts = [text_of(m).strip() for m in messages if m.type == "human"]
    return [t for t in texts if t.startswith("<memory>")]


def test_each_turn_recalls_the_facts_of_its_own_message(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls
) -> None:
    host = deerflow_host
    host.write_config(
        {
            "manager_class": MANAGER_CLASS,
            "session_injection_enabled": False,
            "turn_injection_enabled": True,
            "backend_config": {"debounce_seconds": 3600, "embeddings": "none", "top_k": 2},
        }
    )
    manager = host.memory_manager()
    assert type(manager).supports_query_aware_context is True
    with host.gateway() as gateway:
        for content in (BIKE, *OTHER_FACTS):
            response = gateway.post(
                "/api/memory/facts",
                json={"content": content, "category": "context", "confidence": 0.9},
                headers=host.as_user(USER),
            )
            assert response.status_code == 200, response.text
    manager_calls.clear()

    saver = InMemorySaver()
    first = host.run_turn(USER, THREAD, FIRST, checkpointer=saver)
    second = host.run_turn(USER, THREAD, SECOND, checkpointer=saver)
    assert first.model_calls and second.model_calls, "the real model was not called"

    # DeerFlow asked once per turn (on the async run path), with the turn's message as the query
    asked = [call.kwargs for call in manager_calls.of("aget_context")]
    queries = [kwargs.get("query") for kwargs in asked]
    assert queries == [FIRST, SECOND], asked
    assert {kwargs.get("thread_id") for kwargs in asked} == {THREAD}

    # the first turn's model call got facts about its message, not the bicycle
    [first_block] = memory_blocks(first.model_calls[0])
    assert "sourdough" in first_block and BIKE not in first_block
    # the second turn's model call got the bicycle fact, in front of the second message
    second_call = second.model_calls[0]
    [second_block] = memory_blocks(second_call)
    assert BIKE in second_block, second_block
    texts = [text_of(m).strip() for m in second_call]
    asked_at = max(i for i, text in enumerate(texts) if SECOND in text)
    assert texts.index(second_block) == asked_at - 1, texts
    # it was for that model request only: not in the thread's state
    assert all(BIKE not in text_of(m) for m in second.state["messages"])

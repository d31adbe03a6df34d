"""Threads whose captured history does not grow: every exchange is still stored, once.

A thread's capture is not always the whole conversation. An agent with a ``thread_id`` but no
checkpointer only sees the message it was just sent; an agent whose middleware trims the history
to a short window captures only that window. Either way the capture does not contain the turn the
thread's watermark points at and has no more turns than the last one, which is exactly what an
*older* capture from another worker looks like. Telling them apart by length lost every exchange
after the first; they are told apart by fingerprint (the thread's recently extracted turns).

The agent-level tests use the real ``create_agent`` and ``StateGraph`` machinery with scripted
models; :class:`MarkerChatModel` turns each marker of an extraction prompt into one fact, so the
stored facts say which exchanges were extracted, and the calls say how often each was read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deermem_middleware import MemoryConfig, MemoryMiddleware, MemoryNodes, MemoryState
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.memory.conversation import Turn, turns_after
from deermem_middleware.memory.document import Memory, Watermark
from deermem_middleware.memory.watermark import (
    MAX_OPENING_TURNS,
    MAX_THREAD_SEEN_TURNS,
    advance_watermark,
)
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import InMemoryStorage, MemoryScope
from deermem_middleware.testing import MarkerChatModel, RecordingAgentModel, marker_fact
from tests.helpers import KeepLastTwo, keep_last_two

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = MemoryScope("alice", "coder")
MARKERS = ("W1-C001", "W2-C002", "W3-C003")


def _turn(fingerprint: str, role: str = "user", text: str | None = None) -> Turn:
    return Turn(role, text or f"text of {fingerprint}", fingerprint)  # type: ignore[arg-type]


def _exchange(n: int, marker: str) -> tuple[Turn, Turn]:
    return (
        Turn("user", f"Please remember marker {marker}.", f"id:u{n}"),
        Turn("assistant", f"Noted, answer {n}.", f"id:a{n}"),
    )


OLD = [_turn(f"fp{i}", "user" if i % 2 == 0 else "assistant") for i in range(4)]
"""Four turns already extracted: fp3 is the watermark, at position 4."""
NEW = [_turn("n1"), _turn("n2", "assistant")]


# -- the pure rule ---------------------------------------------------------------------------


def test_a_window_of_only_new_turns_is_new() -> None:
    """No overlap with what was extracted (no checkpointer, or a one-exchange window), and no
    more turns than the last capture: still new, because none of its turns was seen."""
    assert turns_after(NEW, "fp3", 2, seen=("fp2", "fp3")) == NEW


def test_a_window_overlapping_the_watermark_yields_what_follows_it() -> None:
    assert turns_after([OLD[3], *NEW], "fp3", 2, seen=("fp2", "fp3")) == NEW


def test_an_older_capture_is_nothing_new() -> None:
    """Another worker already stored a longer conversation: every turn of this capture is
    among the thread's extracted ones."""
    seen = tuple(t.fingerprint for t in OLD)
    assert turns_after(OLD[:2], "fp3", 4, seen=seen) == []


def test_an_older_capture_is_recognised_by_its_newest_turn() -> None:
    """The thread keeps only its most recent fingerprints; an older capture whose first turns
    fell out of them still ends on one of them, and nothing before that is new."""
    assert turns_after(OLD[:2], "fp3", 4, seen=("fp1", "fp2", "fp3")) == []


def test_an_older_capture_lagging_beyond_seen_is_recognised_by_the_opening() -> None:
    """A conversation resent whole, 40 turns extracted: ``seen`` holds only the newest of them,
    yet a replayed capture of its first turns (a crashed worker's journal entry) is done. A
    window that keeps the opening message and adds new turns yields the new turns; one that
    shares nothing is new whatever its length."""
    history = [_turn(f"fp{i}", "user" if i % 2 == 0 else "assistant") for i in range(40)]
    recent = tuple(t.fingerprint for t in history[-MAX_THREAD_SEEN_TURNS:])
    opening = tuple(t.fingerprint for t in history[:MAX_OPENING_TURNS])
    assert turns_after(history[:4], "fp39", 40, seen=recent, opening=opening) == []
    assert turns_after([history[0], *NEW], "fp39", 40, seen=recent, opening=opening) == NEW
    assert turns_after(NEW, "fp39", 40, seen=recent, opening=opening) == NEW


def test_an_older_replayed_capture_of_a_long_thread_stores_nothing_twice(
    memory_config: MemoryConfig,
) -> None:
    storage = InMemoryStorage()
    model = MarkerChatModel()
    updater = _updater(storage, model, memory_config)
    markers = [f"L{i}-C{i:03d}" for i in range(1, 21)]
    history = tuple(t for n, m in enumerate(markers) for t in _exchange(n, m))
    assert updater.run(CaptureJob(SCOPE, "thread-1", history)).status == "applied"
    stale = updater.run(CaptureJob(SCOPE, "thread-1", history[:4]))
    assert stale.status == "nothing_new"
    assert len(model.calls) == 1


def test_a_summarised_history_yields_only_what_follows_the_extracted_turns() -> None:
    """A summary message replaced the oldest turns: it restates them, the new turns follow."""
    summary = _turn("summary")
    seen = tuple(t.fingerprint for t in OLD)
    assert turns_after([summary, OLD[2], *NEW], "fp9", 4, seen=seen) == NEW


def test_the_watermark_where_it_was_left_keeps_a_repeated_answer() -> None:
    """Content-hash fingerprints (no message ids): the assistant's extracted answer is said
    again word for word in a later turn. The whole conversation was resent, so the watermark is
    still at its recorded position, and what follows it is new (taking the *last* occurrence
    of the watermark's fingerprint would read "nothing new" and lose the user's turn)."""
    turns = [
        _turn("h:q1"),
        _turn("h:sure", "assistant", "Sure."),
        _turn("h:q2"),
        _turn("h:sure", "assistant", "Sure."),
    ]
    assert turns_after(turns, "h:sure", 2, seen=("h:q1", "h:sure")) == turns[2:]


def test_fresh_message_ids_make_a_repeated_text_new() -> None:
    """Without a checkpointer LangGraph gives every message a fresh id on every call: the same
    words said again are a new turn, not one already seen."""
    again = [
        Turn("user", "text of fp2", "id:fresh-1"),
        Turn("assistant", "text of fp3", "id:fresh-2"),
    ]
    assert turns_after(again, "fp3", 4, seen=("fp2", "fp3")) == again


def test_a_document_without_seen_still_tells_an_older_capture_apart() -> None:
    """Watermarks stored before threads kept ``seen``: a shorter capture without the watermark
    is older, as before; one as long as the last is a window of new turns."""
    assert turns_after(OLD[:2], "fp3", 4) == []
    assert turns_after(NEW, "fp3", 2) == NEW
    assert turns_after([*NEW, _turn("n3")], "fp3", 2) == [*NEW, _turn("n3")]


def test_thread_watermarks_keep_their_recent_fingerprints_bounded() -> None:
    memory = Memory()
    total = 0
    for start in range(0, 3 * MAX_THREAD_SEEN_TURNS, 10):
        total += 10
        batch = [f"id:{i}" for i in range(start, start + 10)]
        memory = advance_watermark(
            memory,
            "thread-1",
            batch[-1],
            count=10,
            now=NOW,
            position=10,
            seen=batch,
            max_seen=MAX_THREAD_SEEN_TURNS,
        )
    mark = memory.watermarks["thread-1"]
    assert len(mark.seen) == MAX_THREAD_SEEN_TURNS
    assert mark.seen[-1] == mark.turn
    assert mark.count == total


def test_a_watermark_keeping_no_fingerprints_is_refused() -> None:
    with pytest.raises(ValueError, match="max_seen must be at least 1"):
        advance_watermark(Memory(), "thread-1", "id:a", count=1, now=NOW, seen=[], max_seen=0)


# -- the updater -----------------------------------------------------------------------------


def _updater(storage: InMemoryStorage, model: MarkerChatModel, config: MemoryConfig) -> Any:
    extractor = MemoryExtractor(model)
    return MemoryUpdater(storage, lambda: extractor, config, clock=lambda: NOW)


def _stored_markers(memory: Memory) -> list[str]:
    return sorted(f.content for f in memory.facts)


def test_one_exchange_per_capture_stores_every_exchange(memory_config: MemoryConfig) -> None:
    storage = InMemoryStorage()
    model = MarkerChatModel()
    updater = _updater(storage, model, memory_config)
    for n, marker in enumerate(MARKERS):
        assert updater.run(CaptureJob(SCOPE, "thread-1", _exchange(n, marker))).status == "applied"

    memory = storage.load(SCOPE).memory
    assert _stored_markers(memory) == [marker_fact(m) for m in MARKERS]
    assert [call.conversation for call in model.calls] == [(m,) for m in MARKERS]
    assert memory.watermarks["thread-1"].seen[-2:] == ("id:u2", "id:a2")


def test_an_older_capture_after_windowed_ones_stores_nothing_twice(
    memory_config: MemoryConfig,
) -> None:
    storage = InMemoryStorage()
    model = MarkerChatModel()
    updater = _updater(storage, model, memory_config)
    for n, marker in enumerate(MARKERS):
        updater.run(CaptureJob(SCOPE, "thread-1", _exchange(n, marker)))
    for n, marker in enumerate(MARKERS):
        again = updater.run(CaptureJob(SCOPE, "thread-1", _exchange(n, marker)))
        assert again.status == "nothing_new"
    assert len(model.calls) == len(MARKERS)


def test_a_thread_stored_before_seen_existed_reads_its_next_window(
    memory_config: MemoryConfig,
) -> None:
    """An existing document: the thread's watermark has no ``seen`` and sits at position 2."""
    storage = InMemoryStorage()
    legacy = Memory(watermarks={"thread-1": Watermark(turn="id:a0", count=2, position=2)})
    storage.save(SCOPE, legacy, 0)
    model = MarkerChatModel()
    updater = _updater(storage, model, memory_config)

    assert updater.run(CaptureJob(SCOPE, "thread-1", _exchange(1, MARKERS[1]))).status == "applied"
    assert updater.run(CaptureJob(SCOPE, "thread-1", _exchange(2, MARKERS[2]))).status == "applied"
    assert _stored_markers(storage.load(SCOPE).memory) == [marker_fact(m) for m in MARKERS[1:]]


# -- real agents -----------------------------------------------------------------------------


def _cfg(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "alice"}}


def _three_turns(invoke: Any, mw: MemoryMiddleware) -> None:
    for marker in MARKERS:
        invoke({"messages": [HumanMessage(f"Please remember marker {marker}.")]}, _cfg())
        assert mw.flush(timeout=10)


def _assert_each_exchange_stored_once(mw: MemoryMiddleware, model: MarkerChatModel) -> None:
    assert _stored_markers(mw.get_memory("alice")) == [marker_fact(m) for m in MARKERS]
    assert [call.conversation for call in model.calls] == [(m,) for m in MARKERS]


def test_agent_with_thread_id_and_no_checkpointer_stores_every_exchange(
    memory_config: MemoryConfig,
) -> None:
    """(a) Only the newest message is sent each turn; LangGraph ids every message afresh."""
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(memory_config, model=extractor)
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw])
    _three_turns(agent.invoke, mw)
    _assert_each_exchange_stored_once(mw, extractor)
    mw.close()


def _windowed_agent(config: MemoryConfig) -> tuple[MarkerChatModel, MemoryMiddleware, Any]:
    """An agent with a checkpointer whose history is trimmed to its last two messages."""
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(config, model=extractor)
    agent = create_agent(
        RecordingAgentModel(), [], middleware=[mw, KeepLastTwo()], checkpointer=InMemorySaver()
    )
    return extractor, mw, agent


def test_agent_with_a_trimmed_history_window_stores_every_exchange(
    memory_config: MemoryConfig,
) -> None:
    """(b) A checkpointer, and a middleware that keeps only the last two messages in state."""
    extractor, mw, agent = _windowed_agent(memory_config)
    _three_turns(agent.invoke, mw)
    assert len(agent.get_state(_cfg()).values["messages"]) == 2  # the window is really short
    _assert_each_exchange_stored_once(mw, extractor)
    mw.close()


async def test_agent_with_a_trimmed_history_window_stores_every_exchange_async(
    memory_config: MemoryConfig,
) -> None:
    extractor, mw, agent = _windowed_agent(memory_config)
    for marker in MARKERS:
        await agent.ainvoke(
            {"messages": [HumanMessage(f"Please remember marker {marker}.")]}, _cfg()
        )
        assert await mw.aflush(timeout=10)
    _assert_each_exchange_stored_once(mw, extractor)
    await mw.aclose()


def test_node_pair_with_a_trimmed_history_window_stores_every_exchange(
    memory_config: MemoryConfig,
) -> None:
    """(c) The node pair in a hand-built graph whose trim node keeps the last two messages."""
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(memory_config, model=extractor)
    nodes = MemoryNodes(mw)
    model = RecordingAgentModel()

    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.with_memory(state))]}

    def trim(state: MemoryState) -> dict[str, Any]:
        return keep_last_two(list(state.get("messages", []))) or {}

    builder = StateGraph(MemoryState)
    builder.add_node("memory_inject", nodes.inject)
    builder.add_node("model", RunnableLambda(call_model))
    builder.add_node("trim", trim)
    builder.add_node("memory_capture", nodes.capture)
    builder.add_edge(START, "memory_inject")
    builder.add_edge("memory_inject", "model")
    builder.add_edge("model", "trim")
    builder.add_edge("trim", "memory_capture")
    builder.add_edge("memory_capture", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    _three_turns(graph.invoke, mw)
    assert len(graph.get_state(_cfg()).values["messages"]) == 2
    _assert_each_exchange_stored_once(mw, extractor)
    mw.close()


def test_whole_history_resent_is_still_read_incrementally(memory_config: MemoryConfig) -> None:
    """The usual case is unchanged: a checkpointer, no trimming, each turn reads only what is
    new (one marker per extraction call)."""
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(memory_config, model=extractor)
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    _three_turns(agent.invoke, mw)
    assert len(agent.get_state(_cfg()).values["messages"]) == 6
    _assert_each_exchange_stored_once(mw, extractor)
    mw.close()


@pytest.mark.parametrize("window", [2, 4])
def test_windowed_updater_runs_read_each_turn_once(
    memory_config: MemoryConfig, window: int
) -> None:
    """Captures sliding over a conversation one exchange at a time, ``window`` turns each:
    every exchange is extracted exactly once."""
    storage = InMemoryStorage()
    model = MarkerChatModel()
    updater = _updater(storage, model, memory_config)
    markers = [f"S{i}-C{i:03d}" for i in range(1, 7)]
    history: list[Turn] = []
    for n, marker in enumerate(markers):
        history.extend(_exchange(n, marker))
        updater.run(CaptureJob(SCOPE, "thread-1", tuple(history[-window:])))
    assert [call.conversation for call in model.calls] == [(m,) for m in markers]

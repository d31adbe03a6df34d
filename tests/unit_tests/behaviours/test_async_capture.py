"""Async runs capture off the event loop: the capture writes the journal (a file, or a database
row), and blocking I/O on a server's loop stalls every other request — a LangGraph server's dev
mode refuses it outright (its blocking-call detector raised on the journal's ``os.mkdir``, so
the capture was not journaled there)."""

from __future__ import annotations

import threading
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware, MemoryNodes
from deermem_middleware.testing import RecordingAgentModel
from tests.unit_tests.test_nodes import _graph


def _record_journal_threads(mw: MemoryMiddleware) -> list[threading.Thread]:
    journal = mw.service._journal
    assert journal is not None
    original = journal.put
    threads: list[threading.Thread] = []

    def put(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return original(*args, **kwargs)

    journal.put = put  # type: ignore[method-assign]
    return threads


async def test_the_middleware_journals_async_captures_off_the_event_loop(
    memory_config: MemoryConfig,
) -> None:
    mw = MemoryMiddleware(memory_config, model=RecordingAgentModel())
    threads = _record_journal_threads(mw)
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw], checkpointer=InMemorySaver())
    loop_thread = threading.current_thread()
    await agent.ainvoke(
        {"messages": [HumanMessage("I write backend services in Go.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice"}},
    )
    assert threads, "the capture was not journaled"
    assert all(t is not loop_thread for t in threads)
    assert mw.service._journal is not None and len(mw.service.pending_entries()) == 1
    await mw.aclose()


async def test_the_capture_node_journals_off_the_event_loop(memory_config: MemoryConfig) -> None:
    mw = MemoryMiddleware(memory_config, model=RecordingAgentModel())
    threads = _record_journal_threads(mw)
    graph = _graph(MemoryNodes(mw), RecordingAgentModel())
    loop_thread = threading.current_thread()
    await graph.ainvoke(
        {"messages": [HumanMessage("I write backend services in Go.")]},
        {"configurable": {"thread_id": "t1", "user_id": "alice"}},
    )
    assert threads and all(t is not loop_thread for t in threads)
    await mw.aclose()

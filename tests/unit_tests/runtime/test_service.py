"""One memory engine per process per configuration, behind thin adapters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deermem_middleware import MemoryMiddleware, MemoryNodes, MemoryState
from deermem_middleware.runtime import MemoryService
from deermem_middleware.testing import MarkerChatModel, marker_of
from tests.helpers import memory_config


def _conversation(marker: str) -> list[Any]:
    return [
        HumanMessage(f"Please keep this in mind: my marker for today is {marker}."),
        AIMessage(f"Understood, I will remember that your marker is {marker}."),
    ]


def test_middleware_built_with_one_config_share_one_engine(tmp_path: Path) -> None:
    config = memory_config(tmp_path, debounce_seconds=0)
    model = MarkerChatModel()
    first = MemoryMiddleware(config, model=model)
    second = MemoryMiddleware(config, model=model)
    assert first.service is second.service and first.service.users == 2
    other_model = MemoryMiddleware(config, model=MarkerChatModel())
    other_config = MemoryMiddleware(config.model_copy(update={"top_k": 3}), model=model)
    assert other_model.service is not first.service
    assert other_config.service is not first.service
    assert second.capture(_conversation("E1-C001"), user_id="alice", thread_id="t1")
    assert first.flush(timeout=10)  # one scheduler: the first sees the second's work
    assert [marker_of(f.content) for f in first.get_memory("alice").facts] == ["E1-C001"]
    assert second.close() and first.service.users == 1 and not first.service.closed
    assert second.close()  # closing twice is harmless and does not release twice
    assert first.service.users == 1
    assert first.close() and first.service.closed
    again = MemoryMiddleware(config, model=model)
    assert again.service is not first.service and not again.service.closed  # a fresh engine
    for middleware in (again, other_model, other_config):
        middleware.close()


def test_a_thousand_constructions_keep_the_thread_count_flat(tmp_path: Path) -> None:
    """Hosts that build middleware per request (DeerFlow's extensions, FastAPI apps)."""
    config = memory_config(tmp_path, debounce_seconds=3600)
    model = MarkerChatModel()
    built = [MemoryMiddleware(config, model=model)]
    built[0].capture(_conversation("E2-C000"), user_id="alice", thread_id="t0")  # threads up
    # threads of earlier tests' engines may end meanwhile (idle storage-call threads exit after
    # 30 s): what must not happen is a thread started by these constructions
    baseline = set(threading.enumerate())
    for number in range(1, 1000):
        middleware = MemoryMiddleware(config, model=model)
        middleware.capture(_conversation(f"E2-C{number:03d}"), user_id="u", thread_id=f"t{number}")
        built.append(middleware)
    assert [t.name for t in threading.enumerate() if t not in baseline] == []
    assert built[0].service.users == 1000 and built[0].service._scheduler.pending() == 1000
    for middleware in built[:-1]:
        middleware.close(timeout=0)
    assert not built[-1].service.closed  # closed with its last user, not before
    built[-1].close(timeout=0)
    assert built[-1].service.closed


class _GraphModel(MarkerChatModel):
    """The graph's own chat model: answers the user, and (asked to extract) the marker facts."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if any("<conversation>" in str(m.content) for m in messages):
            return super()._generate(messages, stop, run_manager, **kwargs)
        reply = AIMessage("Understood, I will remember that.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_memory_nodes_without_an_extraction_model_use_the_graphs_model(tmp_path: Path) -> None:
    llm = _GraphModel()
    service = MemoryService(memory_config(tmp_path, debounce_seconds=0))  # no model configured
    nodes = MemoryNodes(service, model=llm)

    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [llm.invoke(nodes.with_memory(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("memory_inject", nodes.inject)
    builder.add_node("model", call_model)
    builder.add_node("memory_capture", nodes.capture)
    builder.add_edge(START, "memory_inject")
    builder.add_edge("memory_inject", "model")
    builder.add_edge("model", "memory_capture")
    builder.add_edge("memory_capture", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "g1", "user_id": "alice"}}
    graph.invoke(
        {"messages": [HumanMessage("Please keep this in mind: my marker is E3-C001.")]}, config
    )
    assert service.flush(timeout=10)
    assert [marker_of(f.content) for f in service.get_memory("alice").facts] == ["E3-C001"]
    assert len(llm.calls) == 1  # the extraction ran on the graph's model
    # the next call of the graph is told what it remembers
    graph.invoke({"messages": [HumanMessage("What is my marker?")]}, config)
    assert service.ledger and service.ledger[-1].facts[0].content.endswith("E3-C001")
    service.close()


def test_an_engine_closed_directly_is_replaced_on_the_next_acquire(tmp_path: Path) -> None:
    config = memory_config(tmp_path)
    model = MarkerChatModel()
    first = MemoryService.acquire(config, model=model)
    assert MemoryService.acquire(config, model=model) is first and first.users == 2
    first.close()  # not released: a host that closes the engine itself
    second = MemoryService.acquire(config, model=model)
    assert second is not first and not second.closed
    assert second.users == 1 and first.users == 0
    assert second.release() and second.closed


def test_a_change_by_hand_drops_the_vectors_of_texts_gone(tmp_path: Path) -> None:
    """``MemoryService.change`` (the CLI's and the DeerFlow backend's writes): compare-and-set,
    then the vectors of texts no fact has any more leave the embedding cache; a text another
    fact still has keeps its vector."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from deermem_middleware.memory import manual

    service = MemoryService(memory_config(tmp_path), embeddings=DeterministicFakeEmbedding(size=8))
    scope = service.scope("alice")
    now = "2026-12-01T00:00:00Z"
    service.change(scope, lambda m: manual.add_fact(m, "Writes Go", fact_id="f1", now=now))
    service.change(scope, lambda m: manual.add_fact(m, "Keeps bees", fact_id="f2", now=now))
    store = service._selector.embeddings
    assert store is not None
    store.embed(["Writes Go", "Keeps bees"])
    assert store.missing(["Writes Go", "Keeps bees"]) == []
    before, after, revision = service.change(scope, lambda m: manual.remove_fact(m, "f1", now=now))
    assert revision == 3 and len(before.facts) == 2 and len(after.facts) == 1
    assert store.missing(["Writes Go", "Keeps bees"]) == ["Writes Go"]
    service.close()

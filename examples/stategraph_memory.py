"""Memory in a hand-built StateGraph: inject node -> model node -> capture node.

python examples/stategraph_memory.py
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from _model import chat_model
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deermem_middleware import MemoryConfig, MemoryMiddleware, MemoryNodes, MemoryState

memory = MemoryMiddleware(
    MemoryConfig(storage_path=tempfile.mkdtemp(prefix="deermem-example-")),
    model=chat_model(max_tokens=1024),
)
nodes = MemoryNodes(memory)
llm = chat_model(max_tokens=60)


async def call_model(state: MemoryState) -> dict[str, Any]:
    # with_memory(): the conversation plus the injected <memory> system message, for this call only
    return {"messages": [await llm.ainvoke(nodes.with_memory(state))]}


builder = StateGraph(MemoryState)
builder.add_node("memory_inject", nodes.inject)
builder.add_node("model", call_model)
builder.add_node("memory_capture", nodes.capture)
builder.add_edge(START, "memory_inject")
builder.add_edge("memory_inject", "model")
builder.add_edge("model", "memory_capture")
builder.add_edge("memory_capture", END)
graph = builder.compile(checkpointer=InMemorySaver())


async def main() -> None:
    bob = {"configurable": {"thread_id": "t1", "user_id": "bob"}}
    await graph.ainvoke({"messages": [HumanMessage("I'm Bob and I teach chemistry in Oslo.")]}, bob)
    await memory.aflush()
    print("Stored facts:", [f.content for f in memory.get_memory("bob").facts])

    later = {"configurable": {"thread_id": "t2", "user_id": "bob"}}
    result = await graph.ainvoke({"messages": [HumanMessage("What subject do I teach?")]}, later)
    print("Assistant:", result["messages"][-1].content)
    print("Messages persisted in t2:", [m.type for m in result["messages"]], "(no memory block)")
    await memory.aclose(timeout=None)


asyncio.run(main())

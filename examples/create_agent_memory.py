"""Memory for a LangChain v1 agent: tell it something in one thread, ask in another.

python examples/create_agent_memory.py
"""

from __future__ import annotations

import tempfile

from _model import chat_model
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware

memory = MemoryMiddleware(
    MemoryConfig(storage_path=tempfile.mkdtemp(prefix="deermem-example-")),
    model=chat_model(max_tokens=1024),  # the extraction model
)
agent = create_agent(
    chat_model(max_tokens=60),
    tools=[],
    system_prompt="You are a helpful assistant. Answer in one sentence.",
    middleware=[memory],
    checkpointer=InMemorySaver(),
)

alice = {"configurable": {"thread_id": "monday", "user_id": "alice"}}
agent.invoke({"messages": [HumanMessage("I'm Alice. I write Go at a payments company.")]}, alice)
memory.flush()  # normally the update runs after 30 s of quiet; flush makes it happen now

print("Stored facts:")
for fact in memory.get_memory("alice").facts:
    print(f"  [{fact.category} | {fact.confidence:.2f}] {fact.content}")

tuesday = {"configurable": {"thread_id": "tuesday", "user_id": "alice"}}
messages = [HumanMessage("Which language do I use at work?")]
print("\nInjected into the next conversation's system prompt:")
print(memory.render_memory(messages, user_id="alice") or "(nothing)")
reply = agent.invoke({"messages": messages}, tuesday)
print("\nAssistant:", reply["messages"][-1].content)
memory.close(timeout=None)  # wait for the last update (the local model is slow)

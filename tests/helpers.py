"""Test doubles for our own logic: scripted chat models and a mocked OpenAI endpoint.

The fakes are real ``BaseChatModel`` subclasses (so LangChain/LangGraph treat them like any model);
the OpenAI double is the real ``ChatOpenAI`` talking to an ``httpx.MockTransport``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from deermem_middleware import MemoryConfig

Answer = str | Exception | Callable[[list[BaseMessage]], str]


def memory_config(tmp_path: Path, **overrides: Any) -> MemoryConfig:
    """A config for tests: files under ``tmp_path/memory``, an hour of debounce (tests flush),
    no flush at exit, no embeddings; ``overrides`` win."""
    values: dict[str, Any] = {
        "storage_path": str(tmp_path / "memory"),
        "debounce_seconds": 3600,
        "flush_on_exit_seconds": None,
        "embeddings": "none",
    }
    values.update(overrides)
    return MemoryConfig(**values)


def update_json(
    *,
    sections: dict[str, str] | None = None,
    facts: Iterable[tuple[str, str, Any]] = (),
    remove: Sequence[str] = (),
) -> str:
    """A MemoryUpdate answer as the LLM would write it."""
    user_fields = ("workContext", "personalContext", "topOfMind")
    history_fields = ("recentMonths", "earlierContext", "longTermBackground")
    sections = sections or {}

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {n: {"shouldUpdate": n in sections, "summary": sections.get(n, "")} for n in names}

    return json.dumps(
        {
            "user": group(user_fields),
            "history": group(history_fields),
            "newFacts": [
                {"content": c, "category": cat, "confidence": conf} for c, cat, conf in facts
            ],
            "factsToRemove": list(remove),
        }
    )


class ScriptedChatModel(BaseChatModel):
    """Answers from a script (strings, exceptions to raise, or functions of the prompt).

    The last answer repeats when the script runs out. Has no structured-output support, like
    most fake models, so extraction takes its plain-JSON path. Records every prompt.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    answers: list[Any] = Field(default_factory=list)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            index = len(self._calls)
            self._calls.append(list(messages))
            answer = self.answers[min(index, len(self.answers) - 1)] if self.answers else "{}"
        if isinstance(answer, Exception):
            raise answer
        text = answer(list(messages)) if callable(answer) else str(answer)
        message = AIMessage(
            text,
            usage_metadata={
                "input_tokens": sum(len(str(m.content)) // 4 for m in messages),
                "output_tokens": len(text) // 4,
                "total_tokens": 0,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


class RecordingAgentModel(BaseChatModel):
    """The agent's own model in wiring tests: replies "answer N" and records what it was sent."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def seen(self) -> list[list[BaseMessage]]:
        return self._seen

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # create_agent may bind tools
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._seen.append(list(messages))
            n = len(self._seen)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"answer {n}"))])


def system_text(messages: Sequence[BaseMessage]) -> str:
    """Text of the system messages a model call received."""
    return "\n".join(str(m.content) for m in messages if m.type == "system")


class OpenAIStub:
    """A scripted OpenAI Chat Completions endpoint behind ``httpx.MockTransport``.

    Each scripted reply is ``(status, body)`` where body is the assistant's text (status 200) or an
    error JSON; or a function ``request_json -> httpx.Response``. Requests are recorded as JSON.
    """

    def __init__(self, replies: Sequence[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def _handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        reply = self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]
        if callable(reply):
            result: httpx.Response = reply(body)
            return result
        status, payload = reply
        if status != 200:
            return httpx.Response(
                status, json={"error": {"message": payload, "type": "invalid_request_error"}}
            )
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": payload},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
            },
        )

    def model(self, **kwargs: Any) -> Any:
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=kwargs.pop("model", "gpt-4o-mini"),
            api_key="test-key",
            http_client=httpx.Client(transport=httpx.MockTransport(self._handle)),
            max_retries=0,
            **kwargs,
        )

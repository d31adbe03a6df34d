"""Test doubles: scripted chat models and a mocked OpenAI endpoint, for your tests and ours.

Real ``BaseChatModel`` subclasses, so LangChain and LangGraph treat them like any model; none
has structured output (the base class's ``with_structured_output`` needs ``bind_tools``), so
extraction takes its plain-JSON path. The OpenAI double is the real ``ChatOpenAI`` talking to an
``httpx.MockTransport``.

- :class:`ScriptedChatModel` answers from a script (texts, exceptions, functions of the prompt);
  :func:`update_json` writes an extraction answer for it.
- :class:`MarkerChatModel` follows conversations into memory by marker: a test puts a unique
  marker (``P2-C057``) in each conversation; the model reads the markers of the
  ``<conversation>`` block of the extraction prompt (never those of the current memory shown
  above it) and answers an update adding one fact per marker, ``User mentioned marker P2-C057``.
- :class:`RecordingAgentModel` is an agent's own model in wiring tests.
- :class:`OpenAIStub` is a scripted Chat Completions endpoint.
- :class:`SystemPromptRecorder` records the system prompt each chat-model call received.

These are fakes for testing wiring and our own logic, not a measure of memory quality.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr

from deermem_middleware.memory.sections import HISTORY_FIELDS, USER_FIELDS

__all__ = [
    "MARKER",
    "Answer",
    "MarkerCall",
    "MarkerChatModel",
    "OpenAIStub",
    "RecordingAgentModel",
    "ScriptedChatModel",
    "SystemPromptRecorder",
    "completion_response",
    "marker_fact",
    "marker_of",
    "marker_update",
    "prompt_markers",
    "system_text",
    "update_json",
]

Answer = str | Exception | Callable[[list[BaseMessage]], str]


def update_json(
    *,
    sections: dict[str, str] | None = None,
    facts: Iterable[tuple[str, str, Any] | Mapping[str, Any]] = (),
    remove: Sequence[str] = (),
) -> str:
    """A MemoryUpdate answer as the LLM would write it; a fact is ``(content, category,
    confidence)`` or a whole ``newFacts`` item (``supersedes``, ``entities``...)."""
    sections = sections or {}

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {n: {"shouldUpdate": n in sections, "summary": sections.get(n, "")} for n in names}

    return json.dumps(
        {
            "user": group(USER_FIELDS),
            "history": group(HISTORY_FIELDS),
            "newFacts": [
                dict(f)
                if isinstance(f, Mapping)
                else {"content": f[0], "category": f[1], "confidence": f[2]}
                for f in facts
            ],
            "factsToRemove": list(remove),
        }
    )


def system_text(messages: Sequence[BaseMessage]) -> str:
    """Text of the system messages a model call received."""
    return "\n".join(str(m.content) for m in messages if m.type == "system")


class SystemPromptRecorder(BaseCallbackHandler):
    """A callback that records the system prompt each chat-model call actually received (pass it
    in ``config={"callbacks": [...]}``): what memory injected, as the model saw it."""

    def __init__(self) -> None:
        self.systems: list[str] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.systems.extend(system_text(batch) for batch in messages)


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


class RecordingAgentModel(ScriptedChatModel):
    """The agent's own model in wiring tests: replies "answer N" (the N-th call) and records
    what it was sent (:attr:`seen`)."""

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if not self.answers:
            self.answers = [lambda messages: f"answer {len(self.calls)}"]

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def seen(self) -> list[list[BaseMessage]]:
        return self.calls

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # create_agent may bind tools
        return self


MARKER = re.compile(r"\b[A-Z]\d+-C\d+\b")
"""A unique token (``P2-C057``) a test puts in a conversation to follow it into memory."""
MARKER_FACT_PREFIX = "User mentioned marker "
_PROMPT_BLOCK = {
    name: re.compile(rf"<{name}>(.*?)</{name}>", re.DOTALL)
    for name in ("conversation", "current_memory")
}
_SECTIONS = {"user": USER_FIELDS, "history": HISTORY_FIELDS}


def marker_fact(marker: str) -> str:
    return f"{MARKER_FACT_PREFIX}{marker}"


def marker_of(fact_content: str) -> str | None:
    """The marker a :class:`MarkerChatModel` fact is about (None for any other fact)."""
    if not fact_content.startswith(MARKER_FACT_PREFIX):
        return None
    return fact_content[len(MARKER_FACT_PREFIX) :]


def prompt_markers(messages: Sequence[BaseMessage], block: str = "conversation") -> list[str]:
    """The distinct markers in one block (``conversation`` or ``current_memory``) of an
    extraction prompt, in order."""
    human = "\n".join(str(m.content) for m in messages if m.type == "human")
    found = _PROMPT_BLOCK[block].search(human)
    if found is None:
        raise AssertionError(f"extraction prompt without a <{block}> block")
    return list(dict.fromkeys(MARKER.findall(found.group(1))))


def marker_update(markers: Sequence[str]) -> str:
    """The update JSON adding one fact per marker, touching no section, removing nothing."""
    return json.dumps(
        {
            group: {name: {"shouldUpdate": False, "summary": ""} for name in names}
            for group, names in _SECTIONS.items()
        }
        | {
            "newFacts": [
                {"content": marker_fact(m), "category": "context", "confidence": 0.9}
                for m in markers
            ],
            "factsToRemove": [],
        }
    )


@dataclass(frozen=True)
class MarkerCall:
    """What one extraction call of a :class:`MarkerChatModel` was about."""

    metadata: dict[str, Any]
    """The run metadata (the updater names user, agent and thread: ``deermem_*``)."""
    conversation: tuple[str, ...]
    memory: tuple[str, ...]


class MarkerChatModel(BaseChatModel):
    """One fact per marker of the prompt's conversation (see the module docstring).

    Like ``ScriptedChatModel`` it has no structured output (the base class's
    ``with_structured_output`` needs ``bind_tools``, which raises), so extraction takes its plain
    JSON path; the prompt is read the same way on either path. Records what each call was about.
    """

    _calls: list[MarkerCall] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "marker"

    @property
    def calls(self) -> list[MarkerCall]:
        with self._lock:
            return list(self._calls)

    @property
    def odd_prompts(self) -> int:
        """Calls whose conversation did not carry exactly one marker."""
        return sum(len(call.conversation) != 1 for call in self.calls)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        markers = prompt_markers(messages)
        call = MarkerCall(
            dict(getattr(run_manager, "metadata", None) or {}),
            tuple(markers),
            tuple(prompt_markers(messages, "current_memory")),
        )
        with self._lock:
            self._calls.append(call)
        message = AIMessage(marker_update(markers))
        return ChatResult(generations=[ChatGeneration(message=message)])


def completion_response(
    body: dict[str, Any], answer: str, *, prompt_tokens: int = 10, completion_tokens: int = 5
) -> httpx.Response:
    """A successful Chat Completions response to the request ``body``, carrying ``answer``."""
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
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


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
        return completion_response(body, payload, prompt_tokens=100, completion_tokens=50)

    def model(self, **kwargs: Any) -> Any:
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=kwargs.pop("model", "gpt-4o-mini"),
            api_key=SecretStr("test-key"),
            http_client=httpx.Client(transport=httpx.MockTransport(self._handle)),
            max_retries=0,
            **kwargs,
        )


@dataclass(frozen=True)
class CorpusCase:
    """One labelled memory string of the instruction corpus
    (``tests/fixtures/instruction_corpus.jsonl``): ``label`` is ``withhold`` (must be classified
    ``injection``) or ``keep``; ``part`` is ``dev``, ``dev2`` or ``dev3`` (tuned on) or a name
    starting with ``heldout`` (never tuned on); ``source``: the published collection a case was
    modelled on (``own`` for look-alikes written against a rule)."""

    id: str
    part: str
    lang: str
    label: str
    kind: str
    text: str
    source: str = ""


def load_corpus(path: Path) -> list[CorpusCase]:
    """The cases of a JSON-lines corpus file; a bad line is a ``ValueError`` naming file and
    line (shared by the corpus test and its benchmark)."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(CorpusCase(**json.loads(line)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{number}: not a corpus case ({exc})") from None
    return cases

"""A deterministic extraction model for tests that follow conversations into memory by marker.

A test puts a unique marker (``P2-C057``) in each conversation; :class:`MarkerChatModel` reads the
markers of the ``<conversation>`` block of the extraction prompt it receives (never those of the
current memory shown above it) and answers an update adding one fact per marker,
``User mentioned marker P2-C057``, confidence 0.9, category context, no summaries.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

__all__ = ["MARKER", "MarkerCall", "MarkerChatModel", "marker_fact", "marker_of", "prompt_markers"]

MARKER = re.compile(r"\b[A-Z]\d+-C\d+\b")
"""A unique token (``P2-C057``) a test puts in a conversation to follow it into memory."""
MARKER_FACT_PREFIX = "User mentioned marker "
_PROMPT_BLOCK = {
    name: re.compile(rf"<{name}>(.*?)</{name}>", re.DOTALL)
    for name in ("conversation", "current_memory")
}
_SECTIONS = {
    "user": ("workContext", "personalContext", "topOfMind"),
    "history": ("recentMonths", "earlierContext", "longTermBackground"),
}


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

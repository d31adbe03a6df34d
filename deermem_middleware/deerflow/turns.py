"""Who DeerFlow's calls name, and the turn-start messages that rank the facts to inject.

DeerFlow's ``on_turn_start(turn_number, message, **kwargs)`` tells the backend what the user
just said; ``get_context`` later asks for the memory of a thread without the conversation.
:class:`TurnMessages` keeps the newest turn-start message per thread (bounded) so that
``get_context`` can rank facts by it. DeerFlow is never imported here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from langchain_core.messages import BaseMessage

from deermem_middleware.memory.conversation import strip_server_blocks, user_words
from deermem_middleware.runtime.ids import context_value, current_config
from deermem_middleware.storage.base import DEFAULT_USER

__all__ = [
    "MAX_REMEMBERED_TURNS",
    "TurnMessages",
    "agent_or_none",
    "identity",
    "last_user_text",
    "turn_identity",
    "user_or_default",
    "user_text",
]

MAX_REMEMBERED_TURNS: Final = 1024
"""Turn-start messages kept for ranking (per thread, plus per user and agent without a thread)."""


def user_or_default(user_id: str | None) -> str:
    """DeerFlow's ``user_id``: None or blank is our ``"default"`` user."""
    return user_id if isinstance(user_id, str) and user_id.strip() else DEFAULT_USER


def agent_or_none(agent_name: str | None) -> str | None:
    """DeerFlow's ``agent_name``: None or blank is the engine's own agent (None)."""
    return agent_name if isinstance(agent_name, str) and agent_name.strip() else None


def identity(user_id: str | None, agent_name: str | None) -> tuple[str, str | None]:
    """(user, agent) of a DeerFlow call: :func:`user_or_default`, :func:`agent_or_none`."""
    return user_or_default(user_id), agent_or_none(agent_name)


def user_text(message: Any) -> str | None:
    """What the user said in a turn-start ``message`` (a message, a dict or text); None for an
    assistant or tool message. The user's own words (:func:`user_words`): never an upload list
    or another block DeerFlow's framework wrote, which would rank facts by file names."""
    if isinstance(message, BaseMessage):
        if message.type != "human":
            return None
        return user_words(message.content, message.additional_kwargs)
    if isinstance(message, Mapping):
        if message.get("role", message.get("type", "user")) not in ("user", "human"):
            return None
        return user_words(message.get("content"), message.get("additional_kwargs"))
    if isinstance(message, str):
        return strip_server_blocks(message)
    return None


def last_user_text(messages: list[BaseMessage]) -> str | None:
    """The newest non-blank thing the user said in ``messages``; None when there is none."""
    for message in reversed(messages):
        text = user_text(message)
        if text and text.strip():
            return text
    return None


def turn_identity(kwargs: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(user, agent, thread) named by ``on_turn_start``'s keywords: the keyword itself, else
    ``context`` / ``runtime.context``, else ``config["configurable"]``, else (thread only) the
    running LangGraph node's config."""
    runtime = kwargs.get("runtime")
    contexts = (kwargs.get("context"), context_value(runtime, "context"))
    config = kwargs.get("config")
    configurable = context_value(config, "configurable") if config is not None else None
    found: list[str | None] = []
    for key in ("user_id", "agent_name", "thread_id"):
        value = kwargs.get(key)
        for source in (*contexts, configurable):
            if value is None:
                value = context_value(source, key)
        if value is None and key == "thread_id":
            value = context_value(current_config().get("configurable"), key)
        found.append(str(value) if value is not None and str(value).strip() else None)
    return found[0], found[1], found[2]


class TurnMessages:
    """The newest turn-start message per thread (with the user and agent it named) and per
    (user, agent) for turns that named no thread; bounded, newest kept; thread-safe."""

    def __init__(self, limit: int = MAX_REMEMBERED_TURNS) -> None:
        self._threads: OrderedDict[str, tuple[str | None, str | None, str]] = OrderedDict()
        self._scopes: OrderedDict[tuple[str, str | None], str] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    @staticmethod
    def _put(table: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > limit:
            table.popitem(last=False)

    def remember(self, user: str | None, agent: str | None, thread: str | None, text: str) -> None:
        """File ``text`` under ``thread`` (with who it named), else under (user, agent)."""
        with self._lock:
            if thread is not None:
                self._put(self._threads, thread, (user, agent, text), self._limit)
            else:
                self._put(self._scopes, (user_or_default(user), agent), text, self._limit)

    def latest(self, user: str, agent: str | None, thread: str | None) -> str | None:
        """The thread's newest message unless it named another user or agent, else the newest
        one of (user, agent) that named no thread; None when there is neither."""
        with self._lock:
            entry = self._threads.get(thread) if thread is not None else None
            if entry is not None:
                said_user, said_agent, text = entry
                if said_user in (None, user) and said_agent in (None, agent):
                    return text
            return self._scopes.get((user, agent))

"""Whose conversation is this? Resolving user and thread ids from a LangGraph run.

Resolved on the calling thread at capture time: LangGraph's context variables are not visible on
the scheduler's threads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from .filtering import Turn
from .storage.base import DEFAULT_USER

__all__ = ["conversation_key", "current_config", "resolve_thread_id", "resolve_user_id"]


def current_config() -> Mapping[str, Any]:
    """The RunnableConfig of the running graph node, or {} outside a graph."""
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return {}


def _from_context(context: Any, key: str) -> Any:
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def resolve_user_id(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str:
    """User id from ``runtime.context.user_id`` / ``context["user_id"]``, else
    ``configurable["user_id"]``, else ``"default"``."""
    value = _from_context(getattr(runtime, "context", None), "user_id")
    if value is None:
        configurable = (config if config is not None else current_config()).get(
            "configurable"
        ) or {}
        value = configurable.get("user_id")
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_USER
    return str(value)


def resolve_thread_id(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str | None:
    """Thread id from the runtime's execution info, else ``configurable["thread_id"]``."""
    info = getattr(runtime, "execution_info", None)
    value = getattr(info, "thread_id", None)
    if value is None:
        configurable = (config if config is not None else current_config()).get(
            "configurable"
        ) or {}
        value = configurable.get("thread_id")
    return None if value is None else str(value)


def conversation_key(turns: Sequence[Turn]) -> str:
    """A stable stand-in thread id for runs without a checkpointer.

    Stateless callers resend the whole conversation on every call, so the first user message
    identifies the conversation: later calls of the same conversation debounce together, different
    conversations never replace each other's pending work.
    """
    first = next((t.text for t in turns if t.role == "user"), "")
    digest = hashlib.blake2b(first.encode("utf-8"), digest_size=8).hexdigest()
    return f"anon-{digest}"

"""Whose conversation is this? Resolving user and thread ids from a LangGraph run.

Resolved on the calling thread at capture time: LangGraph's context variables are not visible on
the scheduler's threads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage.base import DEFAULT_USER

__all__ = [
    "capture_key",
    "conversation_key",
    "current_config",
    "resolve_thread_id",
    "resolve_user_id",
    "safe_thread_id",
]


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
    """The progress key of a conversation captured without a thread id (no checkpointer).

    Stateless callers resend the whole conversation on every call, so the first user message is
    what its captures share. Two *different* conversations can share it too ("Hi!"): progress
    under this key is therefore content-addressed (turns already extracted are skipped, new
    ones never are), and each capture is its own job (:func:`capture_key`).
    """
    first = next((t.text for t in turns if t.role == "user"), "")
    digest = hashlib.blake2b(first.encode("utf-8", "backslashreplace"), digest_size=8)
    return f"anon-{digest.hexdigest()}"


def capture_key(turns: Sequence[Turn]) -> str:
    """The job id of one capture without a thread id: its conversation key and a digest of its
    turns, so captures of different conversations never replace each other's pending work."""
    digest = hashlib.blake2b(digest_size=8)
    for turn in turns:
        digest.update(turn.fingerprint.encode("utf-8", "backslashreplace") + b"\x00")
    return f"{conversation_key(turns)}:{digest.hexdigest()}"


def safe_thread_id(thread_id: str) -> str:
    """``thread_id`` as storable text: a lone surrogate (JSON ``"\ud800"``) is spelled out
    (``\ud800``), so the thread still has its own, stable key instead of failing every save."""
    return thread_id.encode("utf-8", "backslashreplace").decode("utf-8")

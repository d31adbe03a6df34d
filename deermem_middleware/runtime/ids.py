"""Whose conversation is this? Resolving user, agent and thread ids from a LangGraph run.

Hosts put identity in different places, and memory filed under the wrong user is a leak, so
the lookup order is fixed and documented:

- **user**: ``runtime.context.user_id`` (DeerFlow's gateway, ``create_agent(context=...)``) →
  ``configurable["user_id"]`` → ``configurable["langgraph_auth_user_id"]`` (the LangGraph
  server, with custom auth) → ``configurable["langgraph_auth_user"].identity`` (the server's
  user object) → ``"default"``;
- **agent**: ``runtime.context.agent_name`` → ``configurable["agent_name"]`` (where DeerFlow's
  lead agent reads it) → None (the engine's configured agent);
- **thread**: the runtime's execution info → ``configurable["thread_id"]``.

A *delegated* run — a subagent invoked from a tool of another agent — is not the user's
conversation: its "user" message is the lead agent's instruction. LangGraph nests such a run's
checkpoint namespace under the tool call's (``"tools:<id>|model:<id>"``), and the run inherits
the caller's thread id, context and agent name (measured: a ``create_agent`` invoked inside a
tool of another saw the lead's ``thread_id`` and ``user_id``), so without this check it would be
captured into the user's own thread. An agent that is a plain node of a bigger graph is nested
too, but not under a tool, and stays captured. Hosts can also mark a run explicitly.

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
    "DELEGATION_MARKERS",
    "capture_key",
    "context_value",
    "conversation_key",
    "current_config",
    "is_delegated_run",
    "resolve_agent_name",
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


def context_value(context: Any, key: str) -> Any:
    """``key`` of a run's context: a mapping's item or an object's attribute; None if absent."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def _configurable(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    configurable = (config if config is not None else current_config()).get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def _text(value: Any) -> str | None:
    """A usable id: a non-blank string, or any other value as text (an int, a UUID); None for
    nothing, blank text or a bool (a flag is not an id)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    return str(value)


def _auth_identity(user: Any) -> str | None:
    """The identity of the LangGraph server's user object (``BaseUser``), or of a dict form."""
    if user is None:
        return None
    if isinstance(user, Mapping):
        return _text(user.get("identity"))
    try:
        return _text(getattr(user, "identity", None))
    except Exception:  # a user object whose property raises: no identity, not a crash
        return None


def resolve_user_id(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str:
    """The user of this run (see the module docstring for the order), else ``"default"``."""
    value = _text(context_value(getattr(runtime, "context", None), "user_id"))
    if value is None:
        configurable = _configurable(config)
        value = (
            _text(configurable.get("user_id"))
            or _text(configurable.get("langgraph_auth_user_id"))
            or _auth_identity(configurable.get("langgraph_auth_user"))
        )
    return DEFAULT_USER if value is None else value


def resolve_agent_name(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str | None:
    """The agent this run names (context, then configurable ``agent_name``), or None."""
    value = _text(context_value(getattr(runtime, "context", None), "agent_name"))
    if value is None:
        value = _text(_configurable(config).get("agent_name"))
    return value


DELEGATION_MARKERS = ("is_subagent", "subagent", "subagent_type", "subagent_name")
"""Keys that mark a run as delegated when truthy, in the run's context, ``configurable`` or
``metadata`` (for hosts that run subagents in a fresh context, where nesting is not visible)."""


TOOL_NODE = "tools"
"""The node that runs tools in ``create_agent`` graphs: a run nested under it was started by a
tool call (a ``task``/delegate tool), not by the user."""


def _inside_a_tool(namespace: str) -> bool:
    """``"tools:<id>|model:<id>"``: this run is nested under a tool call of an outer agent. An
    agent that is simply a node of a bigger graph (``"agent:<id>|model:<id>"``) is not."""
    outer = namespace.split("|")[:-1]
    return any(segment.split(":", 1)[0] == TOOL_NODE for segment in outer)


def is_delegated_run(runtime: Any = None, config: Mapping[str, Any] | None = None) -> bool:
    """True for a subagent's run: nested in another graph's run, or marked by the host."""
    config = config if config is not None else current_config()
    configurable = _configurable(config)
    metadata = config.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    for namespace in (configurable.get("checkpoint_ns"), metadata.get("langgraph_checkpoint_ns")):
        if isinstance(namespace, str) and _inside_a_tool(namespace):
            return True
    context = getattr(runtime, "context", None)
    return any(
        bool(context_value(context, key)) or bool(configurable.get(key)) or bool(metadata.get(key))
        for key in DELEGATION_MARKERS
    )


def resolve_thread_id(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str | None:
    """Thread id from the runtime's execution info, else ``configurable["thread_id"]``."""
    info = getattr(runtime, "execution_info", None)
    value = getattr(info, "thread_id", None)
    if value is None:
        value = _configurable(config).get("thread_id")
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

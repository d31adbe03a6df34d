"""``memory.backend_config.failure_policy``: what a failed memory read does to DeerFlow's turn.

DeerFlow's host (``agents/lead_agent/prompt.py``; with PR #4732 ``agents/memory/context.py``)
reads ``backend_config["failure_policy"]["read"]`` itself: when loading the memory context
raises DeerFlow's ``MemoryManagerError`` and the policy is ``fail_closed``, it re-raises (the
run fails); anything else is logged and the turn goes on without memory. So the backend must
*raise* on a failed read under ``fail_closed`` and answer "" (logged) under ``fail_open``,
DeerFlow's default. ``write`` is DeerFlow's key too (mem0, OpenViking: ``log_and_drop`` or
``raise``); it is accepted and has no effect here: captures are journaled and retried, never
dropped and never raised into the turn.

The block is taken out of ``backend_config`` before our config loader reads the rest (it is the
host's key, not one of ours). DeerFlow is never imported here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Literal, cast, get_args

from deermem_middleware.config import ConfigError
from deermem_middleware.storage.base import CorruptedMemoryError

__all__ = ["KEY", "WHERE", "ReadPolicy", "read_error", "read_policy", "without_policy"]

logger = logging.getLogger(__name__)

KEY: Final = "failure_policy"
WHERE: Final = f"memory.backend_config.{KEY}"

ReadPolicy = Literal["fail_open", "fail_closed"]
"""``fail_open`` (DeerFlow's default): a failed read is logged and injects nothing.
``fail_closed``: it raises DeerFlow's ``MemoryManagerError``, which DeerFlow re-raises."""

_READ: Final = frozenset(get_args(ReadPolicy))
_WRITE: Final = frozenset({"log_and_drop", "raise"})
"""DeerFlow's write policies (mem0's and OpenViking's): accepted, without effect here."""


def read_policy(backend_config: Mapping[str, Any] | None) -> ReadPolicy:
    """``failure_policy.read`` of ``backend_config`` (``fail_open`` when absent or null).

    :class:`~deermem_middleware.config.ConfigError` naming the key when the block is not a
    mapping or ``read`` / ``write`` is not one of DeerFlow's values; an unknown key of the
    block is a WARNING (DeerFlow passes the block verbatim, as for the rest of the config)."""
    block = (backend_config or {}).get(KEY)
    if block is None:
        return "fail_open"
    if not isinstance(block, Mapping):
        raise ConfigError(
            f"{WHERE} must be a mapping {{read: fail_open|fail_closed, write: ...}}, "
            f"got {type(block).__name__}"
        )
    unknown = sorted(str(key) for key in block if key not in ("read", "write"))
    if unknown:
        logger.warning("%s: unknown keys ignored (check the spelling): %s", WHERE, unknown)
    write = block.get("write")
    if write is not None and write not in _WRITE:
        raise ConfigError(f"{WHERE}.write must be one of {sorted(_WRITE)}, got {write!r}")
    read = block.get("read")
    if read is None:
        return "fail_open"
    if read not in _READ:
        raise ConfigError(f"{WHERE}.read must be one of {sorted(_READ)}, got {read!r}")
    return cast(ReadPolicy, read)


def without_policy(backend_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``backend_config`` without the host's ``failure_policy`` block, for our config loader
    (which would warn about it as an unknown key)."""
    return {k: v for k, v in (backend_config or {}).items() if k != KEY}


def read_error(
    exc: Exception,
    user_id: str | None,
    manager_error: type[RuntimeError],
    corruption_error: type[RuntimeError],
) -> RuntimeError:
    """``exc`` (a failed memory read under ``fail_closed``) as DeerFlow's error, whose classes
    the manager passes in: its own errors as they are, unreadable memory as
    ``corruption_error`` (``MemoryCorruptionError``), anything else as ``manager_error``
    (``MemoryManagerError``) naming the user and the cause."""
    if isinstance(exc, manager_error):
        return exc
    why = f"reading the memory of user {user_id!r} failed: {type(exc).__name__}: {exc}"
    if isinstance(exc, CorruptedMemoryError):
        return corruption_error(why)
    return manager_error(why)

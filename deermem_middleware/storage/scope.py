"""Whose memory, and how storage fails: the words of the storage contract.

Apart from :mod:`~deermem_middleware.storage.base` (the contract itself) because the pending
journal and its entries use them too, and the contract's default journal is the in-memory one:
with these here, ``base`` imports the journal and nothing below imports ``base`` back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "RESERVED_USER",
    "CorruptedMemoryError",
    "MemoryScope",
    "RevisionConflict",
    "StorageError",
    "is_encodable",
]


def is_encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


DEFAULT_USER = "default"
DEFAULT_AGENT = "__default__"
RESERVED_USER = "__deermem_console__"
"""The user id of the memory console's own documents (its audit log) in a storage: not a person,
so listings of users leave it out."""


@dataclass(frozen=True, slots=True, order=True)
class MemoryScope:
    """Whose memory: one document per (user, agent). Users never share anything."""

    user_id: str = DEFAULT_USER
    agent_name: str = DEFAULT_AGENT

    def __post_init__(self) -> None:
        for name in ("user_id", "agent_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"MemoryScope.{name} must be a non-empty string, got {value!r}")
            if "\x00" in value:
                raise ValueError(f"MemoryScope.{name} must not contain NUL characters")
            if not is_encodable(value):
                # JSON "\ud800" (e.g. from a web request) decodes to a lone surrogate: no
                # storage can write it, and mapping it to another id could merge two users
                raise ValueError(
                    f"MemoryScope.{name} is not valid Unicode (a lone surrogate): {value!r}"
                )


class StorageError(RuntimeError):
    """Base class for storage failures."""


class RevisionConflict(StorageError):
    """Someone else saved since we loaded: reload, re-apply, try again."""

    def __init__(self, scope: MemoryScope, expected: int, actual: int) -> None:
        super().__init__(
            f"memory of user {scope.user_id!r} / agent {scope.agent_name!r} is at revision "
            f"{actual}, expected {expected}"
        )
        self.scope = scope
        self.expected = expected
        self.actual = actual


class CorruptedMemoryError(StorageError):
    """A stored document cannot be read. It is never overwritten silently."""

    def __init__(self, location: str | Path, reason: str) -> None:
        super().__init__(
            f"memory file {location} is corrupted ({reason}); it was left untouched — fix or move "
            "it away to continue"
        )
        self.location = str(location)
        self.reason = reason

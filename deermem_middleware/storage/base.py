"""The storage contract every backend honours.

A memory document lives under a *scope* — (user_id, agent_name) — and carries a *revision*, a
counter that grows by one on every successful save. ``save`` is compare-and-set: it succeeds only
when the stored revision still equals ``expected_revision``; otherwise it raises
:class:`RevisionConflict` and the caller reloads and re-applies. This is what lets several workers
(threads, processes, hosts) share one memory without losing each other's updates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..schema import Memory

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "CorruptedMemoryError",
    "MemoryScope",
    "MemoryStorage",
    "RevisionConflict",
    "StorageError",
    "StoredMemory",
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


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """A loaded document and the revision it was loaded at (0 = never saved)."""

    memory: Memory
    revision: int


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


@runtime_checkable
class MemoryStorage(Protocol):
    """Where memory documents live. Implementations must be thread-safe."""

    def load(self, scope: MemoryScope) -> StoredMemory:
        """The document of ``scope`` (an empty one at revision 0 when there is none)."""
        ...

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int) -> int:
        """Store ``memory`` if the stored revision is ``expected_revision``; return the new one.

        Raises :class:`RevisionConflict` otherwise.
        """
        ...

    def delete(self, scope: MemoryScope) -> bool:
        """Remove the document of ``scope``; True when something was removed."""
        ...

    def list_scopes(self) -> list[MemoryScope]:
        """Every scope that has a stored document."""
        ...

    def describe(self, scope: MemoryScope) -> str:
        """Where the document of ``scope`` lives, for people (a path, a table key)."""
        ...

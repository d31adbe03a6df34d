"""The audit log: every change a person makes through the console — who, when, what, before and
after — kept in the memory's own storage, bounded.

**Where.** One document in the configured storage, at the reserved scope
:data:`AUDIT_SCOPE` (user ``__deermem_console__``), under the key ``consoleAudit``. It is written
with the storage's compare-and-set loop like any memory, so every backend (JSON files, SQLite,
PostgreSQL, a LangGraph store) keeps it with no new table or file format, and two consoles
writing at once lose nothing. Listings of users leave the reserved scope out.

**Bounded.** The newest :data:`DEFAULT_MAX_ENTRIES` entries are kept (``max_entries``); the
oldest go first. A before/after pair is at most two facts (4 kB each at most), so the document
stays around a megabyte at the default.

**Forget erases here too.** Forgetting a user removes the texts of their entries (the before
and after) and keeps who changed what and when; the forget itself is logged with its counts,
never with what was forgotten.

The entry algebra is pure (:func:`appended`, :func:`redacted`); :class:`AuditLog` is the thin
stateful shell over a storage.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Protocol

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.base import (
    RESERVED_USER,
    MemoryScope,
    MemoryStorage,
    Mutate,
    StoredMemory,
)

__all__ = [
    "AUDIT_KEY",
    "AUDIT_SCOPE",
    "DEFAULT_MAX_ENTRIES",
    "RESERVED_USER",
    "AuditEntry",
    "AuditLog",
    "appended",
    "redacted",
]

logger = logging.getLogger(__name__)

AUDIT_SCOPE: Final = MemoryScope(RESERVED_USER, "audit")
AUDIT_KEY: Final = "consoleAudit"
DEFAULT_MAX_ENTRIES: Final = 500


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change by a person. ``action``: ``fact.add``, ``fact.edit``, ``fact.delete``,
    ``import``, ``forget``; ``before``/``after``: the fact (or a summary of the change) as
    stored, None where there is none."""

    at: str
    operator: str
    role: str
    action: str
    user: str
    agent: str | None
    fact_id: str | None = None
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None
    detail: str = ""
    redacted: bool = False
    """True when a forget removed the before and after texts."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["factId"] = data.pop("fact_id")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditEntry:
        return cls(
            at=str(data.get("at", "")),
            operator=str(data.get("operator", "")),
            role=str(data.get("role", "")),
            action=str(data.get("action", "")),
            user=str(data.get("user", "")),
            agent=data.get("agent"),
            fact_id=data.get("factId"),
            before=data.get("before"),
            after=data.get("after"),
            detail=str(data.get("detail", "")),
            redacted=data.get("redacted") is True,
        )


def _entries(memory: Memory) -> list[dict[str, Any]]:
    raw = (memory.model_extra or {}).get(AUDIT_KEY)
    return [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []


def _with(memory: Memory, entries: list[dict[str, Any]]) -> Memory:
    return Memory.from_json_dict({**memory.to_json_dict(), AUDIT_KEY: entries})


def appended(memory: Memory, entry: AuditEntry, max_entries: int) -> Memory:
    """The audit document with ``entry`` last and only the newest ``max_entries`` kept."""
    entries = [*_entries(memory), entry.to_json()]
    return _with(memory, entries[-max_entries:] if max_entries > 0 else [])


def redacted(memory: Memory, user_id: str, agent_name: str | None) -> tuple[Memory, int]:
    """The audit document with the texts of ``user_id``'s entries (one agent's with
    ``agent_name``) removed; and how many entries were redacted."""
    count = 0
    entries = []
    for entry in _entries(memory):
        mine = entry.get("user") == user_id and (
            agent_name is None or entry.get("agent") == agent_name
        )
        if mine and (entry.get("before") is not None or entry.get("after") is not None):
            entry = {**entry, "before": None, "after": None, "redacted": True}
            count += 1
        entries.append(entry)
    return (_with(memory, entries) if count else memory), count


class Documents(Protocol):
    """Where the audit document lives: a :class:`MemoryStorage`, or the engine (its ``load``
    and ``update``: the console reaches the storage through the engine's public surface)."""

    def load(self, scope: MemoryScope) -> StoredMemory: ...

    def update(self, scope: MemoryScope, mutate: Mutate, *, max_conflicts: int = ...) -> int: ...


class AuditLog:
    """The audit log of one storage (see the module docstring)."""

    def __init__(
        self, storage: Documents | MemoryStorage, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        self.storage = storage
        self.max_entries = max_entries

    def record(self, entry: AuditEntry) -> None:
        """Append ``entry``. The change it describes is already stored: a failure here is
        logged loudly with the entry, and the change stands."""
        try:
            self.storage.update(AUDIT_SCOPE, lambda m: appended(m, entry, self.max_entries))
        except Exception:
            logger.exception("console audit: could not store the entry %r", entry.to_json())

    def forget(self, user_id: str, agent_name: str | None) -> int:
        """Redact the forgotten user's entries; how many were redacted."""
        count = 0

        def change(memory: Memory) -> Memory:
            nonlocal count
            result, count = redacted(memory, user_id, agent_name)
            return result

        self.storage.update(AUDIT_SCOPE, change)
        return count

    def entries(
        self,
        *,
        user: str | None = None,
        agent: str | None = None,
        visible: Any = None,
    ) -> list[AuditEntry]:
        """Entries newest first, of ``user`` (and ``agent``) when given; ``visible(user_id)``
        keeps only the users an operator may see."""
        memory = self.storage.load(AUDIT_SCOPE).memory
        out = []
        for data in reversed(_entries(memory)):
            entry = AuditEntry.from_json(data)
            if user is not None and entry.user != user:
                continue
            if agent is not None and entry.agent not in (agent, None):
                continue
            if visible is not None and not visible(entry.user):
                continue
            out.append(entry)
        return out

"""Durable pending work: captures waiting for their debounce survive a crash, and are seen by
every replica.

A capture sits in memory for ``debounce_seconds`` (30 s by default) before its extraction runs;
a process killed in that window would lose it. So each capture is also written to a *journal
entry* — one per (user, agent, thread), replaced by the thread's next capture exactly as the
scheduler replaces its pending work — and the entry is removed once the update is stored. Where
the journal lives in the storage itself (JSON files, SQLite, PostgreSQL) every process that
shares the storage sees it: a restarted process replays what a dead one left, and replicas share
one extraction per burst (see :mod:`deermem_middleware.storage.pending` for how an entry changes
hands, and :mod:`deermem_middleware.runtime.replicas` for who does what).

Replaying never applies anything twice: the update's thread watermark is stored atomically with
the memory, so turns that were already applied before a crash (a crash between saving the memory
and removing the entry) are recognised and skipped.

A journal implements four methods — :meth:`PendingJournal.read`, a compare-and-set
:meth:`PendingJournal._write_if`, :meth:`PendingJournal.entries` and
:meth:`PendingJournal.forget` — and inherits every change of an entry as one compare-and-set
loop (:meth:`PendingJournal.change`). A backend that can do a capture in one statement overrides
:meth:`PendingJournal.capture` (PostgreSQL does: it is on the agent's path).
"""

from __future__ import annotations

import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage.pending import (
    JournalEntry,
    Owner,
    captured,
    job_token,
    process_owner,
)
from deermem_middleware.storage.scope import MemoryScope, StorageError

__all__ = [
    "InMemoryJournal",
    "JournalConflict",
    "JournalEntry",
    "PendingJournal",
    "job_token",
    "process_owner",
]

CHANGE_ATTEMPTS = 50
"""Lost compare-and-set races before a change of one entry gives up (each race is another
process writing that very entry meanwhile: a capture of the same thread, a claim)."""

Change = Callable[[JournalEntry | None], JournalEntry | None]
"""A change of one entry: the entry as it should be (None: removed); returning the entry it was
given (the same object) writes nothing."""


class JournalConflict(StorageError):
    """An entry kept changing under a compare-and-set loop (:data:`CHANGE_ATTEMPTS` races)."""


def new_version() -> str:
    return secrets.token_hex(6)


def _stamped(entry: JournalEntry) -> JournalEntry:
    return replace(entry, version=new_version())


class PendingJournal(ABC):
    """Where pending captures are recorded until their update is stored: one entry per
    (scope, thread), replaced whole by the thread's next capture (see the module docstring)."""

    shared: bool = True
    """Other processes see these entries (files, a database); False for a journal that lives
    in this process only — nobody else could take part in its entries."""

    # -- what a journal implements ------------------------------------------------------------

    @abstractmethod
    def read(self, scope: MemoryScope, thread_id: str) -> JournalEntry | None:
        """The entry of this thread (None: none; an unreadable one is set aside and logged)."""

    @abstractmethod
    def _write_if(
        self,
        scope: MemoryScope,
        thread_id: str,
        expected: str | None,
        entry: JournalEntry | None,
    ) -> bool:
        """Compare-and-set: when the stored entry's version is ``expected`` (None: there is no
        entry), store ``entry`` (None: remove it); False when the entry was another."""

    @abstractmethod
    def entries(self) -> list[JournalEntry]:
        """Every recorded entry (unreadable ones are set aside and logged)."""

    @abstractmethod
    def forget(self, scope: MemoryScope) -> int:
        """Remove every entry of ``scope``; returns how many."""

    # -- inherited ----------------------------------------------------------------------------

    def change(
        self, scope: MemoryScope, thread_id: str, change: Change
    ) -> tuple[JournalEntry | None, JournalEntry | None]:
        """Apply ``change`` to the thread's entry as one atomic step: read, change, write if
        nobody wrote meanwhile, else read again. Returns (before, after); ``after`` carries the
        version written. Raises :class:`JournalConflict` after :data:`CHANGE_ATTEMPTS` races."""
        for _ in range(CHANGE_ATTEMPTS):
            before = self.read(scope, thread_id)
            after = change(before)
            if after is before or (after is None and before is None):
                return before, before
            stamped = None if after is None else _stamped(after)
            expected = None if before is None else before.version
            if self._write_if(scope, thread_id, expected, stamped):
                return before, stamped
        raise JournalConflict(
            f"the pending capture of thread {thread_id!r} kept changing "
            f"({CHANGE_ATTEMPTS} compare-and-set races)"
        )

    def swap(self, before: JournalEntry, after: JournalEntry | None) -> bool:
        """Replace ``before`` (as read) by ``after`` (None: remove it) if nobody wrote the
        entry since; False when somebody did."""
        stamped = None if after is None else _stamped(after)
        return self._write_if(before.scope, before.thread_id, before.version, stamped)

    def capture(self, entry: JournalEntry) -> None:
        """Record ``entry`` as its thread's newest capture (:func:`~.pending.captured`)."""
        self.change(entry.scope, entry.thread_id, lambda old: captured(old, entry))

    def put(
        self,
        scope: MemoryScope,
        thread_id: str,
        turns: tuple[Turn, ...],
        conversation: str | None = None,
        *,
        expires_in: float | None = None,
        owner: Owner | None = None,
    ) -> None:
        """Record the pending capture of this thread, owned by ``owner`` (default: this
        process); unclaimed, it is anyone's to take over ``expires_in`` seconds from now (None:
        the legacy rule)."""
        self.capture(
            JournalEntry.mine(
                scope, thread_id, turns, conversation, expires_in=expires_in, owner=owner
            )
        )

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        """Remove the entry if it is still the capture identified by ``token``."""
        self.change(
            scope, thread_id, lambda old: None if old is not None and old.token == token else old
        )

    def orphans(self, now: float) -> list[JournalEntry]:
        """The entries nobody is known to work on at ``now`` (:attr:`JournalEntry.orphan_at`
        passed) — a superset is fine: callers check :meth:`JournalEntry.takeable`."""
        return [e for e in self.entries() if e.orphan_at <= now]

    def describe(self) -> str:
        return type(self).__name__


class InMemoryJournal(PendingJournal):
    """A journal that lives as long as the process (for storages that are not durable either)."""

    shared = False

    def __init__(self) -> None:
        self._entries: dict[tuple[MemoryScope, str], JournalEntry] = {}
        self._lock = threading.Lock()

    def read(self, scope: MemoryScope, thread_id: str) -> JournalEntry | None:
        with self._lock:
            return self._entries.get((scope, thread_id))

    def _write_if(
        self,
        scope: MemoryScope,
        thread_id: str,
        expected: str | None,
        entry: JournalEntry | None,
    ) -> bool:
        key = (scope, thread_id)
        with self._lock:
            current = self._entries.get(key)
            if (None if current is None else current.version) != expected:
                return False
            if entry is None:
                self._entries.pop(key, None)
            else:
                self._entries[key] = entry
            return True

    def change(
        self, scope: MemoryScope, thread_id: str, change: Change
    ) -> tuple[JournalEntry | None, JournalEntry | None]:
        """Under the lock, in one step: no version to compare."""
        key = (scope, thread_id)
        with self._lock:
            before = self._entries.get(key)
            after = change(before)
            if after is None:
                self._entries.pop(key, None)
            elif after is not before:
                self._entries[key] = after
            return before, after

    def swap(self, before: JournalEntry, after: JournalEntry | None) -> bool:
        key = (before.scope, before.thread_id)
        with self._lock:
            if self._entries.get(key) is not before:
                return False
            if after is None:
                del self._entries[key]
            else:
                self._entries[key] = after
            return True

    def capture(self, entry: JournalEntry) -> None:
        """The entry replaced as it is: nobody else can claim it (the journal is this
        process's), so there is nothing of the old one to keep — a capture costs what it did
        before replicas shared bursts."""
        with self._lock:
            self._entries[(entry.scope, entry.thread_id)] = entry

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        key = (scope, thread_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.token == token:
                del self._entries[key]

    def entries(self) -> list[JournalEntry]:
        with self._lock:
            return list(self._entries.values())

    def forget(self, scope: MemoryScope) -> int:
        with self._lock:
            keys = [k for k in self._entries if k[0] == scope]
            for key in keys:
                del self._entries[key]
            return len(keys)

"""The storage contract every backend honours.

A memory document lives under a *scope* — (user_id, agent_name) — and carries a *revision*, a
counter that grows by one on every successful save. ``save`` is compare-and-set: it succeeds only
when the stored revision still equals ``expected_revision``; otherwise it raises
:class:`RevisionConflict` and the caller reloads and re-applies. This is what lets several workers
(threads, processes, hosts) share one memory without losing each other's updates.

Two more promises make a user's first read in a process cheap, on every backend that makes them
(:attr:`MemoryStorage.stores_derived`; the conformance suite holds each backend to them):

- **Derived data travels with its revision.** ``save(..., derived=bytes)`` stores an opaque
  blob — what the read path needs of each fact, computed when it was written
  (:mod:`deermem_middleware.derived`) — atomically with the document; ``load`` hands it back
  with the revision it was written with (:attr:`StoredMemory.derived_revision`), so a reader
  knows whether it belongs to the document it got. A backend without it still works: the
  engine then derives in the background and keeps the result in the process.
- **The revision alone is cheap.** :meth:`MemoryStorage.revision` answers without reading the
  document (a ``stat``, one small column), so a warm process asks only that before each model
  call and rebuilds nothing while it is unchanged; caches are keyed by (scope, revision), never
  by the identity of the object a backend hands out.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.journal import InMemoryJournal, PendingJournal
from deermem_middleware.storage.scope import (
    DEFAULT_AGENT,
    DEFAULT_USER,
    RESERVED_USER,
    CorruptedMemoryError,
    MemoryScope,
    RevisionConflict,
    StorageError,
    is_encodable,
)

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "RESERVED_USER",
    "CorruptedMemoryError",
    "Derive",
    "MemoryScope",
    "MemoryStorage",
    "Mutate",
    "PurgeReceipt",
    "RevisionConflict",
    "StorageError",
    "StoredMemory",
    "is_encodable",
    "prepare_write",
]


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """A loaded document and the revision it was loaded at (0 = never saved), with the derived
    data stored beside it and the revision that data was written with (0: none)."""

    memory: Memory
    revision: int
    derived: bytes | None = None
    derived_revision: int = 0

    @property
    def derived_exact(self) -> bool:
        """True when :attr:`derived` was written with this very revision of the document."""
        return self.derived is not None and self.derived_revision == self.revision > 0


@dataclass
class PurgeReceipt:
    """What a purge deleted, line by line, for the person to keep, with the counts.

    :attr:`lines` lists each scope's document and pending captures (scopes sorted), then the
    other files and keys in the order they went; :attr:`texts` are the deleted facts' contents,
    so the caller can drop their embedding vectors.
    """

    documents: int = 0
    facts: int = 0
    pending: int = 0
    files: int = 0
    keys: int = 0
    texts: list[str] = field(default_factory=list)
    _scoped: dict[MemoryScope, list[str]] = field(default_factory=dict, repr=False)
    _other: list[str] = field(default_factory=list, repr=False)

    @property
    def lines(self) -> list[str]:
        scoped = [line for scope in sorted(self._scoped) for line in self._scoped[scope]]
        return [*scoped, *self._other]

    def add(self, line: str) -> None:
        """A deleted file, key or folder (or a note), listed after the documents."""
        self._other.append(line)

    def add_document(self, scope: MemoryScope, where: str, stored: StoredMemory | None) -> None:
        """The document of ``scope`` at ``where`` was deleted (``stored`` None: unreadable)."""
        texts = [f.content for f in stored.memory.facts] if stored is not None else []
        state = f"revision {stored.revision}, " if stored is not None else "unreadable, "
        self.documents += 1
        self.facts += len(texts)
        self.texts.extend(texts)
        line = f"document {where} ({state}{len(texts)} fact(s))"
        self._scoped.setdefault(scope, []).insert(0, line)  # before its pending captures

    def add_pending(self, scope: MemoryScope, count: int) -> None:
        """``count`` pending captures of ``scope`` were dropped from the journal."""
        if count:
            self.pending += count
            line = f"pending captures of agent {scope.agent_name!r}: {count}"
            self._scoped.setdefault(scope, []).append(line)


Mutate = Callable[[Memory], "Memory | None"]
"""A change to a document: the new document, or None (or the document itself) for "nothing to
write"."""

Derive = Callable[[Memory, StoredMemory], "bytes | None"]
"""What reads need of a document about to be stored (``memory``; ``stored``: what is stored
now, whose derived data it may reuse): the derived blob to store with it, or None for none new
(with an unchanged document: nothing to write)."""


class MemoryStorage(ABC):
    """Where memory documents live. Implementations must be thread-safe.

    Like LangGraph's ``BaseStore``: a backend implements four methods — :meth:`load`,
    :meth:`save` (compare-and-set on the revision), :meth:`delete` and :meth:`list_scopes` — and
    inherits the rest, overriding what it can do better: :meth:`update` (one compare-and-set
    loop that the updater and the command line share; the file backend runs it under its lock),
    :meth:`purge` (erase a user; backends sweep their own leftovers too), :meth:`journal`
    (where pending captures are recorded), :meth:`setup` and :meth:`close`.
    Callers never probe for capabilities: every storage has them all — except
    :attr:`stores_derived`, which a backend sets when it keeps derived data with its documents.
    """

    stores_derived: bool = False
    """True when :meth:`save` stores its ``derived`` blob atomically with the document and
    :meth:`load` hands it back (see the module docstring). False: ``derived`` is never passed."""

    @abstractmethod
    def load(self, scope: MemoryScope) -> StoredMemory:
        """The document of ``scope`` (an empty one at revision 0 when there is none)."""

    @abstractmethod
    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        """Store ``memory`` if the stored revision is ``expected_revision``; return the new one.
        With :attr:`stores_derived`, ``derived`` is stored with it, in the same atomic step
        (None: the document has none; whatever was stored before stays, marked with the
        revision it was written for).

        Raises :class:`RevisionConflict` otherwise (nothing written, ``derived`` included).
        """

    @abstractmethod
    def delete(self, scope: MemoryScope) -> bool:
        """Remove the document of ``scope``; True when something was removed."""

    @abstractmethod
    def list_scopes(self) -> list[MemoryScope]:
        """Every scope that has a stored document."""

    def revision(self, scope: MemoryScope) -> int:
        """The stored revision of ``scope`` (0: no document), without reading the document
        where the backend can: what a warm reader asks before each model call. Default: a
        :meth:`load`."""
        return self.load(scope).revision

    def holds(self, scope: MemoryScope) -> bool:
        """Whether ``scope`` has a document of its own — what a scope's first use asks (the
        DeerFlow carry-over imports only into a scope that has none). Default: a stored
        revision; a layer that composes scopes from other documents answers for its own."""
        return self.revision(scope) > 0

    @property
    def innermost(self) -> MemoryStorage:
        """The backend itself, under any layer wrapped around it (a DeerFlow carry-over): for
        code that asks which backend it is."""
        return self

    def describe(self, scope: MemoryScope) -> str:
        """Where the document of ``scope`` lives, for people (a path, a table key)."""
        return f"{type(self).__name__}: user {scope.user_id!r}, agent {scope.agent_name!r}"

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        """Load, ``mutate`` and save at the loaded revision, as one atomic step: when another
        writer saved first, reload and ``mutate`` again (jittered, growing back-off, so
        competing writers stop colliding). Returns the revision after the call; ``mutate``
        returning None or the document itself writes nothing — unless ``derive`` (used only
        with :attr:`stores_derived`) has new derived data for it, which is then stored with
        the same document. Raises :class:`RevisionConflict` after ``max_conflicts`` lost
        races, and whatever ``mutate`` raises (nothing written)."""
        stored = self.load(scope)
        conflicts = 0
        while True:
            step = prepare_write(self, stored, mutate, derive)
            if step is None:
                return stored.revision
            memory, derived = step
            try:
                if derived is None:
                    return self.save(scope, memory, stored.revision)
                return self.save(scope, memory, stored.revision, derived=derived)
            except RevisionConflict:
                conflicts += 1
                if conflicts > max_conflicts:
                    raise
                time.sleep(random.uniform(0, min(0.25, 0.002 * 2 ** min(conflicts, 10))))
                stored = self.load(scope)

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        """Delete every stored document of ``user_id`` (only agent ``agent_name``'s when given),
        each read first to count its facts (an unreadable one is deleted all the same).
        Backends extend it to sweep what else names the user (copies, locks, journal entries)."""
        MemoryScope(user_id, DEFAULT_AGENT if agent_name is None else agent_name)  # blank: refused
        receipt = PurgeReceipt()
        for scope in self.list_scopes():
            if scope.user_id != user_id or agent_name not in (None, scope.agent_name):
                continue
            try:
                stored: StoredMemory | None = self.load(scope)
            except CorruptedMemoryError:
                stored = None
            where = self.describe(scope)
            if self.delete(scope):
                receipt.add_document(scope, where, stored)
        return receipt

    def journal(self, *, fsync: bool = False) -> PendingJournal:
        """Where this storage's pending captures are recorded until stored (default: in this
        process's memory, for storages that are not durable either)."""
        return InMemoryJournal()

    def setup(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Create what the storage needs (tables); idempotent. Default: nothing to create."""

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Release what the storage opened (a connection pool). Default: nothing."""


def prepare_write(
    storage: MemoryStorage, stored: StoredMemory, mutate: Mutate, derive: Derive | None
) -> tuple[Memory, bytes | None] | None:
    """One step of :meth:`MemoryStorage.update`: the document to save and its derived blob, or
    None when there is nothing to write (the document unchanged and nothing new derived).
    Backends that run their own update loop (under a lock) call it too."""
    changed = mutate(stored.memory)
    same = changed is None or changed is stored.memory
    memory = stored.memory if same else changed
    assert memory is not None
    derived = None
    if derive is not None and storage.stores_derived and (not same or stored.revision > 0):
        derived = derive(memory, stored)
    if same and derived is None:
        return None
    return memory, derived

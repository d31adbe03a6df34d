"""A user's DeerFlow memory carried over when DeerFlow's memory backend is switched to ours.

Switching ``memory.manager_class`` moves nothing: DeerFlow's own memory stays in its data folder
(v1.0 ``memory.json`` files in four places, or HEAD's summary file plus one Markdown file per
fact), and a new backend starts empty. Measured on DeerFlow itself (f1f4af9): after the switch a
user's Memory page was empty and nothing was injected until someone ran
``deermem import --deerflow``; the user saw their memory gone.

So the storage of an engine that knows DeerFlow's data folder (``deerflow_memory_folder``, set
when the config is DeerFlow's) is wrapped in :class:`CarryOverStorage`. The first time a
(user, agent) is read or written and we hold no document for it, the DeerFlow memory of that
scope is read (:func:`~deermem_middleware.formats.deerflow_layout.read_folder`, leniently, each bad
fact repaired or dropped on its own) and imported by the same change ``deermem import --deerflow``
uses (:func:`import_scope`: merge, caps), with a :class:`~deermem_middleware.memory.document.
CarriedOver` record in the document and one INFO line. Then:

- **Once.** The import is one compare-and-set write of a document that did not exist; a
  concurrent first read (a thread, a process, a replica) that loses the race finds the record
  and writes nothing. Later reads see a document and never look at DeerFlow's folder again; a
  scope DeerFlow holds nothing for is looked up once per process.
- **Kept.** Clearing the memory on DeerFlow's page keeps the record (nothing comes back);
  erasing a user (``delete_memory``, ``deermem forget``) leaves an empty document that says so,
  for every scope DeerFlow holds of that user, and the receipt names DeerFlow's files, which
  are DeerFlow's to delete.
- **Read only.** DeerFlow's files are opened for reading and nothing else.
- ``carry_over_deerflow_memory: false`` turns it off (``deermem import --deerflow`` remains).

Reading one scope's files costs a few ``stat`` calls and the parse of its files, once per
scope and process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deermem_middleware.formats.deerflow_layout import (
    DEFAULT_AGENT,
    FolderRead,
    Piece,
    read_folder,
    scope_locations,
)
from deermem_middleware.formats.deerflow_paths import AGENT_NAME_PATTERN, USER_ID_PATTERN
from deermem_middleware.formats.importing import ImportChange, log_import_cuts
from deermem_middleware.memory.document import CarriedOver, Memory, utc_now_iso
from deermem_middleware.storage.base import (
    Derive,
    MemoryScope,
    MemoryStorage,
    Mutate,
    PurgeReceipt,
    RevisionConflict,
    StoredMemory,
)
from deermem_middleware.storage.layer import StorageLayer

__all__ = ["CarryOverStorage", "ScopeImport", "facts_read", "import_scope"]

logger = logging.getLogger(__name__)


@dataclass
class ScopeImport:
    """One scope's DeerFlow memory imported: the change that was saved and where it came from."""

    user: str
    agent: str
    revision: int
    change: ImportChange
    pieces: list[Piece]

    @property
    def found(self) -> int:
        return facts_read(self.pieces)

    @property
    def repaired(self) -> int:
        return sum(p.report.facts_repaired for p in self.pieces)

    @property
    def ids_repaired(self) -> int:
        """Facts kept under a new id (:mod:`~deermem_middleware.formats.fact_ids`)."""
        return sum(p.report.ids_repaired for p in self.pieces)

    @property
    def dropped(self) -> int:
        return sum(p.report.facts_dropped for p in self.pieces)


def facts_read(pieces: list[Piece]) -> int:
    """Facts found in ``pieces`` (kept, repaired or dropped)."""
    return sum(p.report.facts_read for p in pieces)


def import_scope(
    update: Callable[[MemoryScope, Callable[[Memory], Memory]], int],
    folder: FolderRead,
    scope: MemoryScope,
    *,
    replace: bool,
    max_facts: int,
    clock: Callable[[], str],
    note: CarriedOver | None = None,
) -> ScopeImport:
    """Import what ``folder`` holds for ``scope`` through ``update`` (a storage's compare-and-set
    loop): its pieces merged in order into the stored document (into an empty one with
    ``replace``) and capped as extracted memory is; what the caps cut is logged. With ``note``
    (a carry-over) the result records it, and a document that already holds a record is left
    as it is (another writer carried it over first). The ``deermem import --deerflow`` command
    and the carry-over both import this way."""
    pieces = folder.for_scope(scope.user_id, scope.agent_name)
    change = ImportChange(
        [p.memory for p in pieces], replace=replace, max_facts=max_facts, clock=clock
    )

    def mutate(memory: Memory) -> Memory:
        if note is None:
            return change(memory)
        if memory.carriedOver is not None:
            return memory
        return change(memory).model_copy(update={"carriedOver": note})

    revision = update(scope, mutate)
    log_import_cuts(change.capped, user=scope.user_id, agent=scope.agent_name)
    return ScopeImport(scope.user_id, scope.agent_name, revision, change, pieces)


def _deerflow_names(scope: MemoryScope) -> bool:
    """Whether ``scope`` can name a place in DeerFlow's folder (its ids are folder names)."""
    user_ok = USER_ID_PATTERN.fullmatch(scope.user_id) is not None
    agent = scope.agent_name
    agent_ok = agent == DEFAULT_AGENT or AGENT_NAME_PATTERN.fullmatch(agent) is not None
    return user_ok and agent_ok


class CarryOverStorage(StorageLayer):
    """``inner`` with each scope's DeerFlow memory carried over on its first use (see the
    module). Everything else is ``inner``'s: its attributes are reachable through this object,
    and :attr:`inner` is the storage itself."""

    def __init__(
        self,
        inner: MemoryStorage,
        folder: str | Path,
        *,
        max_facts: int,
        clock: Callable[[], str] = utc_now_iso,
    ) -> None:
        super().__init__(inner)
        self.folder = Path(folder).expanduser()
        self.max_facts = max_facts
        self.clock = clock
        self._checked: set[MemoryScope] = set()
        self._locks: dict[MemoryScope, threading.Lock] = {}
        self._guard = threading.Lock()

    # -- the carry-over ----------------------------------------------------------------------------

    def _lock(self, scope: MemoryScope) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(scope, threading.Lock())

    def _holds(self, scope: MemoryScope) -> bool:
        """Whether DeerFlow's folder has a file or fact folder for ``scope`` (a few ``stat``s)."""
        return _deerflow_names(scope) and any(
            p.exists() for p in scope_locations(self.folder, scope.user_id, scope.agent_name)
        )

    def ensure(self, scope: MemoryScope) -> None:
        """Carry ``scope``'s DeerFlow memory over if we hold no document for it (once) — the
        user's default agent's first: DeerFlow's user-level summaries (``users/<uid>/memory.json``)
        are every agent's, and with summaries shared (:mod:`.shared_summaries`) an agent's
        first read shows them."""
        if scope in self._checked:
            return
        if scope.agent_name != DEFAULT_AGENT and _deerflow_names(scope):
            self.ensure(MemoryScope(scope.user_id, DEFAULT_AGENT))
        with self._lock(scope):
            if scope in self._checked:
                return
            try:
                if not self.inner.holds(scope) and self._holds(scope):
                    self._carry(scope)
            except RevisionConflict:
                pass  # another writer stored the scope first: it is carried over or in use
            except OSError:
                logger.exception(
                    "memory: DeerFlow's memory of user %r agent %r under %s could not be read; "
                    "it is not carried over (deermem import --deerflow imports it)",
                    scope.user_id,
                    scope.agent_name,
                    self.folder,
                )
            self._checked.add(scope)

    def _carry(self, scope: MemoryScope) -> None:
        folder = read_folder(self.folder, only=[(scope.user_id, scope.agent_name)], log=False)
        pieces = folder.for_scope(scope.user_id, scope.agent_name)
        files = tuple(p.relative for p in pieces)
        note = CarriedOver(at=self.clock(), facts=facts_read(pieces), files=files)
        done = import_scope(
            self.inner.update,
            folder,
            scope,
            replace=False,
            max_facts=self.max_facts,
            clock=self.clock,
            note=note,
        )
        for relative, reason in folder.errors:
            logger.warning(
                "memory: carrying DeerFlow's memory over: %s: %s", self.folder / relative, reason
            )
        if not pieces:
            return
        logger.info(
            "memory: carried DeerFlow's memory of user %r agent %r over from %s (%s): "
            "%d fact(s) found, %d added, %d repaired (%d given a new id), %d dropped, "
            "%d summary(ies); DeerFlow's "
            "files are left as they are",
            scope.user_id,
            scope.agent_name,
            self.folder,
            ", ".join(files),
            done.found,
            len(done.change.report.added),
            done.repaired,
            done.ids_repaired,
            done.dropped,
            len(done.change.report.sections),
        )

    def _erased(self, user_id: str, agent_name: str | None) -> list[MemoryScope]:
        """Mark every scope DeerFlow holds of ``user_id`` (of ``agent_name``) as erased here, so
        DeerFlow's copy is not carried over after the user was erased."""
        if USER_ID_PATTERN.fullmatch(user_id) is None:
            return []
        found = read_folder(self.folder, only=[(user_id, agent_name)], log=False)
        marked = []
        for user, agent in found.scopes():
            scope = MemoryScope(user, agent)
            files = tuple(p.relative for p in found.for_scope(user, agent))
            stamp = self.clock()
            note = CarriedOver(at=stamp, files=files, erased=True)
            try:
                self.inner.save(scope, Memory(lastUpdated=stamp, carriedOver=note), 0)
            except RevisionConflict:
                continue  # written again meanwhile: that document holds its own record
            self._checked.add(scope)
            marked.append(scope)
        return marked

    # -- MemoryStorage -----------------------------------------------------------------------------

    def load(self, scope: MemoryScope) -> StoredMemory:
        self.ensure(scope)
        return self.inner.load(scope)

    def revision(self, scope: MemoryScope) -> int:
        self.ensure(scope)
        return self.inner.revision(scope)

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        self.ensure(scope)
        return super().save(scope, memory, expected_revision, derived=derived)

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        self.ensure(scope)
        return super().update(scope, mutate, max_conflicts=max_conflicts, derive=derive)

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        receipt = self.inner.purge(user_id, agent_name)
        with self._guard:
            self._checked = {s for s in self._checked if s.user_id != user_id}
        for scope in self._erased(user_id, agent_name):
            receipt.add(
                f"user {scope.user_id!r}, agent {scope.agent_name!r}: DeerFlow's own memory "
                f"under {self.folder} is DeerFlow's to delete; an empty document records the "
                "erasure so it is not carried over again"
            )
        return receipt

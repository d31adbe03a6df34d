"""Every write derives: a storage layer that stores each document with its derived snapshot.

The engine wraps its storage in :class:`DerivingStorage` (under the DeerFlow carry-over, so a
carried-over memory is derived too). Whatever writes through the engine — an extraction's
update, an import, a console or command-line edit, a carry-over — goes through
:meth:`MemoryStorage.update` or :meth:`MemoryStorage.save`, and both hand the backend the
document *and* its snapshot (:func:`~deermem_middleware.derived.derive.derive`, reusing the
stored snapshot's rows for every unchanged text), which a backend that
:attr:`~deermem_middleware.storage.base.MemoryStorage.stores_derived` writes in the same atomic
step. Only new texts are screened and embedded, at most ``budget`` of them per write (the lock
of a JSON document is held meanwhile); the rest is left to the engine's background derivation
(``incomplete`` is called with the scope).

A derivation that fails (a bug, an embedding endpoint that raises in an unexpected way) never
costs the write: the document is stored without a new snapshot, the failure is logged, and the
background derives it later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from deermem_middleware.derived.derive import Derivation, Deriver, derive
from deermem_middleware.derived.snapshot import DerivedSnapshot, encode_snapshot
from deermem_middleware.derived.view import DerivedView, open_snapshot
from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.base import Derive, MemoryScope, MemoryStorage, Mutate, StoredMemory
from deermem_middleware.storage.layer import StorageLayer

__all__ = ["WRITE_BUDGET", "DerivingStorage"]

logger = logging.getLogger(__name__)

WRITE_BUDGET = 64
"""Texts screened or embedded per write at most (about 1.5 s with the bundled e5 model on 2
cores); a larger import is completed in the background."""


class DerivingStorage(StorageLayer):
    """``inner``, with a derived snapshot stored with every document written through it (see
    the module docstring). Reads, deletes and everything else are ``inner``'s."""

    def __init__(
        self,
        inner: MemoryStorage,
        deriver: Deriver,
        *,
        budget: int = WRITE_BUDGET,
        incomplete: Callable[[MemoryScope], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self.deriver = deriver
        self.budget = budget
        self.incomplete = incomplete
        """Called with a scope whose snapshot a write left incomplete (the budget ran out)."""

    # -- deriving -------------------------------------------------------------------------------

    def derivation(
        self, memory: Memory, previous: Sequence[DerivedSnapshot], budget: int | None
    ) -> Derivation:
        """The snapshot of ``memory`` reusing ``previous`` (``budget``: facts to screen or
        embed at most, None for all)."""
        return derive(memory, previous, self.deriver, budget=budget)

    def _blob(
        self,
        scope: MemoryScope,
        memory: Memory,
        previous: Sequence[DerivedSnapshot],
        *,
        left: list[bool],
        unless_unchanged: bool = False,
    ) -> bytes | None:
        """The encoded snapshot of ``memory`` (None when deriving failed, or — with
        ``unless_unchanged`` — when nothing new was derived: no write for nothing). ``left``
        is set when work is left for the background (called once the write is done: a
        background step that loaded the document before the write would find nothing)."""
        try:
            derivation = self.derivation(memory, previous, self.budget)
        except Exception:
            logger.exception(
                "memory derivation for user %r agent %r failed; the document is stored without "
                "it and derived again in the background",
                scope.user_id,
                scope.agent_name,
            )
            left[:] = [True]
            return None
        if not derivation.complete:
            left[:] = [True]
        if unless_unchanged and not derivation.changed:
            return None
        return encode_snapshot(derivation.snapshot)

    def _incomplete(self, scope: MemoryScope) -> None:
        if self.incomplete is not None:
            try:
                self.incomplete(scope)
            except Exception:  # pragma: no cover - a scheduling hook that fails is logged
                logger.exception("scheduling a background derivation failed")

    def _derive_for(
        self, scope: MemoryScope, left: list[bool], extra: Sequence[DerivedSnapshot] = ()
    ) -> Derive:
        """The ``derive`` hook of one write: nothing new when the stored snapshot already is
        this document's, complete and current; else a snapshot reusing ``extra`` and it."""

        def hook(memory: Memory, stored: StoredMemory) -> bytes | None:
            previous = open_snapshot(stored.derived, self.inner.describe(scope))
            same = memory is stored.memory and previous is not None and stored.derived_exact
            if same:
                assert previous is not None
                view = DerivedView.of(memory, previous, self.deriver.made_by, exact=True)
                if view.missing == 0:
                    return None  # stored as it should be: nothing to write
            return self._blob(
                scope,
                memory,
                [*extra, *([previous] if previous is not None else [])],
                left=left,
                unless_unchanged=same and not extra,
            )

        return hook

    # -- writes -----------------------------------------------------------------------------------

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        left: list[bool] = []
        if derived is None and self.inner.stores_derived:
            derived = self._blob(scope, memory, (), left=left)
        try:
            return super().save(scope, memory, expected_revision, derived=derived)
        finally:
            if left:
                self._incomplete(scope)

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        left: list[bool] = []
        hook = derive if derive is not None else self._derive_for(scope, left)
        try:
            return super().update(scope, mutate, max_conflicts=max_conflicts, derive=hook)
        finally:
            if left:
                self._incomplete(scope)

    def store_snapshot(self, scope: MemoryScope, snapshot: DerivedSnapshot) -> int:
        """Store the document as it is with a snapshot derived off the lock (the background's
        work): rows of ``snapshot`` are reused, texts changed since are derived now (what is
        left after that is the caller's next step, not a new background job)."""
        hook = self._derive_for(scope, [], (snapshot,))
        return super().update(scope, lambda memory: memory, derive=hook)

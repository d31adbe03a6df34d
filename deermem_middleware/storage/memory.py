"""A process-local backend: for tests, notebooks and agents whose memory may die with them."""

from __future__ import annotations

import threading

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.base import (
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StoredMemory,
)

__all__ = ["InMemoryStorage"]


class InMemoryStorage(MemoryStorage):
    """Documents in a dict, with the same compare-and-set contract as the durable backends.

    Documents are frozen models, so handing out the stored object is safe. Derived data is
    kept with each revision (:attr:`~MemoryStorage.stores_derived`).
    """

    stores_derived = True

    def __init__(self) -> None:
        self._docs: dict[MemoryScope, StoredMemory] = {}
        self._lock = threading.Lock()

    def load(self, scope: MemoryScope) -> StoredMemory:
        with self._lock:
            return self._docs.get(scope) or StoredMemory(Memory(), 0)

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        with self._lock:
            current = self._docs.get(scope)
            actual = current.revision if current else 0
            if actual != expected_revision:
                raise RevisionConflict(scope, expected_revision, actual)
            revision = actual + 1
            if derived is not None:
                self._docs[scope] = StoredMemory(memory, revision, derived, revision)
            elif current is not None and current.derived is not None:  # kept, as of its revision
                self._docs[scope] = StoredMemory(
                    memory, revision, current.derived, current.derived_revision
                )
            else:
                self._docs[scope] = StoredMemory(memory, revision)
            return revision

    def revision(self, scope: MemoryScope) -> int:
        with self._lock:
            current = self._docs.get(scope)
            return current.revision if current else 0

    def delete(self, scope: MemoryScope) -> bool:
        with self._lock:
            return self._docs.pop(scope, None) is not None

    def list_scopes(self) -> list[MemoryScope]:
        with self._lock:
            return sorted(self._docs)

    def describe(self, scope: MemoryScope) -> str:
        return f"memory://{scope.user_id}/{scope.agent_name}"

"""A storage wrapped around another: everything is the inner storage's but what a layer changes.

Two layers sit between the engine and its backend: the DeerFlow carry-over (a scope's first use
imports DeerFlow's own memory) and the derivation of every write (each document stored with what
reads need of it). Both are :class:`StorageLayer` subclasses overriding only their own calls, so
a new method of the storage contract is passed through once, here, not once per layer.
"""

from __future__ import annotations

from typing import Any

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.base import (
    Derive,
    MemoryScope,
    MemoryStorage,
    Mutate,
    PurgeReceipt,
    StoredMemory,
)
from deermem_middleware.storage.journal import PendingJournal

__all__ = ["StorageLayer"]


class StorageLayer(MemoryStorage):
    """``inner``, as it is (subclasses override what they change). The backend's own attributes
    (``root``, ``store``…) are reachable through the layer; :attr:`innermost` is the backend."""

    def __init__(self, inner: MemoryStorage) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # the backend's own attributes (root, store, ...)
        if name == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def innermost(self) -> MemoryStorage:
        return self.inner.innermost

    @property
    def stores_derived(self) -> bool:  # type: ignore[override]
        return self.inner.stores_derived

    def load(self, scope: MemoryScope) -> StoredMemory:
        return self.inner.load(scope)

    def revision(self, scope: MemoryScope) -> int:
        return self.inner.revision(scope)

    def holds(self, scope: MemoryScope) -> bool:
        return self.inner.holds(scope)

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        if derived is None:  # a backend of before derived data takes no such keyword
            return self.inner.save(scope, memory, expected_revision)
        return self.inner.save(scope, memory, expected_revision, derived=derived)

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        return self.inner.update(scope, mutate, max_conflicts=max_conflicts, derive=derive)

    def delete(self, scope: MemoryScope) -> bool:
        return self.inner.delete(scope)

    def list_scopes(self) -> list[MemoryScope]:
        return self.inner.list_scopes()

    def describe(self, scope: MemoryScope) -> str:
        return self.inner.describe(scope)

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        return self.inner.purge(user_id, agent_name)

    def journal(self, *, fsync: bool = False) -> PendingJournal:
        return self.inner.journal(fsync=fsync)

    def setup(self) -> None:
        self.inner.setup()

    def close(self) -> None:
        self.inner.close()

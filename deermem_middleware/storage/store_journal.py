"""The pending-work journal in a LangGraph store, next to the memory it belongs to:
``(<prefix>, "pending", <user>, <agent>)`` key ``<thread>``.

Every change of an entry is a compare-and-set on its version (``v``), through the same writers
as the memory documents (:mod:`.store_writers`). On PostgreSQL a capture — on the agent's path —
is one ``INSERT … ON CONFLICT DO UPDATE`` that keeps the stored claim (as a plain ``put`` did,
one statement), and a sweep for orphaned entries is one query on the store's prefix index.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deermem_middleware.storage.base import MemoryScope
from deermem_middleware.storage.journal import PendingJournal, _stamped
from deermem_middleware.storage.names import label, under
from deermem_middleware.storage.pending import JournalEntry

if TYPE_CHECKING:
    from deermem_middleware.storage.store import StoreStorage

__all__ = ["StoreJournal"]

logger = logging.getLogger(__name__)

ASIDE_MARK = ".unreadable-"
"""Keys of entries set aside as unreadable contain it (a label never has a raw dot)."""

_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError)


class StoreJournal(PendingJournal):
    """The pending-work journal in the store (see the module docstring)."""

    def __init__(self, storage: StoreStorage) -> None:
        self._storage = storage
        self.shared = storage._writer.shared

    def describe(self) -> str:
        return f"StoreJournal({type(self._storage.store).__name__})"

    def _where(self, scope: MemoryScope, thread_id: str) -> tuple[tuple[str, ...], str]:
        return self._storage.namespace(scope, "pending"), label(thread_id)

    def _value(self, entry: JournalEntry) -> dict[str, Any]:
        return entry.to_json()

    # -- the primitives -----------------------------------------------------------------------

    def read(self, scope: MemoryScope, thread_id: str) -> JournalEntry | None:
        namespace, key = self._where(scope, thread_id)
        try:
            item = self._storage.store.get(namespace, key)
        except (ValueError, RecursionError) as exc:  # stored text the store cannot decode
            self._set_aside(namespace, key, f"{type(exc).__name__}: {str(exc)[:200]}")
            return None
        if item is None:
            return None
        try:
            return JournalEntry.from_json(item.value)
        except _UNREADABLE as exc:
            self._set_aside(namespace, key, f"{type(exc).__name__}: {exc}")
            return None

    def _set_aside(self, namespace: tuple[str, ...], key: str, reason: str) -> None:
        aside = f"{key}{ASIDE_MARK}{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
        self._storage._writer.set_aside(namespace, key, aside, reason)
        logger.error(
            "pending-update entry %s/%s is unreadable (%s); kept aside as key %r",
            "/".join(namespace),
            key,
            reason[:300],
            aside,
        )

    def _write_if(
        self,
        scope: MemoryScope,
        thread_id: str,
        expected: str | None,
        entry: JournalEntry | None,
    ) -> bool:
        namespace, key = self._where(scope, thread_id)
        writer = self._storage._writer
        if entry is None:
            return expected is None or writer.delete_if(namespace, key, "v", expected)
        if expected is None:
            return writer.insert_new(namespace, key, self._value(entry))
        return writer.replace_where(namespace, key, self._value(entry), "v", expected)

    def capture(self, entry: JournalEntry) -> None:
        capture = getattr(self._storage._writer, "capture_pending", None)
        if capture is None:
            super().capture(entry)
            return
        namespace, key = self._where(entry.scope, entry.thread_id)
        capture(namespace, key, self._value(_stamped(entry)))

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        """One conditional delete (no read first)."""
        namespace, key = self._where(scope, thread_id)
        self._storage._writer.delete_if(namespace, key, "token", token)

    # -- listing ------------------------------------------------------------------------------

    def _parse(self, namespace: tuple[str, ...], key: str, value: Any) -> JournalEntry | None:
        if ASIDE_MARK in key:
            return None
        try:
            return JournalEntry.from_json(value)
        except _UNREADABLE as exc:
            logger.error("pending-update entry %s/%s unreadable: %s", namespace, key, exc)
            return None

    def entries(self) -> list[JournalEntry]:
        store = self._storage.store
        found = []
        prefix = (self._storage.prefix, "pending")
        for namespace in store.list_namespaces(prefix=prefix, limit=100_000):
            if len(namespace) != 4 or not under(namespace, prefix):
                continue
            for item in store.search(namespace, limit=10_000):
                if tuple(item.namespace) != namespace:
                    continue
                entry = self._parse(namespace, item.key, item.value)
                if entry is not None:
                    found.append(entry)
        return found

    def orphans(self, now: float) -> list[JournalEntry]:
        """On PostgreSQL one query for the entries past their ``orphan_at``; elsewhere the
        inherited listing."""
        at = now
        query = getattr(self._storage._writer, "pending_orphans", None)
        if query is None:
            return super().orphans(at)
        prefix = (self._storage.prefix, "pending")
        found = []
        for row in query(prefix, at):
            namespace = row["namespace"]
            if len(namespace) != 4 or not under(namespace, prefix):
                continue
            entry = self._parse(namespace, row["key"], row["value"])
            if entry is not None and entry.orphan_at <= at:
                found.append(entry)
        return found

    def forget(self, scope: MemoryScope) -> int:
        store = self._storage.store
        namespace = self._storage.namespace(scope, "pending")
        items = [
            i for i in store.search(namespace, limit=10_000) if tuple(i.namespace) == namespace
        ]
        for item in items:
            store.delete(namespace, item.key)
        return sum(ASIDE_MARK not in item.key for item in items)

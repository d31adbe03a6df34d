"""Memory on a LangGraph ``BaseStore``: PostgreSQL (``PostgresStore``), SQLite, in-memory.

LangGraph's store is where agents keep long-term data, and ``PostgresStore`` lets many workers on
many machines share it. But its ``put`` is last-writer-wins: two workers that read a memory,
apply different updates and write back lose one of them. :class:`StoreStorage` adds the
compare-and-set the storage contract needs:

- **PostgreSQL**: one conditional ``UPDATE … WHERE (value->>'revision')::bigint = expected`` (or
  ``INSERT … ON CONFLICT DO NOTHING`` for a first save) on the store's own table, through its
  connection or pool — atomic across processes and hosts;
- **SQLite** (``SqliteStore``): the same conditional statement (SQLite locks the database file);
- **InMemoryStore**: a lock shared by everything in the process that uses that store object;
- any other store: refused, unless you choose ``consistency="last_writer_wins"`` — clearly named
  because concurrent writers *can* then lose updates (the writers: :mod:`.store_writers`).

Layout (namespace labels percent-encode ``.``, which the store reserves):

- ``(<prefix>, "memory", <user>, <agent>)`` key ``document``:
  ``{"revision": n, "scope": {...}, "document": <the memory document>}`` — profile, facts and
  per-thread watermarks in one item, so an update and its watermark commit together;
- the same namespace, key ``derived``: ``{"revision": n, "data": <base64>}`` — what reads need
  of each fact (:mod:`deermem_middleware.derived`), written in the same statement (PostgreSQL),
  transaction (SQLite) or lock (``InMemoryStore``) as the document of revision ``n``. A second
  item, not a field of the first, so that the revision check before each model call
  (``value->>'revision'``) never reads it;
- ``(<prefix>, "pending", <user>, <agent>)`` key ``<thread>``: the pending-work journal.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage.base import (
    CorruptedMemoryError,
    MemoryScope,
    MemoryStorage,
    PurgeReceipt,
    RevisionConflict,
    StoredMemory,
)
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.migrations import serialised_setup
from deermem_middleware.storage.names import HASHED_LABEL, MAX_LABEL_CHARS, label, under, unlabel
from deermem_middleware.storage.store_journal import StoreJournal
from deermem_middleware.storage.store_writers import Consistency, writer_for

__all__ = [
    "HASHED_LABEL",
    "MAX_LABEL_CHARS",
    "Consistency",
    "StoreStorage",
    "label",
    "under",
    "unlabel",
]


logger = logging.getLogger(__name__)

DOCUMENT_KEY = "document"
DERIVED_KEY = "derived"
CACHE_DOCUMENTS = 256
"""Documents (with their derived data) kept read in the process, most recently used first."""


def _aside_key() -> str:
    """The key a corrupted document is kept under, next to where it was: ``corrupted-<UTC>``."""
    return f"corrupted-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"


class StoreStorage(MemoryStorage):
    """Memory documents in a LangGraph ``BaseStore`` (see the module docstring)."""

    stores_derived = True

    def __init__(
        self,
        store: Any,
        *,
        prefix: str = "deermem",
        consistency: Consistency = "cas",
    ) -> None:
        if consistency not in ("cas", "last_writer_wins"):
            raise ValueError(
                f"consistency must be 'cas' or 'last_writer_wins', got {consistency!r}"
            )
        self.store = store
        self.prefix = label(prefix)
        self.consistency: Consistency = consistency
        self._writer = writer_for(store, consistency)
        self._journal = StoreJournal(self)
        self._closers: list[Any] = []
        # documents are frozen: the same object is handed out until the revision changes, so
        # the selection index (cached by document identity) is reused across model calls
        self._cache: OrderedDict[MemoryScope, StoredMemory] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._cache_size = CACHE_DOCUMENTS

    # -- layout -----------------------------------------------------------------------------

    def namespace(self, scope: MemoryScope, kind: str = "memory") -> tuple[str, ...]:
        return (self.prefix, kind, label(scope.user_id), label(scope.agent_name))

    def describe(self, scope: MemoryScope) -> str:
        return f"{type(self.store).__name__}:{'/'.join(self.namespace(scope))}/{DOCUMENT_KEY}"

    def setup(self) -> None:
        """Create the store's tables (idempotent), one process at a time: replicas that start
        together on a fresh database take turns (:mod:`.migrations`)."""
        setup = getattr(self.store, "setup", None)
        if callable(setup):
            serialised_setup(self.store, setup)

    # -- the contract -----------------------------------------------------------------------

    def _cached(self, scope: MemoryScope) -> StoredMemory | None:
        with self._cache_lock:
            return self._cache.get(scope)

    def _remember(self, scope: MemoryScope, stored: StoredMemory) -> None:
        with self._cache_lock:
            self._cache[scope] = stored
            self._cache.move_to_end(scope)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _forget_cached(self, scope: MemoryScope) -> None:
        with self._cache_lock:
            self._cache.pop(scope, None)

    def revision(self, scope: MemoryScope) -> int:
        """The ``revision`` field alone (one indexed row, the document not sent)."""
        return self._writer.revision_of(self.namespace(scope), DOCUMENT_KEY) or 0

    def load(self, scope: MemoryScope) -> StoredMemory:
        cached = self._cached(scope)
        if cached is not None:
            revision = self._writer.revision_of(self.namespace(scope), DOCUMENT_KEY)
            if revision == cached.revision:
                return cached
        stored = self._load_fresh(scope)
        if stored.revision:
            self._remember(scope, stored)
        else:
            self._forget_cached(scope)
        return stored

    def _read(self, namespace: tuple[str, ...]) -> Any:
        """The document item at ``namespace``, or None. A stored text the store cannot decode —
        a number of more than 4,300 digits, nesting deeper than its JSON parser allows — makes
        its ``get`` raise ``ValueError``/``RecursionError``: such an item is moved aside (kept
        for inspection, readable again) and reads as absent, so it neither fails every update of
        that user forever nor breaks the listing of everyone else."""
        try:
            return self.store.get(namespace, DOCUMENT_KEY)
        except (ValueError, RecursionError) as exc:
            reason = f"undecodable stored text ({type(exc).__name__}: {str(exc)[:200]})"
            aside = _aside_key()
            self._writer.set_aside(namespace, DOCUMENT_KEY, aside, reason)
            logger.error(
                "memory at %s is corrupted (%s); kept aside as key %r and the user starts "
                "from an empty memory",
                "/".join(namespace),
                reason,
                aside,
            )
            return None

    def _load_fresh(self, scope: MemoryScope) -> StoredMemory:
        namespace = self.namespace(scope)
        item = self._read(namespace)
        if item is None:
            return StoredMemory(Memory(), 0)
        value = item.value
        try:
            revision = value["revision"]
            if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
                raise ValueError(f"revision must be a non-negative integer, got {revision!r}")
            memory = Memory.from_json_dict(value["document"])
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            return self._quarantine(scope, value, f"{type(exc).__name__}: {exc}")
        derived, derived_revision = self._derived(namespace)
        return StoredMemory(memory, revision, derived, derived_revision)

    def _derived(self, namespace: tuple[str, ...]) -> tuple[bytes | None, int]:
        """The derived data stored beside a document and its revision ((None, 0): none, or
        unreadable — derived again, never a failed read)."""
        try:
            item = self.store.get(namespace, DERIVED_KEY)
        except (ValueError, RecursionError):
            item = None
        if item is None or not isinstance(item.value, dict):
            return None, 0
        revision, data = item.value.get("revision"), item.value.get("data")
        if isinstance(revision, bool) or not isinstance(revision, int) or not isinstance(data, str):
            return None, 0
        try:
            return base64.b64decode(data, validate=True), revision
        except (binascii.Error, ValueError):
            return None, 0

    def _quarantine(self, scope: MemoryScope, value: Any, reason: str) -> StoredMemory:
        """Keep a document that does not validate aside (never overwrite it) and start empty."""
        namespace = self.namespace(scope)
        aside = _aside_key()
        revision = value.get("revision") if isinstance(value, dict) else None
        self.store.put(namespace, aside, {"reason": reason, "value": value}, index=False)
        if isinstance(revision, int) and not isinstance(revision, bool):
            removed = self._writer.delete_if(namespace, DOCUMENT_KEY, "revision", str(revision))
        else:
            self.store.delete(namespace, DOCUMENT_KEY)
            removed = True
        where = self.describe(scope)
        if removed:
            logger.error(
                "memory of user %r / agent %r at %s is corrupted (%s); kept aside as key %r and "
                "the user starts from an empty memory",
                scope.user_id,
                scope.agent_name,
                where,
                reason[:300],
                aside,
            )
            return StoredMemory(Memory(), 0)
        raise CorruptedMemoryError(where, reason)  # changed under us: let the caller retry

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        revision = expected_revision + 1
        value = {
            "revision": revision,
            "scope": {"user_id": scope.user_id, "agent_name": scope.agent_name},
            "document": memory.to_json_dict(),
        }
        also = None
        if derived is not None:
            data = base64.b64encode(derived).decode("ascii")
            also = (DERIVED_KEY, {"revision": revision, "data": data})
        namespace = self.namespace(scope)
        if expected_revision == 0:
            ok = self._writer.insert_new(namespace, DOCUMENT_KEY, value, also)
        else:
            ok = self._writer.replace_if(namespace, DOCUMENT_KEY, value, expected_revision, also)
        if not ok:
            actual = self.load(scope).revision
            raise RevisionConflict(scope, expected_revision, actual)
        if derived is not None:
            self._remember(scope, StoredMemory(memory, revision, derived, revision))
        else:  # the stored derived data (of an older revision) is read with the next load
            self._forget_cached(scope)
        return revision

    def delete(self, scope: MemoryScope) -> bool:
        namespace = self.namespace(scope)
        try:
            existed = self.store.get(namespace, DOCUMENT_KEY) is not None
        except (ValueError, RecursionError):  # undecodable, but there: deleted all the same
            existed = True
        self.store.delete(namespace, DOCUMENT_KEY)
        self.store.delete(namespace, DERIVED_KEY)
        self._forget_cached(scope)
        return existed

    def list_scopes(self) -> list[MemoryScope]:
        scopes = []
        root = (self.prefix, "memory")
        for namespace in self.store.list_namespaces(prefix=root, limit=100_000):
            if len(namespace) != 4 or not under(namespace, root):
                continue
            item = self._read(tuple(namespace))
            if item is None:
                continue
            scope = self._scope_of(namespace, item.value)
            if scope is not None:
                scopes.append(scope)
        return sorted(scopes)

    def _scope_of(self, namespace: tuple[str, ...], value: Any) -> MemoryScope | None:
        """Whose document this is: from its labels, or for a hashed label from the ids the
        document records (None, logged, when neither tells)."""
        user, agent = unlabel(namespace[2]), unlabel(namespace[3])
        recorded = value.get("scope") if isinstance(value, dict) else None
        if isinstance(recorded, dict):
            user = user if user is not None else recorded.get("user_id")
            agent = agent if agent is not None else recorded.get("agent_name")
        if not isinstance(user, str) or not isinstance(agent, str) or not user or not agent:
            logger.error("memory at %s names no user or agent; not listed", "/".join(namespace))
            return None
        scope = MemoryScope(user, agent)
        if self.namespace(scope) != tuple(namespace):
            logger.error("memory at %s records another scope; not listed", "/".join(namespace))
            return None
        return scope

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        """The documents (see :meth:`MemoryStorage.purge`), then every remaining key of the
        user under ``memory`` and ``pending``: quarantined documents, journal entries."""
        receipt = super().purge(user_id, agent_name)
        for kind in ("memory", "pending"):
            prefix: tuple[str, ...] = (self.prefix, kind, label(user_id))
            if agent_name is not None:
                prefix = (*prefix, label(agent_name))
            seen: set[tuple[tuple[str, ...], str]] = set()
            while True:
                items = [
                    i
                    for i in self.store.search(prefix, limit=1000)
                    if (i.namespace, i.key) not in seen and under(i.namespace, prefix)
                ]
                if not items:  # all gone (or a store that does not delete: do not spin)
                    break
                for item in items:
                    seen.add((item.namespace, item.key))
                    self.store.delete(item.namespace, item.key)
                    receipt.keys += 1
                    receipt.add(f"key {'/'.join(item.namespace)}/{item.key}")
        return receipt

    # -- resources --------------------------------------------------------------------------

    def add_closer(self, closer: Any) -> None:
        """Something to close with the storage (the connection pool we opened)."""
        self._closers.append(closer)

    def journal(self, *, fsync: bool = False) -> PendingJournal:
        """Pending captures in the store, next to the memory (the database makes them
        durable: ``fsync`` is its business)."""
        return self._journal

    def close(self) -> None:
        """Close what this storage opened (not a store you passed in)."""
        while self._closers:
            closer = self._closers.pop()
            try:
                closer.close()
            except Exception:
                logger.exception("closing %r failed", closer)

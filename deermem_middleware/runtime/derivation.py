"""Deriving in the background: what a write left undone, what an upgrade made stale, what a
document from before derived data never had.

A read that finds facts without current derived data (:attr:`~deermem_middleware.derived.
view.DerivedView.missing`) serves the call with what is there and hands the scope to
:class:`BackgroundDerivation`: on one worker thread per engine it loads the document, derives
at most ``budget`` facts' verdicts and vectors off every lock, then stores the snapshot with
the unchanged document through the storage's compare-and-set (texts that changed meanwhile are
derived in that write; a lost race just retries later). A memory larger than the budget is
completed in further steps, one stored snapshot each, so a 5,000-fact upgrade never holds a lock
for minutes and every replica benefits from each step.

With a backend that keeps no derived data (:attr:`~deermem_middleware.storage.base.
MemoryStorage.stores_derived` False) the snapshot is kept in the process instead, per (scope,
revision), and the caller's cached index for that scope is dropped so the next read uses it.

Each (scope, revision) is worked on once per process: a derivation that makes no progress (the
embedding endpoint is down) is not retried on every model call, only after the next write.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from deermem_middleware.derived.snapshot import encode_snapshot
from deermem_middleware.derived.storing import DerivingStorage
from deermem_middleware.derived.view import open_snapshot
from deermem_middleware.storage.base import MemoryScope, RevisionConflict, StorageError

__all__ = ["BACKGROUND_BUDGET", "BackgroundDerivation"]

logger = logging.getLogger(__name__)

BACKGROUND_BUDGET = 256
"""Texts screened or embedded per background step (about 6 s with the bundled e5 model on 2
cores): each step is stored, so replicas see progress, and one large memory does not keep
every other scope waiting for long."""

_REMEMBERED = 4096
"""(scope, revision) pairs remembered as attempted, and snapshots kept for a backend without."""


class BackgroundDerivation:
    """One worker thread that derives scopes' snapshots (see the module docstring)."""

    def __init__(
        self,
        storage: DerivingStorage,
        *,
        budget: int = BACKGROUND_BUDGET,
        name: str = "deermem-derive",
        derived_locally: Callable[[MemoryScope], None] | None = None,
    ) -> None:
        self.storage = storage
        self.budget = budget
        self._name = name
        self._derived_locally = derived_locally
        self._lock = threading.Lock()
        self._queued: set[MemoryScope] = set()
        self._attempted: OrderedDict[tuple[MemoryScope, int], None] = OrderedDict()
        self._local: OrderedDict[tuple[MemoryScope, int], bytes] = OrderedDict()
        self._executor: ThreadPoolExecutor | None = None
        self._idle = threading.Condition(self._lock)
        self._closed = False
        self.steps = 0
        """Background steps run (for tests and stats)."""

    def local(self, scope: MemoryScope, revision: int) -> bytes | None:
        """A snapshot kept in the process for ``scope`` at ``revision`` (a backend without
        derived data), or None."""
        with self._lock:
            return self._local.get((scope, revision))

    def submit(self, scope: MemoryScope, revision: int | None = None) -> Future[None] | None:
        """Derive ``scope`` in the background, unless it is queued already or ``revision`` was
        attempted before (None: a write just left it incomplete — go on). Never blocks."""
        with self._lock:
            if self._closed or scope in self._queued:
                return None
            if revision is not None and (scope, revision) in self._attempted:
                return None
            self._queued.add(scope)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)
            executor = self._executor
        try:
            return executor.submit(self._run, scope)
        except RuntimeError:  # shut down meanwhile
            with self._lock:
                self._queued.discard(scope)
            return None

    def _remember(self, scope: MemoryScope, revision: int) -> None:
        with self._lock:
            self._attempted[(scope, revision)] = None
            while len(self._attempted) > _REMEMBERED:
                self._attempted.popitem(last=False)

    def _run(self, scope: MemoryScope) -> None:
        again = False
        try:
            again = self._step(scope, self.budget)
        except (StorageError, RevisionConflict) as exc:
            logger.info("memory derivation of user %r deferred: %s", scope.user_id, exc)
        except Exception:
            logger.exception("memory derivation of user %r failed", scope.user_id)
        with self._lock:
            if again and not self._closed and self._executor is not None:
                try:  # the next step; the scope stays queued meanwhile
                    self._executor.submit(self._run, scope)
                    return
                except RuntimeError:  # shut down meanwhile
                    pass
            self._queued.discard(scope)
            self._idle.notify_all()

    def run_now(self, scope: MemoryScope) -> None:
        """Derive ``scope`` completely, now, on the caller's thread (a warm-up)."""
        self._step(scope, budget=None)

    def _step(self, scope: MemoryScope, budget: int | None) -> bool:
        """One step, screening or embedding at most ``budget`` facts (None: all); True when
        there is more to do and this step made progress."""
        storage = self.storage
        stored = storage.load(scope)
        self._remember(scope, stored.revision)
        if stored.revision == 0:
            return False
        blob = stored.derived if storage.stores_derived else self.local(scope, stored.revision)
        previous = open_snapshot(blob, storage.describe(scope))
        derivation = storage.derivation(
            stored.memory, [previous] if previous is not None else [], budget
        )
        self.steps += 1
        logger.debug(
            "memory derivation of user %r agent %r: %d derived, %d reused, %d left",
            scope.user_id,
            scope.agent_name,
            derivation.derived,
            derivation.reused,
            derivation.missing,
        )
        if storage.stores_derived:
            revision = storage.store_snapshot(scope, derivation.snapshot)
            self._remember(scope, revision)
        else:
            with self._lock:
                self._local[(scope, stored.revision)] = encode_snapshot(derivation.snapshot)
                while len(self._local) > _REMEMBERED:
                    self._local.popitem(last=False)
            if self._derived_locally is not None:
                self._derived_locally(scope)
        return not derivation.complete and derivation.changed

    def forget(self, scope: MemoryScope) -> None:
        """Drop what this process keeps of ``scope`` (its user was erased)."""
        with self._lock:
            for key in [k for k in self._local if k[0] == scope]:
                del self._local[key]
            for key in [k for k in self._attempted if k[0] == scope]:
                del self._attempted[key]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no scope is queued or being derived; True when idle within ``timeout``."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._queued, timeout)

    def close(self) -> None:
        """Stop: a step under way finishes, queued ones are dropped (derived again later)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

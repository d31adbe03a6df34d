"""The engine's journal writes for captures: on the agent's path (bounded), and late.

A capture is journaled on the agent's path, bounded by ``storage_timeout_seconds``
(:class:`~deermem_middleware.runtime.hotpath.StorageGuard`). When that write fails — the storage
is away, a disk is full — the agent goes on and the capture still runs from this process's
memory; its entry is written later by the worker that runs it, should it still be pending with
the storage back. This module keeps those missed writes and writes them late; the engine
(:class:`~deermem_middleware.runtime.service.MemoryService`) decides when.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from deermem_middleware.runtime.handoff import Timing
from deermem_middleware.runtime.hotpath import StorageGuard, StorageUnavailable
from deermem_middleware.runtime.jobs import CaptureJob
from deermem_middleware.runtime.replicas import ReplicaCoordinator
from deermem_middleware.storage.base import MemoryScope
from deermem_middleware.storage.journal import PendingJournal

__all__ = ["CaptureJournaling", "SchedulerKey"]

logger = logging.getLogger(__name__)

SchedulerKey = tuple[MemoryScope, str]


class CaptureJournaling:
    """Journal writes of one engine's captures (see the module docstring).

    ``journal`` and ``replicas`` are read through callables: the engine builds its replica side
    after this.
    """

    def __init__(
        self,
        journal: Callable[[], PendingJournal | None],
        hot_path: StorageGuard,
        timing: Timing,
        replicas: Callable[[], ReplicaCoordinator | None],
    ) -> None:
        self._journal = journal
        self._hot_path = hot_path
        self._timing = timing
        self._replicas = replicas
        self._unjournaled: dict[SchedulerKey, CaptureJob] = {}
        """Pending captures whose journal write failed on the agent's path (written later)."""
        self._lock = threading.Lock()

    @property
    def _expires_in(self) -> float | None:
        """How long an unclaimed capture waits for this engine before others may take it
        (None on a journal nobody else sees: no expiry to keep)."""
        journal = self._journal()
        return self._timing.expires_in if journal is not None and journal.shared else None

    def _owner(self) -> Any:
        """This engine as the owner of the captures it journals (None: the process)."""
        replicas = self._replicas()
        return replicas.me if replicas is not None and replicas.shared else None

    def capture(self, job: CaptureJob) -> None:
        """Journal a capture on the agent's path, bounded by ``storage_timeout_seconds``; a
        failed write is kept for :meth:`late`."""
        journal = self._journal()
        if journal is None:
            return
        key = (job.scope, job.thread_id)
        try:
            self._hot_path.call("journaling a capture", lambda: self._put(journal, job))
        except StorageUnavailable as exc:  # the outage itself is logged once, by the guard
            logger.info(
                "memory capture of thread %r kept in this process, not journaled (%s)",
                job.thread_id,
                exc,
            )
        except Exception:  # a full disk must not stop the agent; the capture still runs
            logger.exception("journaling the capture of thread %r failed", job.thread_id)
        else:
            with self._lock:
                self._unjournaled.pop(key, None)
            return
        with self._lock:
            self._unjournaled[key] = job

    def _put(self, journal: PendingJournal, job: CaptureJob) -> None:
        """Journal ``job`` as this engine's newest capture of its thread."""
        journal.put(
            job.scope,
            job.thread_id,
            job.turns,
            job.conversation,
            expires_in=self._expires_in,
            owner=self._owner(),
        )

    def late(self, key: SchedulerKey, job: CaptureJob) -> None:
        """On a worker: write the journal entry the agent's path could not, for a capture that
        stays pending (the storage answers now, but the update could not run yet)."""
        with self._lock:
            missed = self._unjournaled.get(key)
        journal = self._journal()
        if missed is None or journal is None:
            return
        newest = missed if len(missed.turns) > len(job.turns) else job
        try:
            self._put(journal, newest)
        except Exception as exc:
            logger.info("journaling the capture of thread %r failed again: %s", job.thread_id, exc)
            return
        with self._lock:
            if self._unjournaled.get(key) is missed:  # a newer miss is journaled by its own run
                del self._unjournaled[key]
        logger.info("memory capture of thread %r journaled (pending update)", job.thread_id)

    def done(self, job: CaptureJob) -> None:
        """The update of ``job`` ended: its missed write is moot, its journal entry cleared."""
        key = (job.scope, job.thread_id)
        with self._lock:
            missed = self._unjournaled.get(key)
            finished = {t.fingerprint for t in job.turns}
            if missed is not None and all(t.fingerprint in finished for t in missed.turns):
                del self._unjournaled[key]  # its turns are in this job (a newer one's are not)
        replicas = self._replicas()
        if replicas is None:
            return
        try:
            replicas.finish(job)
        except Exception:
            logger.exception("clearing the journal entry of thread %r failed", job.thread_id)

    def forget(self, scopes: Iterable[MemoryScope]) -> None:
        """Drop the missed writes of ``scopes`` (a user being erased: nothing journaled later)."""
        found = set(scopes)
        with self._lock:
            for key in [k for k in self._unjournaled if k[0] in found]:
                del self._unjournaled[key]

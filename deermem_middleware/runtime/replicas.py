"""Several replicas on one storage: one extraction per burst, and a dead replica's work taken over.

Replicas — pods behind a load balancer, server workers — share one storage, and without sticky
sessions the turns of a thread land on any of them. Each replica debounces the captures it took,
so each used to extract the part of the conversation it saw: 3 replicas made 2.8–3.3 extraction
calls per burst (measured, 10 threads × 6 turns, round robin). And a replica killed before its
debounce fired left its capture in the journal until some process *started* and found it.

The :class:`ReplicaCoordinator` is the engine's replica side, a thin shell over the pure rules of
:mod:`deermem_middleware.runtime.handoff` and :mod:`deermem_middleware.storage.pending`:

- **before a run** (:meth:`before_run`) it reads the thread's journal entry — the newest capture,
  whichever replica took it — and claims it, stands down (a newer capture elsewhere runs it), or
  waits (another replica runs the older one); the claim is a lease in the entry, set with
  compare-and-set, so one replica runs it;
- **after a run** (:meth:`finish`) it removes the entry if no newer capture arrived meanwhile,
  else releases its claim;
- **in the background** (one daemon thread per engine, every ``replica_lease_seconds / 3``) it
  renews the claims it holds — extractions in progress and updates backed off by a failing
  endpoint alike — and takes over entries nobody works on: a claim not renewed for a lease, or
  an unclaimed entry whose debounce and a lease have passed (its replica would have claimed it).
  A taker whose "dead" replica was only slow costs at most a second model call: the thread's
  watermark is saved atomically with the memory, so nothing is applied twice.

With one process, or sticky sessions, every entry is the process's own: a run costs one read and
one claim write more than before (per extraction, not per capture), and captures cost the same
one journal write (one statement on PostgreSQL).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from deermem_middleware.memory.conversation import merge_captures
from deermem_middleware.runtime.handoff import Timing, decide
from deermem_middleware.runtime.jobs import MAX_MERGED_TURNS, CaptureJob
from deermem_middleware.runtime.scheduler import RetryLater
from deermem_middleware.storage.base import MemoryScope, StorageError
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.pending import (
    LEGACY_ORPHAN_SECONDS,
    JournalEntry,
    Owner,
    claimed,
    engine_identity,
    job_token,
    released,
    with_turns,
)

if TYPE_CHECKING:
    from deermem_middleware.runtime.scheduler import DebounceScheduler

__all__ = ["ReplicaCoordinator", "ReplicaStats"]

logger = logging.getLogger(__name__)

SchedulerKey = tuple[MemoryScope, str]

RACES = 8
"""Compare-and-set races on one entry before a run is retried later instead."""


@dataclass
class ReplicaStats:
    """What the coordinator did (counts since the engine started)."""

    claimed: int = 0
    stood_down: int = 0
    waited: int = 0
    taken_over: int = 0
    renewed: int = 0
    lost: int = 0
    """Claims found taken by another replica at renewal (this one was too slow)."""
    handed_over: int = 0

    def snapshot(self) -> dict[str, int]:
        return dict(self.__dict__)


def _job_of(entry: JournalEntry) -> CaptureJob:
    return CaptureJob(entry.scope, entry.thread_id, entry.turns, conversation=entry.conversation)


class ReplicaCoordinator:
    """The replica side of a :class:`~deermem_middleware.runtime.service.MemoryService` (see
    the module docstring). ``scheduler`` gives the engine's scheduler; ``can_extract`` tells
    whether the engine has an extraction model (an engine without one takes nothing over)."""

    def __init__(
        self,
        journal: PendingJournal,
        agent_name: str,
        timing: Timing,
        *,
        scheduler: Callable[[], DebounceScheduler[SchedulerKey, CaptureJob]],
        can_extract: Callable[[], bool],
        clock: Callable[[], float] = time.time,
        name: str = "deermem",
    ) -> None:
        self.journal = journal
        self.agent_name = agent_name
        self.timing = timing
        self._scheduler = scheduler
        self._can_extract = can_extract
        self._clock = clock
        self._name = name
        self._token = secrets.token_hex(4)
        self._held: dict[SchedulerKey, float] = {}
        """Claims this replica holds: key -> until."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = ReplicaStats()

    @property
    def shared(self) -> bool:
        """False for a journal no other process sees: there is nobody to coordinate with."""
        return self.journal.shared

    @property
    def me(self) -> Owner:
        """This engine as the owner of entries and claims (:func:`engine_identity`)."""
        return engine_identity(self._token)

    def held(self) -> list[SchedulerKey]:
        with self._lock:
            return list(self._held)

    # -- a run ---------------------------------------------------------------------------------

    def before_run(self, job: CaptureJob, *, forced: bool = False) -> CaptureJob | None:
        """The job to run for this thread now (its turns merged with the thread's newest
        capture, claimed), or None when another replica runs it. Raises :class:`RetryLater`
        to look again later, :class:`StorageError` when the journal cannot be read."""
        if not self.shared or not self._can_extract():
            return job  # a model-less engine keeps its capture pending, as before
        key = (job.scope, job.thread_id)
        try:
            for _ in range(RACES):
                outcome = self._settle(key, job, forced)
                if outcome is not _RACED:
                    return outcome  # type: ignore[return-value]
        except RetryLater:
            raise
        except StorageError:
            raise
        except Exception as exc:
            raise StorageError(
                f"reading the pending capture of thread {job.thread_id!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        raise RetryLater(0.1, f"the pending capture of thread {job.thread_id!r} kept changing")

    def _settle(self, key: SchedulerKey, job: CaptureJob, forced: bool) -> object:
        entry = self.journal.read(job.scope, job.thread_id)
        now = self._clock()
        decision = decide(entry, self.me, now, self.timing, forced=forced)
        if decision.verdict == "run" or entry is None:
            with self._lock:
                self._held.pop(key, None)
            return job
        if decision.verdict == "wait":
            self.stats.waited += 1
            raise RetryLater(decision.delay, decision.reason)
        if decision.verdict == "stand_down":
            if not self._hand_turns(entry, job):
                return _RACED
            with self._lock:
                self._held.pop(key, None)
            self.stats.stood_down += 1
            logger.debug("memory thread %r: standing down (%s)", job.thread_id, decision.reason)
            return None
        # claim: the newest capture — another replica's entry, or our own job (which holds
        # every capture we journaled since, and one the journal missed) — with the other's
        # missing turns in front
        if entry.token == job_token(job.turns):
            turns, run = entry.turns, job
        else:
            older, newer = (
                (entry.turns, job.turns) if entry.owned_by(self.me) else (job.turns, entry.turns)
            )
            turns, _ = merge_captures(older, newer, limit=MAX_MERGED_TURNS)
            run = replace(job, turns=turns, extracted=None)
            if entry.conversation and not job.conversation:
                run = replace(run, conversation=entry.conversation)
        mine = claimed(with_turns(entry, turns), self.me, now, self.timing.lease)
        if not self.journal.swap(entry, mine):
            return _RACED
        assert mine.claim is not None
        with self._lock:
            self._held[key] = mine.claim.until
        self.stats.claimed += 1
        return run

    def _hand_turns(self, entry: JournalEntry, job: CaptureJob) -> bool:
        """Before standing down: put the turns of our capture that the entry lacks (a windowed
        or checkpointer-less thread) into the entry, for whoever runs it. False on a race."""
        turns, _ = merge_captures(job.turns, entry.turns, limit=MAX_MERGED_TURNS)
        if turns == entry.turns:
            return True
        return self.journal.swap(entry, with_turns(entry, turns))

    def finish(self, job: CaptureJob) -> None:
        """The update of ``job`` is stored (or ended): remove the entry if it is still the
        capture we ran, else release our claim — and run the rest ourselves when the entry
        is still ours (turns another replica handed us meanwhile)."""
        key = (job.scope, job.thread_id)
        token = job_token(job.turns)
        if not self.shared:
            self.journal.done(job.scope, job.thread_id, token)
            return
        with self._lock:
            self._held.pop(key, None)
        for _ in range(RACES):
            entry = self.journal.read(job.scope, job.thread_id)
            if entry is None:
                return
            if entry.token == token:
                if self.journal.swap(entry, None):
                    return
                continue
            claim = entry.claim
            if claim is not None and not claim.held_by(self.me):
                return  # someone else's run
            if claim is not None and not self.journal.swap(entry, released(entry)):
                continue
            # still ours with turns we did not run (handed in by a replica standing down):
            # they run next, here; a newer capture elsewhere is run by its replica
            scheduler = self._scheduler()
            if entry.owned_by(self.me) and scheduler.pending_work(key) is None:
                scheduler.submit(key, _job_of(entry))
            return
        logger.info("memory thread %r: its pending entry kept changing; left", job.thread_id)

    # -- the background: renewals and take-overs -------------------------------------------------

    def start(self) -> None:
        """Start the background thread (renewals, take-overs) once."""
        if not self.shared or self._thread is not None:
            return
        interval = max(0.05, self.timing.lease / 3)
        ref = weakref.ref(self)
        stop = self._stop
        name = f"{self._name}-replicas"

        def loop() -> None:
            wait = interval
            while not stop.wait(wait):
                coordinator = ref()
                if coordinator is None:
                    return
                started = time.monotonic()
                try:
                    coordinator.tick()
                except Exception:
                    logger.exception("memory replica upkeep failed; trying again")
                del coordinator
                # a sweep of a huge journal (100,000 pending files) takes a while: it never
                # takes more than a twentieth of a core
                wait = max(interval, 20 * (time.monotonic() - started))

        self._thread = threading.Thread(target=loop, name=name, daemon=True)
        self._thread.start()

    def tick(self) -> None:
        """One round of upkeep: renew the claims held, take over orphaned entries."""
        self.renew()
        self.take_over()

    def renew(self) -> int:
        """Renew the held claims that are a third through their lease; returns how many."""
        now = self._clock()
        lease = self.timing.lease
        with self._lock:
            due = [k for k, until in self._held.items() if until - now < lease * 2 / 3]
        renewed = 0
        for key in due:
            scope, thread = key
            entry = self.journal.read(scope, thread)
            claim = None if entry is None else entry.claim
            ours = entry is not None and claim is not None and claim.held_by(self.me)
            if entry is None or not ours:
                with self._lock:
                    self._held.pop(key, None)
                if entry is not None and claim is not None:
                    self.stats.lost += 1
                    logger.info(
                        "memory thread %r: another replica took over its update (this one "
                        "did not renew its claim in time); its run stores nothing twice",
                        thread,
                    )
                continue
            mine = claimed(entry, self.me, now, lease)
            if self.journal.swap(entry, mine):
                assert mine.claim is not None
                with self._lock:
                    if key in self._held:
                        self._held[key] = mine.claim.until
                renewed += 1
        self.stats.renewed += renewed
        return renewed

    def take_over(self, *, startup: bool = False) -> int:
        """Claim the entries of this engine's agent that nobody works on and queue them to run
        now; returns how many. At ``startup`` every entry is looked at (entries of processes
        gone from this machine are taken at once); later only those past their orphan time."""
        if not self._can_extract() or (self._stop.is_set() and not startup):
            return 0
        now = self._clock()
        entries = self.journal.entries() if startup else self.journal.orphans(now)
        me_ = self.me
        taken = 0
        for entry in entries:
            if entry.scope.agent_name != self.agent_name:
                continue  # other agents' engines have their model and their config
            if entry.claim is not None and entry.claim.held_by(me_):
                continue  # ours, renewed by us
            if not entry.takeable(me_, now, orphan_after_seconds=self._orphan_after()):
                continue
            mine = claimed(entry, me_, now, self.timing.lease)
            try:
                if not self.journal.swap(entry, mine):
                    continue  # somebody else was quicker
            except Exception:
                logger.exception("taking over the pending capture of %r failed", entry.thread_id)
                continue
            assert mine.claim is not None
            key = (entry.scope, entry.thread_id)
            with self._lock:
                self._held[key] = mine.claim.until
            scheduler = self._scheduler()
            scheduler.submit(key, _job_of(entry))
            scheduler.fire(key)
            taken += 1
        if taken:
            self.stats.taken_over += taken
            logger.warning(
                "memory: took over %d pending update(s) left by a replica that stopped or stalled",
                taken,
            )
        return taken

    def _orphan_after(self) -> float:
        """How old an entry that does not expire (written by an older version) must be before
        another machine takes it over."""
        return max(LEGACY_ORPHAN_SECONDS, 4 * (self.timing.max_wait or 0.0))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background thread (waiting up to ``timeout`` for a round in progress):
        nothing is renewed or taken over any more."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def hand_over(self, pending: list[SchedulerKey]) -> int:
        """Release the claims still held and make this replica's entries of ``pending`` (the
        keys still waiting in the engine's scheduler) anyone's at once: a replica shutting
        down hands its work to the others. Returns how many entries were handed over."""
        self.stop()
        if not self.shared:
            return 0
        with self._lock:
            keys = set(self._held) | set(pending)
            self._held.clear()
        handed = 0
        now = self._clock()
        for scope, thread in sorted(keys):
            try:
                entry = self.journal.read(scope, thread)
                if entry is None:
                    continue
                claim = entry.claim
                ours = claim.held_by(self.me) if claim is not None else entry.owned_by(self.me)
                if ours and self.journal.swap(entry, released(entry, now=now)):
                    handed += 1
            except Exception:
                logger.exception("handing over the pending capture of %r failed", thread)
        if handed:
            self.stats.handed_over += handed
            logger.info("memory: handed %d pending update(s) over to the other replicas", handed)
        return handed


_RACED = object()

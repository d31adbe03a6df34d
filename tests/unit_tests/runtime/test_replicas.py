"""The replica side of the engine (``runtime/replicas.py``): claims, stand-downs, take-overs.

Two coordinators in one process are two replicas (each engine has its own identity); they share
a real :class:`FileJournal`; the clock is a variable, and the scheduler a recorder, so every
step is explicit. The same rules with real processes, signals and PostgreSQL are in
``tests/integration_tests/test_replicas.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.runtime.handoff import Timing
from deermem_middleware.runtime.replicas import ReplicaCoordinator
from deermem_middleware.runtime.scheduler import RetryLater
from deermem_middleware.runtime.updater import CaptureJob
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.journal import InMemoryJournal, PendingJournal

SCOPE = MemoryScope("alice", "coder")
KEY = (SCOPE, "t1")
TIMING = Timing(debounce=30.0, max_wait=120.0, lease=30.0)


def turns(*texts: str) -> tuple[Turn, ...]:
    return tuple(Turn("user", f"I like {t} a lot", f"fp-{t}") for t in texts)


@dataclass
class Recorder:
    """The engine's scheduler, as the coordinator uses it."""

    submitted: list[CaptureJob] = field(default_factory=list)
    fired: list[Any] = field(default_factory=list)
    pending: dict[Any, CaptureJob] = field(default_factory=dict)

    def submit(self, key: Any, job: CaptureJob) -> None:
        self.submitted.append(job)
        self.pending[key] = job

    def fire(self, key: Any) -> bool:
        self.fired.append(key)
        return True

    def pending_work(self, key: Any) -> CaptureJob | None:
        return self.pending.get(key)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Replica:
    """A coordinator and the captures it journals, as an engine does."""

    def __init__(self, journal: PendingJournal, clock: Clock, *, model: bool = True) -> None:
        self.scheduler = Recorder()
        self.clock = clock
        self.journal = journal
        self.coordinator = ReplicaCoordinator(
            journal,
            "coder",
            TIMING,
            scheduler=lambda: self.scheduler,  # type: ignore[arg-type,return-value]
            can_extract=lambda: model,
            clock=clock,
        )

    def capture(self, *texts: str, thread: str = "t1") -> CaptureJob:
        job = CaptureJob(SCOPE, thread, turns(*texts))
        entry_turns = job.turns
        self.journal.put(
            SCOPE, thread, entry_turns, expires_in=TIMING.expires_in, owner=self.coordinator.me
        )
        # the journal stamps the capture with the wall clock: move it onto the test's clock
        self._restamp(thread)
        return job

    def _restamp(self, thread: str) -> None:
        entry = self.journal.read(SCOPE, thread)
        assert entry is not None
        fields = {name: getattr(entry, name) for name in entry.__slots__}
        first = entry.first if entry.first is not None and entry.first < self.clock.now else None
        fields.update(
            created=self.clock.now,
            first=self.clock.now if first is None else first,
            expires=self.clock.now + TIMING.expires_in,
        )
        assert self.journal.swap(entry, type(entry)(**fields))

    def fire(self, job: CaptureJob, *, forced: bool = False) -> CaptureJob | None:
        return self.coordinator.before_run(job, forced=forced)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def journal(tmp_path: Path) -> FileJournal:
    return FileJournal(tmp_path / "pending")


def test_round_robin_one_run_by_the_newest_capture(journal: FileJournal, clock: Clock) -> None:
    a, b, c = (Replica(journal, clock) for _ in range(3))
    job_a = a.capture("Go")
    clock.now += 5
    job_b = b.capture("Go", "Rust")
    clock.now += 5
    job_c = c.capture("Go", "Rust", "Zig")
    clock.now = 1000 + 30.0  # A's debounce ends first, then B's: both stand down
    assert a.fire(job_a) is None
    clock.now += 5
    assert b.fire(job_b) is None
    clock.now += 5
    run = c.fire(job_c)
    assert run is not None and run.turns == job_c.turns
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.claim is not None
    assert entry.claim.held_by(c.coordinator.me) and entry.claim.until == clock.now + 30
    c.coordinator.finish(run)
    assert journal.read(SCOPE, "t1") is None
    stats = [r.coordinator.stats for r in (a, b, c)]
    assert [(s.claimed, s.stood_down) for s in stats] == [(0, 1), (0, 1), (1, 0)]


def test_a_replica_standing_down_hands_over_the_turns_only_it_saw(
    journal: FileJournal, clock: Clock
) -> None:
    a, b = Replica(journal, clock), Replica(journal, clock)
    job_a = a.capture("Go")  # a windowed thread: each capture holds only its newest turn
    clock.now += 5
    job_b = b.capture("Rust")
    clock.now += 25  # A's debounce ends; B's capture is 25 s old
    assert a.fire(job_a) is None
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.turns == turns("Go", "Rust")
    clock.now += 5
    run = b.fire(job_b)
    assert run is not None and run.turns == turns("Go", "Rust")


def test_two_replicas_claiming_at_once_one_wins(journal: FileJournal, clock: Clock) -> None:
    a, b = Replica(journal, clock), Replica(journal, clock)
    a.capture("Go")
    job = CaptureJob(SCOPE, "t1", turns("Go"))
    clock.now += 60  # due for everyone: both timers fire (a flush, a late timer)
    first = b.fire(job)
    assert first is not None
    with pytest.raises(RetryLater):  # A owns the capture: it looks again after B's run
        a.fire(job)
    b.coordinator.finish(first)
    assert a.fire(job) is not None  # no entry left: runs; the watermark finds nothing new


def test_a_newer_capture_during_a_run_is_run_after_it(journal: FileJournal, clock: Clock) -> None:
    a, b = Replica(journal, clock), Replica(journal, clock)
    job_b = b.capture("Go")
    clock.now += 30
    run = b.fire(job_b)
    assert run is not None
    clock.now += 2
    job_a = a.capture("Go", "Rust")  # keeps B's claim
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.claim is not None
    assert entry.claim.held_by(b.coordinator.me) and entry.turns == job_a.turns
    b.coordinator.finish(run)  # not the capture B ran: released, left for A
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.claim is None and entry.owned_by(a.coordinator.me)
    clock.now += 30
    again = a.fire(job_a)
    assert again is not None and again.turns == job_a.turns


def test_an_unclaimed_capture_is_taken_over_after_its_debounce_and_a_lease(
    journal: FileJournal, clock: Clock
) -> None:
    dead, live = Replica(journal, clock), Replica(journal, clock)
    dead.capture("Go")
    clock.now += 30 + 29
    assert live.coordinator.take_over() == 0  # its replica may still claim it
    clock.now += 2
    assert live.coordinator.take_over() == 1
    [job] = live.scheduler.submitted
    assert job.turns == turns("Go") and live.scheduler.fired == [KEY]
    assert live.fire(job) is not None  # our claim
    assert live.coordinator.take_over() == 0  # taken once


def test_a_claim_not_renewed_expires_and_renewals_keep_it(
    journal: FileJournal, clock: Clock
) -> None:
    slow, other = Replica(journal, clock), Replica(journal, clock)
    job = slow.capture("Go")
    clock.now += 30
    assert slow.fire(job) is not None
    clock.now += 15
    assert slow.coordinator.renew() == 1  # a third through the lease: renewed to now + 30
    clock.now += 25
    assert other.coordinator.take_over() == 0  # renewed 25 s ago: in force
    clock.now += 6  # 31 s since the renewal: the holder stalled (SIGSTOP, a long GC pause)
    assert other.coordinator.take_over() == 1
    assert slow.coordinator.renew() == 0 and slow.coordinator.stats.lost == 1


def test_a_replica_shutting_down_hands_its_pending_work_over(
    journal: FileJournal, clock: Clock
) -> None:
    leaving, staying = Replica(journal, clock), Replica(journal, clock)
    leaving.capture("Go")
    leaving.capture("Rust", thread="t2")
    clock.now += 1
    assert staying.coordinator.take_over() == 0
    assert leaving.coordinator.hand_over([KEY, (SCOPE, "t2")]) == 2
    clock.now += 0.001
    assert staying.coordinator.take_over() == 2


def test_turns_handed_over_during_a_run_are_run_next_by_the_owner(
    journal: FileJournal, clock: Clock
) -> None:
    other, owner = Replica(journal, clock), Replica(journal, clock)
    other_job = other.capture("Go")  # a windowed thread: each capture holds its newest turn
    clock.now += 1
    job = owner.capture("Rust")  # the newest capture: it lacks "Go"
    clock.now += 30
    run = owner.fire(job)
    assert run is not None and run.turns == turns("Rust")
    clock.now += 1
    assert other.fire(other_job) is None  # owner runs the thread: "Go" is handed to the entry
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.turns == turns("Go", "Rust")
    owner.coordinator.finish(run)  # the entry changed meanwhile: released, and run next
    [resubmitted] = owner.scheduler.submitted
    assert resubmitted.turns == turns("Go", "Rust")
    entry = journal.read(SCOPE, "t1")
    assert entry is not None and entry.claim is None


def test_a_journal_nobody_else_sees_and_an_engine_without_a_model_change_nothing(
    clock: Clock, journal: FileJournal
) -> None:
    alone = Replica(InMemoryJournal(), clock)
    job = alone.capture("Go")
    assert alone.fire(job) is job
    alone.coordinator.finish(job)
    assert alone.journal.entries() == []
    modelless = Replica(journal, clock, model=False)
    job = modelless.capture("Go")
    clock.now += 1000
    assert modelless.fire(job) is job and journal.read(SCOPE, "t1").claim is None  # type: ignore[union-attr]
    assert modelless.coordinator.take_over() == 0

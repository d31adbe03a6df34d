"""Who runs a pending capture when a replica's timer fires (``runtime/handoff.py``, pure)."""

from __future__ import annotations

import pytest

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.runtime.handoff import Timing, decide
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.pending import JournalEntry, Owner, claimed

A = Owner("pod-a", 10, "aaaa.1")
B = Owner("pod-b", 20, "bbbb.1")
C = Owner("pod-c", 30, "cccc.1")
TIMING = Timing(debounce=30.0, max_wait=120.0, lease=30.0)


def capture(owner: Owner, at: float, first: float | None = None) -> JournalEntry:
    turns = (Turn("user", "I like Go", "fp-1"),)
    e = JournalEntry.mine(
        MemoryScope("alice"), "t1", turns, expires_in=TIMING.expires_in, now=at, owner=owner
    )
    return e if first is None else JournalEntry(**{**_fields(e), "first": first})


def _fields(e: JournalEntry) -> dict[str, object]:
    return {name: getattr(e, name) for name in e.__slots__}


def test_no_entry_runs_the_local_capture() -> None:
    assert decide(None, A, 100.0, TIMING).verdict == "run"


def test_the_newest_capture_is_run_by_its_replica_and_the_others_stand_down() -> None:
    newest = capture(B, at=100.0)
    assert decide(newest, B, 130.0, TIMING).verdict == "claim"
    assert decide(newest, A, 125.0, TIMING).verdict == "stand_down"  # B's timer is running
    assert decide(newest, A, 129.9, TIMING).verdict == "stand_down"
    # past the thread's debounce for everyone (B is late: backlogged, or its clock is behind)
    assert decide(newest, A, 130.1, TIMING).verdict == "claim"


def test_max_wait_counts_from_the_oldest_pending_capture_on_any_replica() -> None:
    steady = capture(B, at=200.0, first=90.0)  # captured every few seconds since 90
    assert TIMING.due(steady) == 210.0
    assert decide(steady, A, 205.0, TIMING).verdict == "stand_down"
    assert decide(steady, A, 210.0, TIMING).verdict == "claim"
    assert decide(steady, A, 210.0, Timing(30.0, None, 30.0)).verdict == "stand_down"


def test_a_run_in_progress_elsewhere() -> None:
    running = claimed(capture(B, at=100.0), C, now=131.0, lease=30.0)
    assert decide(running, A, 140.0, TIMING).verdict == "stand_down"
    # our own newer capture arrived during C's run: look again soon, at the latest at expiry
    ours = JournalEntry(**{**_fields(running), "run": A.run, "host": A.host, "pid": A.pid})
    wait = decide(ours, A, 140.0, TIMING)
    assert wait.verdict == "wait" and 0 < wait.delay <= TIMING.poll(False)
    assert decide(ours, A, 160.95, TIMING).delay == pytest.approx(0.05)
    # C stopped renewing: its claim expired, anyone may claim
    assert decide(running, A, 161.5, TIMING).verdict == "claim"
    assert decide(running, C, 500.0, TIMING).verdict == "claim"  # C's own claim


def test_a_flush_runs_what_nobody_runs_and_waits_for_what_somebody_does() -> None:
    newest = capture(B, at=100.0)
    assert decide(newest, A, 101.0, TIMING, forced=True).verdict == "claim"
    running = claimed(newest, C, now=101.0, lease=30.0)
    flush = decide(running, A, 102.0, TIMING, forced=True)
    assert flush.verdict == "wait" and flush.delay == pytest.approx(0.05)

"""Each backend's journal as replicas use it: compare-and-set, captures that keep a claim, one
winner among racing claimers, the sweep for orphans, unreadable entries set aside."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from deermem_middleware.storage import MemoryStorage
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.pending import (
    JournalEntry,
    Owner,
    claimed,
    released,
    with_turns,
)

from .conftest import Backend
from .samples import ODD, SCOPE, turns

A = Owner("pod-a", 11, "aaaa.1")
B = Owner("pod-b", 22, "bbbb.1")
OLDER = turns("hi", "hello")
NEWER = turns("hi", "hello", "more", "ok")


@pytest.fixture
def journal(storage: MemoryStorage) -> PendingJournal:
    """One journal object (a storage that is not durable hands out a new one per call)."""
    return storage.journal()


def _put(journal: PendingJournal, owner: Owner, captured: tuple, *, thread: str = "t1") -> None:
    journal.put(SCOPE, thread, captured, expires_in=60.0, owner=owner)


def _entry(journal: PendingJournal, thread: str = "t1") -> JournalEntry:
    entry = journal.read(SCOPE, thread)
    assert entry is not None
    return entry


def test_swap_is_compare_and_set(journal: PendingJournal) -> None:
    _put(journal, A, OLDER)
    read = _entry(journal)
    assert journal.swap(read, claimed(read, B, time.time(), 30.0))
    assert not journal.swap(read, claimed(read, A, time.time(), 30.0))  # stale: lost
    now = _entry(journal)
    assert now.claim is not None and now.claim.held_by(B)
    assert not journal.swap(read, None)
    assert journal.swap(now, None)
    assert journal.read(SCOPE, "t1") is None


@pytest.mark.requires("shared_journal")
def test_a_capture_keeps_the_claim_and_the_oldest_pending_time(journal: PendingJournal) -> None:
    _put(journal, A, OLDER)
    first = _entry(journal)
    time.sleep(0.01)
    _put(journal, B, NEWER)
    newer = _entry(journal)
    assert newer.owned_by(B) and newer.turns == NEWER and newer.since == first.since
    until = time.time() + 3600
    assert journal.swap(newer, claimed(newer, A, until - 3600, 3600.0))
    _put(journal, B, turns("hi", "hello", "more", "ok", "again", "fine"))
    during = _entry(journal)
    assert during.claim is not None and during.claim.held_by(A)
    assert during.claim.until == pytest.approx(until)
    assert during.orphan_at == pytest.approx(until) and during.since == during.created
    assert (
        during.token == "6:" + turns("hi", "hello", "more", "ok", "again", "fine")[-1].fingerprint
    )


def test_one_of_many_racing_claimers_wins(journal: PendingJournal) -> None:
    _race(journal, lambda: journal)


@pytest.mark.requires("durable_journal")
def test_one_of_many_racing_claimers_wins_each_with_its_own_journal(
    storage: MemoryStorage,
) -> None:
    """As replicas do: each its own journal object (its own files' locks, its own pool)."""
    _race(storage.journal(), storage.journal)


def _race(journal: PendingJournal, journal_of: Callable[[], PendingJournal]) -> None:
    _put(journal, A, OLDER)
    claimers = [Owner("pod-x", n, f"{n:04d}.1") for n in range(8)]
    barrier = threading.Barrier(len(claimers))
    won: list[Owner] = []

    def claim(owner: Owner) -> None:
        own = journal_of()
        entry = own.read(SCOPE, "t1")
        assert entry is not None
        barrier.wait()
        if own.swap(entry, claimed(entry, owner, time.time(), 30.0)):
            won.append(owner)

    threads = [threading.Thread(target=claim, args=(o,)) for o in claimers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    final = _entry(journal)
    assert final.claim is not None and final.claim.held_by(won[0])


def test_the_sweep_finds_entries_past_their_orphan_time(journal: PendingJournal) -> None:
    journal.put(SCOPE, "silent", OLDER, expires_in=-1.0, owner=A)  # nobody claimed it in time
    journal.put(SCOPE, "waiting", OLDER, expires_in=3600.0, owner=A)
    journal.put(ODD, "abandoned", OLDER, expires_in=3600.0, owner=A)
    abandoned = journal.read(ODD, "abandoned")
    assert abandoned is not None
    assert journal.swap(abandoned, claimed(abandoned, B, time.time() - 100, 30.0))
    journal.put(SCOPE, "running", OLDER, expires_in=-1.0, owner=A)
    running = _entry(journal, "running")
    assert journal.swap(running, claimed(running, B, time.time(), 3600.0))
    found = {(e.scope, e.thread_id) for e in journal.orphans(time.time())}
    assert found == {(SCOPE, "silent"), (ODD, "abandoned")}
    # handed over by a replica that shuts down: anyone's at once
    waiting = _entry(journal, "waiting")
    assert journal.swap(waiting, released(waiting, now=time.time() - 1))
    assert (SCOPE, "waiting") in {(e.scope, e.thread_id) for e in journal.orphans(time.time())}


def test_done_removes_only_the_capture_that_was_run(journal: PendingJournal) -> None:
    _put(journal, A, NEWER)
    entry = _entry(journal)
    merged = with_turns(entry, turns("before", *[t.text for t in NEWER]))
    assert journal.swap(entry, merged)  # turns handed in by a replica standing down
    journal.done(SCOPE, "t1", entry.token)
    assert _entry(journal).turns == merged.turns
    journal.done(SCOPE, "t1", merged.token)
    assert journal.read(SCOPE, "t1") is None


@pytest.mark.requires("durable_journal")
def test_an_unreadable_entry_is_set_aside_and_the_thread_goes_on(
    backend: Backend, journal: PendingJournal
) -> None:
    assert backend.corrupt_entry is not None
    backend.corrupt_entry(SCOPE, "t1")
    assert journal.read(SCOPE, "t1") is None
    assert journal.entries() == []
    _put(journal, A, OLDER)  # the thread's next capture is journaled as usual
    assert _entry(journal).turns == OLDER
    assert backend.traces("unreadable")  # kept for a person to look at


def test_the_journal_says_whether_other_processes_see_it(
    backend: Backend, journal: PendingJournal
) -> None:
    """Engines coordinate replicas only on a journal other processes see (the capability)."""
    assert journal.shared is backend.caps.shared_journal

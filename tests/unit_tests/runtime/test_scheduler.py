"""The debounce scheduler: the pure table with a fake clock, then the threaded scheduler.

Threaded tests use short delays and wait with ``flush()`` or polling under generous timeouts; no
test asserts how long anything took.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deermem_middleware.runtime.scheduler import DebounceScheduler, DebounceTable
from tests.unit_tests.conftest import SAFETY


def wait_until(condition: Callable[[], bool], timeout: float = SAFETY) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


# ------------------------------------------------------------------------------------------------
# DebounceTable (pure, explicit clock)
# ------------------------------------------------------------------------------------------------


def test_table_submit_replaces_payload() -> None:
    """The newest submit of a key replaces its payload; one entry per key."""
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    assert table.submit("t1", "first", now=0.0) is False
    assert table.submit("t1", "second", now=1.0) is True
    assert len(table) == 1
    assert table.pop_due(100.0) == [("t1", "second", 0.0)]
    assert len(table) == 0


def test_table_deadline_is_debounce_after_last_submit() -> None:
    """Quiet for ``debounce`` after the last submit: nothing due before, due at the deadline."""
    table: DebounceTable[str, int] = DebounceTable(10, 60)
    table.submit("t", 1, now=0.0)
    table.submit("t", 2, now=5.0)
    assert table.next_deadline() == 15.0
    assert table.pop_due(14.9) == []
    assert table.pop_due(15.0) == [("t", 2, 0.0)]


def test_table_deadline_is_capped_by_max_wait() -> None:
    """deadline = min(last + debounce, first + max_wait): steady traffic cannot starve a key."""
    table: DebounceTable[str, int] = DebounceTable(10, 25)
    for i, now in enumerate([0.0, 8.0, 16.0, 24.0]):
        table.submit("t", i, now=now)
    assert table.next_deadline() == 25.0  # not 34 = 24 + 10
    assert table.pop_due(24.9) == []
    assert table.pop_due(25.0) == [("t", 3, 0.0)]


def test_table_without_max_wait_is_pure_debounce() -> None:
    table: DebounceTable[str, int] = DebounceTable(10, None)
    for i in range(100):
        table.submit("t", i, now=float(i * 5))
    assert table.next_deadline() == 495.0 + 10
    assert table.pop_due(504.0) == []


def test_table_keys_are_independent() -> None:
    """Only due keys pop; the others keep their own deadlines."""
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    table.submit("a", "pa", now=0.0)
    table.submit("b", "pb", now=5.0)
    assert table.pop_due(10.0) == [("a", "pa", 0.0)]
    assert "b" in table and "a" not in table
    assert table.next_deadline() == 15.0
    assert table.pop_due(15.0) == [("b", "pb", 5.0)]
    assert table.next_deadline() is None


def test_table_pop_due_orders_by_deadline() -> None:
    table: DebounceTable[str, int] = DebounceTable(10, 60)
    table.submit("late", 1, now=3.0)
    table.submit("early", 2, now=1.0)
    table.submit("middle", 3, now=2.0)
    assert [k for k, _, _ in table.pop_due(100.0)] == ["early", "middle", "late"]


def test_table_busy_key_stays_pending_until_rescheduled() -> None:
    """A due key that is running is kept (with its payload) and handed out after reschedule."""
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    table.submit("t", "p1", now=0.0)
    assert table.pop_due(20.0, busy={"t"}) == []
    assert "t" in table
    # no live deadline while busy: later polls do not spin on it
    assert table.next_deadline() is None
    assert table.pop_due(30.0) == []
    table.reschedule("t")
    assert table.next_deadline() == 10.0
    assert table.pop_due(30.0) == [("t", "p1", 0.0)]


def test_table_submit_while_busy_keeps_newest_payload() -> None:
    """A newer submit to a busy key replaces the payload; it is handed out after reschedule."""
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    table.submit("t", "p1", now=0.0)
    assert table.pop_due(20.0, busy={"t"}) == []
    table.submit("t", "p2", now=21.0)
    assert table.pop_due(31.0, busy={"t"}) == []
    table.reschedule("t")
    assert table.pop_due(31.0) == [("t", "p2", 0.0)]


def test_table_reschedule_unknown_key_is_noop() -> None:
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    table.reschedule("nobody")
    assert len(table) == 0 and table.next_deadline() is None


def test_table_pop_all_ignores_deadlines_but_not_busy() -> None:
    """pop_all hands out every idle key now; busy keys stay."""
    table: DebounceTable[str, str] = DebounceTable(3600, None)
    for key in ("a", "b", "c"):
        table.submit(key, f"p{key}", now=0.0)
    out = table.pop_all(busy={"b"})
    assert sorted(k for k, _, _ in out) == ["a", "c"]
    assert len(table) == 1 and "b" in table
    assert table.next_deadline() == 3600.0
    assert table.pop_all() == [("b", "pb", 0.0)]
    assert len(table) == 0 and table.next_deadline() is None


def test_table_pop_due_limit_keeps_the_rest_due() -> None:
    """A limit hands out the earliest deadlines; the others stay pending, still due, and a newer
    submit still replaces their payload."""
    table: DebounceTable[str, int] = DebounceTable(10, None)
    for i, key in enumerate("abcd"):
        table.submit(key, i, now=float(i))
    assert table.pop_due(100.0, limit=2) == [("a", 0, 0.0), ("b", 1, 1.0)]
    assert table.has_due(100.0) and table.has_due(12.0) and not table.has_due(11.9)
    assert table.submit("c", 9, now=50.0) is True  # held back, yet merged
    assert table.pop_due(100.0, limit=0) == []
    assert table.pop_due(100.0) == [("d", 3, 3.0), ("c", 9, 2.0)]
    assert not table.has_due(1000.0) and len(table) == 0


def test_table_pop_all_limit() -> None:
    """A flush's pop_all honours a limit too; what it leaves keeps its deadline."""
    table: DebounceTable[str, str] = DebounceTable(3600, None)
    for i, key in enumerate("abc"):
        table.submit(key, key.upper(), now=float(i))
    assert table.pop_all(limit=2) == [("a", "A", 0.0), ("b", "B", 1.0)]
    assert table.next_deadline() == 3602.0
    table.submit("a", "A2", now=5.0)
    assert table.pop_all(limit=5) == [("c", "C", 2.0), ("a", "A2", 5.0)]
    assert len(table) == 0 and table.next_deadline() is None


def test_table_deferred_counts_only_live_back_offs() -> None:
    table: DebounceTable[str, int] = DebounceTable(1, None)
    table.submit("a", 1, now=0.0)
    table.defer("b", 2, now=0.0, not_before=50.0)
    assert table.deferred(10.0) == 1 and table.deferred(60.0) == 0
    assert table.pop_due(60.0) == [("a", 1, 0.0), ("b", 2, 0.0)]
    assert table.deferred(10.0) == 0


@pytest.mark.parametrize(("debounce", "max_wait"), [(-1.0, 10.0), (1.0, -0.5)])
def test_table_rejects_negative_delays(debounce: float, max_wait: float) -> None:
    with pytest.raises(ValueError):
        DebounceTable(debounce, max_wait)


# ------------------------------------------------------------------------------------------------
# DebounceScheduler (real threads)
# ------------------------------------------------------------------------------------------------


class Recorder:
    """A thread-safe handler recording (key, payload) calls."""

    def __init__(self, action: Callable[[Any, Any], None] | None = None) -> None:
        self.calls: list[tuple[Any, Any]] = []
        self.lock = threading.Lock()
        self.action = action

    def __call__(self, key: Any, payload: Any) -> None:
        if self.action is not None:
            self.action(key, payload)
        with self.lock:
            self.calls.append((key, payload))

    def count(self) -> int:
        with self.lock:
            return len(self.calls)

    def for_key(self, key: Any) -> list[Any]:
        with self.lock:
            return [p for k, p in self.calls if k == key]

    def keys(self) -> list[Any]:
        with self.lock:
            return [k for k, _ in self.calls]


def test_burst_runs_once_with_last_payload(make_scheduler: Any) -> None:
    """Five quick submits to one thread -> one handler call with the newest payload."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=0.2, max_wait_seconds=30)
    for i in range(5):
        scheduler.submit("thread-1", i)
    assert wait_until(lambda: recorder.count() >= 1)
    assert scheduler.flush(SAFETY)
    assert recorder.calls == [("thread-1", 4)]
    assert scheduler.stats.submitted == 5
    assert scheduler.stats.replaced == 4
    assert scheduler.stats.completed == 1


def test_many_keys_each_run_once(make_scheduler: Any) -> None:
    """50 threads -> 50 calls, each with its own payload."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=0.05, max_wait_seconds=5, workers=4)
    for i in range(50):
        scheduler.submit(f"t{i}", f"payload-{i}")
    assert wait_until(lambda: recorder.count() >= 50)
    assert scheduler.flush(SAFETY)
    assert sorted(recorder.calls) == sorted((f"t{i}", f"payload-{i}") for i in range(50))
    assert scheduler.pending() == 0


def test_steady_traffic_is_bounded_by_max_wait(make_scheduler: Any) -> None:
    """Submits every 20 ms never leave 0.2 s of quiet, yet max_wait 0.3 runs the key anyway."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=0.2, max_wait_seconds=0.3)
    sent = 0
    give_up = time.monotonic() + SAFETY
    # at least 50 submits (~1 s), continuing until it ran twice: never a 0.2 s quiet gap
    while time.monotonic() < give_up:
        scheduler.submit("busy-thread", sent)
        sent += 1
        time.sleep(0.02)
        if sent >= 50 and recorder.count() >= 2:
            break
    during_traffic = recorder.for_key("busy-thread")
    assert len(during_traffic) >= 2
    # each run saw a newer capture than the one before, and none saw a capture not yet sent
    assert during_traffic == sorted(during_traffic)
    assert during_traffic[-1] < sent
    assert scheduler.flush(SAFETY)


def test_same_key_never_runs_concurrently(make_scheduler: Any) -> None:
    """A capture that becomes due while its key is running waits for that run."""
    active: dict[str, int] = {}
    overlaps: list[str] = []
    lock = threading.Lock()
    started = threading.Event()

    def slow(key: str, payload: int) -> None:
        with lock:
            active[key] = active.get(key, 0) + 1
            if active[key] > 1:
                overlaps.append(key)
        started.set()
        time.sleep(0.15)
        with lock:
            active[key] -= 1

    recorder = Recorder(slow)
    scheduler = make_scheduler(recorder, debounce_seconds=0.01, max_wait_seconds=1, workers=4)
    scheduler.submit("t", 1)
    assert started.wait(SAFETY)
    for i in range(2, 6):  # due while the first run is still sleeping
        scheduler.submit("t", i)
        time.sleep(0.02)
    assert scheduler.flush(SAFETY)
    assert overlaps == []
    payloads = recorder.for_key("t")
    assert payloads[0] == 1 and payloads[-1] == 5
    assert len(payloads) >= 2


def test_different_keys_run_in_parallel(make_scheduler: Any) -> None:
    """With two workers, key b runs while key a's handler is still blocked."""
    b_ran = threading.Event()
    a_saw_b = threading.Event()

    def handler(key: str, payload: int) -> None:
        if key == "a":
            if b_ran.wait(SAFETY):
                a_saw_b.set()
        else:
            b_ran.set()

    scheduler = make_scheduler(handler, debounce_seconds=0.01, max_wait_seconds=1, workers=2)
    scheduler.submit("a", 1)
    scheduler.submit("b", 1)
    assert scheduler.flush(SAFETY * 2)
    assert a_saw_b.is_set()


def test_failing_handler_does_not_stop_later_jobs(
    make_scheduler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A job that raises is counted in stats.failed and logged; the next jobs still run."""

    def explode(key: str, payload: int) -> None:
        if key == "bad":
            raise RuntimeError("boom")

    recorder = Recorder(explode)
    scheduler = make_scheduler(recorder, debounce_seconds=0.02, max_wait_seconds=1, workers=1)
    scheduler.submit("bad", 1)
    assert scheduler.flush(SAFETY)
    scheduler.submit("good", 2)
    scheduler.submit("bad", 3)
    scheduler.submit("other", 4)
    assert scheduler.flush(SAFETY)

    assert sorted(recorder.calls) == [("good", 2), ("other", 4)]
    assert scheduler.stats.failed == 2
    assert scheduler.stats.completed == 2
    failures = [
        r
        for r in caplog.records
        if r.name == "deermem_middleware.runtime.scheduler" and r.exc_info is not None
    ]
    assert len(failures) == 2
    assert all("boom" in str(r.exc_info[1]) for r in failures if r.exc_info)


def test_flush_runs_pending_work_now(make_scheduler: Any) -> None:
    """With a 30 s debounce, flush() runs everything pending at once and returns True."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=30, max_wait_seconds=120)
    for key in ("a", "b", "c"):
        scheduler.submit(key, key.upper())
    assert scheduler.pending() == 3
    assert scheduler.flush(SAFETY) is True
    assert sorted(recorder.calls) == [("a", "A"), ("b", "B"), ("c", "C")]
    assert scheduler.pending() == 0


def test_flush_with_nothing_pending_returns_true(make_scheduler: Any) -> None:
    scheduler = make_scheduler(Recorder(), debounce_seconds=30)
    assert scheduler.flush(1.0) is True


def test_flush_times_out_on_a_blocked_handler(make_scheduler: Any) -> None:
    """flush(timeout) returns False while a handler is stuck, True once it is released."""
    release = threading.Event()
    entered = threading.Event()

    def blocked(key: str, payload: int) -> None:
        entered.set()
        release.wait(SAFETY)

    recorder = Recorder(blocked)
    scheduler = make_scheduler(recorder, debounce_seconds=30)
    scheduler.submit("t", 1)
    try:
        assert scheduler.flush(0.3) is False
        assert entered.wait(SAFETY)
        assert scheduler.pending() == 1
    finally:
        release.set()
    assert scheduler.flush(SAFETY) is True
    assert recorder.calls == [("t", 1)]


def test_flush_runs_a_capture_queued_behind_a_running_one(make_scheduler: Any) -> None:
    """flush also waits for a newer capture of a key that was running when flush began."""
    release = threading.Event()
    entered = threading.Event()

    def handler(key: str, payload: int) -> None:
        if payload == 1:
            entered.set()
            release.wait(SAFETY)

    recorder = Recorder(handler)
    scheduler = make_scheduler(recorder, debounce_seconds=30)
    scheduler.submit("t", 1)
    assert scheduler.flush(0.3) is False  # starts payload 1, which blocks
    assert entered.wait(SAFETY)
    scheduler.submit("t", 2)
    release.set()
    assert scheduler.flush(SAFETY) is True
    assert recorder.for_key("t") == [1, 2]


def test_close_then_submit_raises(make_scheduler: Any) -> None:
    """close() drains pending work first; afterwards submit raises."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=30)
    scheduler.submit("t", 1)
    assert scheduler.close(SAFETY) is True
    assert scheduler.closed
    assert recorder.calls == [("t", 1)]
    with pytest.raises(RuntimeError, match="closed"):
        scheduler.submit("t", 2)
    assert scheduler.close() is True  # idempotent


def test_submit_from_many_threads(make_scheduler: Any) -> None:
    """8 threads x 100 submits over their own keys: every key runs with its last payload."""
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=0.05, max_wait_seconds=0.5, workers=4)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def producer(t: int) -> None:
        try:
            barrier.wait(SAFETY)
            for i in range(100):
                scheduler.submit(f"t{t}-k{i % 5}", i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SAFETY)
    assert errors == []
    assert scheduler.flush(SAFETY)

    assert scheduler.stats.submitted == 800
    keys = {f"t{t}-k{j}" for t in range(8) for j in range(5)}
    assert {k for k, _ in recorder.calls} == keys
    for key in keys:
        j = int(key.rsplit("k", 1)[1])
        assert recorder.for_key(key)[-1] == 95 + j  # the last i with i % 5 == j


def test_full_backlog_keeps_due_threads_pending(
    make_scheduler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """5,000 threads pending, a backlog of 10: none runs before its debounce, each runs once,
    the backlog never exceeds its bound, and the full backlog is logged once per episode (a
    busy machine may drain it to half and fill it again while the 5,000 are submitted: then the
    INFO "room again" comes between two warnings, never two warnings in a row)."""
    debounce = 0.3
    submitted_at: dict[str, float] = {}
    early: list[str] = []

    def handler(key: str, payload: int) -> None:
        if time.monotonic() - submitted_at[key] < debounce:
            early.append(key)

    recorder = Recorder(handler)
    scheduler = make_scheduler(
        recorder, debounce_seconds=debounce, max_wait_seconds=None, max_pending=10
    )
    keys = [f"t{i}" for i in range(5000)]
    for i, key in enumerate(keys):
        submitted_at[key] = time.monotonic()  # before submit: a lower bound of its debounce
        scheduler.submit(key, i)
    assert wait_until(lambda: recorder.count() >= 5000, timeout=SAFETY * 3)
    assert scheduler.flush(SAFETY)
    assert early == []
    assert sorted(recorder.calls) == sorted((key, i) for i, key in enumerate(keys))
    assert scheduler.stats.dispatched == 5000 and scheduler.stats.completed == 5000
    assert 1 <= scheduler.stats.max_queued <= 10
    episodes = [
        r.levelname
        for r in caplog.records
        if ("backlog full" in r.getMessage() and r.levelname == "WARNING")
        or ("has room again" in r.getMessage() and r.levelname == "INFO")
    ]
    assert episodes and episodes[0] == "WARNING"
    assert all(a != b for a, b in itertools.pairwise(episodes))


def test_full_backlog_still_merges_newer_captures(
    make_scheduler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A due thread held back by a full backlog keeps absorbing captures: it runs once, with the
    newest one (not once per capture, not with a partial conversation)."""
    release = threading.Event()
    entered = threading.Event()

    def handler(key: str, payload: str) -> None:
        if key == "a":
            entered.set()
            release.wait(SAFETY)

    recorder = Recorder(handler)
    scheduler = make_scheduler(
        recorder, debounce_seconds=0.02, max_wait_seconds=None, workers=1, max_pending=1
    )
    try:
        scheduler.submit("a", "a1")
        assert entered.wait(SAFETY)  # the only worker is busy
        scheduler.submit("b", "b1")
        assert wait_until(lambda: scheduler.stats.dispatched == 2)  # b fills the backlog
        scheduler.submit("c", "c1")
        assert wait_until(lambda: any("backlog full" in r.getMessage() for r in caplog.records))
        scheduler.submit("c", "c2")
        assert scheduler.pending() == 3
    finally:
        release.set()
    assert scheduler.flush(SAFETY)
    assert recorder.calls == [("a", "a1"), ("b", "b1"), ("c", "c2")]
    assert scheduler.stats.max_queued == 1


def test_flush_honours_the_backlog_bound(make_scheduler: Any) -> None:
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=3600, max_pending=3)
    for i in range(200):
        scheduler.submit(f"t{i}", i)
    assert scheduler.flush(SAFETY)
    assert sorted(recorder.calls) == sorted((f"t{i}", i) for i in range(200))
    assert 1 <= scheduler.stats.max_queued <= 3


def test_constructor_rejects_zero_workers() -> None:
    with pytest.raises(ValueError):
        DebounceScheduler(Recorder(), workers=0)
    with pytest.raises(ValueError):
        DebounceScheduler(Recorder(), max_pending=0)


# ------------------------------------------------------------------------------------------------
# async use: one scheduler across two pytest-asyncio tests (each has its own event loop)
# ------------------------------------------------------------------------------------------------

_SHARED = Recorder()


@pytest.fixture(scope="module")
def shared_scheduler() -> Iterator[DebounceScheduler[str, int]]:
    scheduler: DebounceScheduler[str, int] = DebounceScheduler(
        _SHARED, debounce_seconds=30, flush_on_exit_seconds=None
    )
    yield scheduler
    scheduler.close(SAFETY)


async def test_aflush_in_first_event_loop(shared_scheduler: DebounceScheduler[str, int]) -> None:
    """aflush runs pending work from an async test without blocking its loop."""
    shared_scheduler.submit("loop-1", 1)
    assert await shared_scheduler.aflush(SAFETY) is True
    assert ("loop-1", 1) in _SHARED.calls


async def test_aflush_and_aclose_in_second_event_loop(
    shared_scheduler: DebounceScheduler[str, int],
) -> None:
    """The same scheduler works from the next test's new loop: nothing bound to a loop."""
    shared_scheduler.submit("loop-2", 2)
    assert await shared_scheduler.aflush(SAFETY) is True
    assert ("loop-2", 2) in _SHARED.calls
    shared_scheduler.submit("loop-2", 3)
    assert await shared_scheduler.aclose(SAFETY) is True
    assert shared_scheduler.closed
    assert ("loop-2", 3) in _SHARED.calls
    with pytest.raises(RuntimeError):
        shared_scheduler.submit("loop-2", 4)

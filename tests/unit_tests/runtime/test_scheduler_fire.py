"""Running one key's pending work now: ``DebounceTable.fire`` with a fake clock, then the
threaded ``DebounceScheduler.fire`` and ``MemoryService.capture(now=True)``.

Threaded tests use long debounces (nothing would run for an hour) and wait by polling under
generous timeouts; no test asserts how long anything took.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware.runtime import MemoryService
from deermem_middleware.runtime.scheduler import DebounceTable, RetryLater
from deermem_middleware.testing import MarkerChatModel, marker_of
from tests.helpers import memory_config
from tests.unit_tests.conftest import SAFETY
from tests.unit_tests.runtime.test_scheduler import Recorder, wait_until

# ------------------------------------------------------------------------------------------------
# DebounceTable (pure, explicit clock)
# ------------------------------------------------------------------------------------------------


def test_table_fire_makes_one_key_due_now() -> None:
    table: DebounceTable[str, str] = DebounceTable(100, 1000)
    table.submit("a", "pa", now=0.0)
    table.submit("b", "pb", now=0.0)
    assert table.fire("a", now=5.0) is True
    assert table.next_deadline() == 5.0
    assert table.pop_due(5.0) == [("a", "pa", 0.0)]
    assert table.pop_due(99.0) == [] and table.next_deadline() == 100.0  # b keeps its time


def test_table_fire_of_an_unknown_key_is_false() -> None:
    table: DebounceTable[str, str] = DebounceTable(10, 60)
    assert table.fire("nothing", now=0.0) is False
    assert len(table) == 0 and table.next_deadline() is None


def test_table_a_newer_submit_keeps_a_fired_key_due() -> None:
    """The newest capture holds the whole conversation: it runs now too, not after a debounce."""
    table: DebounceTable[str, int] = DebounceTable(100, None)
    table.submit("t", 1, now=0.0)
    table.fire("t", now=1.0)
    table.submit("t", 2, now=2.0)
    assert table.next_deadline() == 1.0
    assert table.pop_due(2.0) == [("t", 2, 0.0)]
    table.submit("t", 3, now=3.0)  # a new burst: debounced again
    assert table.next_deadline() == 103.0


def test_table_fire_never_cuts_a_back_off_short() -> None:
    table: DebounceTable[str, int] = DebounceTable(10, 60)
    table.defer("t", 1, now=0.0, not_before=30.0)
    table.fire("t", now=1.0)
    assert table.pop_due(29.0) == []
    assert table.pop_due(30.0) == [("t", 1, 0.0)]


def test_table_fired_busy_key_waits_for_reschedule() -> None:
    table: DebounceTable[str, int] = DebounceTable(100, None)
    table.submit("t", 1, now=0.0)
    table.fire("t", now=1.0)
    assert table.pop_due(1.0, busy={"t"}) == []
    assert "t" in table
    table.reschedule("t")
    assert table.pop_due(2.0) == [("t", 1, 0.0)]


# ------------------------------------------------------------------------------------------------
# DebounceScheduler (threads)
# ------------------------------------------------------------------------------------------------


def test_fire_runs_only_that_key_now(make_scheduler: Any) -> None:
    recorder = Recorder()
    scheduler = make_scheduler(recorder, debounce_seconds=3600, max_wait_seconds=None)
    scheduler.submit("a", 1)
    scheduler.submit("b", 2)
    scheduler.submit("a", 3)  # still in the inbox: fire merges it first
    assert scheduler.fire("a") is True
    assert wait_until(lambda: recorder.keys() == ["a"])
    assert recorder.calls == [("a", 3)]
    assert scheduler.pending() == 1  # b still debouncing
    assert scheduler.fire("missing") is False


def test_fire_of_a_running_key_runs_its_newer_work_after(make_scheduler: Any) -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def handler(key: str, payload: int) -> None:
        seen.append(payload)
        if payload == 1:
            started.set()
            release.wait(SAFETY)

    scheduler = make_scheduler(handler, debounce_seconds=3600, max_wait_seconds=None)
    scheduler.submit("t", 1)
    scheduler.fire("t")
    assert started.wait(SAFETY)
    assert scheduler.fire("t") is False  # running, nothing newer pending
    scheduler.submit("t", 2)
    assert scheduler.fire("t") is True
    release.set()
    assert wait_until(lambda: seen == [1, 2])


def test_fire_leaves_a_retry_back_off_alone(make_scheduler: Any) -> None:
    calls: list[int] = []

    def handler(key: str, payload: int) -> None:
        calls.append(payload)
        raise RetryLater(3600, "endpoint down")

    scheduler = make_scheduler(handler, debounce_seconds=3600, max_wait_seconds=None)
    scheduler.submit("t", 1)
    scheduler.fire("t")
    assert wait_until(lambda: scheduler.stats.retried == 1)
    assert scheduler.fire("t") is True  # pending again, but backed off
    assert not wait_until(lambda: len(calls) > 1, timeout=0.3)


def test_fire_after_close_is_false(make_scheduler: Any) -> None:
    scheduler = make_scheduler(Recorder(), debounce_seconds=3600)
    scheduler.submit("t", 1)
    scheduler.close(timeout=SAFETY)
    assert scheduler.fire("t") is False


# ------------------------------------------------------------------------------------------------
# MemoryService.capture(now=True)
# ------------------------------------------------------------------------------------------------


def _conversation(marker: str) -> list[Any]:
    return [
        HumanMessage(f"Please keep this in mind: my marker for today is {marker}."),
        AIMessage(f"Understood, I will remember that your marker is {marker}."),
    ]


def test_capture_now_runs_that_thread_and_leaves_the_others_pending(tmp_path: Path) -> None:
    service = MemoryService(memory_config(tmp_path), model=MarkerChatModel())  # an hour's debounce
    try:
        assert service.capture(_conversation("F1-C001"), user_id="alice", thread_id="t1")
        assert service.capture(_conversation("F1-C002"), user_id="alice", thread_id="t2", now=True)

        def markers() -> list[str | None]:
            return [marker_of(f.content) for f in service.get_memory("alice").facts]

        assert wait_until(lambda: markers() == ["F1-C002"])
        assert wait_until(lambda: service._scheduler.pending() == 1)  # t1 keeps its debounce
        assert markers() == ["F1-C002"]
        assert service.flush(SAFETY)
        assert sorted(m for m in markers() if m) == ["F1-C001", "F1-C002"]
    finally:
        service.close(timeout=SAFETY)

"""Durable pending work (journal.py), retries and the circuit breaker (retry.py, scheduler)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.runtime.retry import CircuitBreaker, is_transient
from deermem_middleware.runtime.scheduler import DebounceScheduler, DebounceTable, RetryLater
from deermem_middleware.storage import InMemoryStorage, JSONFileStorage, MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.journal import InMemoryJournal, JournalEntry, job_token
from deermem_middleware.testing import OpenAIStub, ScriptedChatModel, update_json
from tests.helpers import dead_pid, memory_config, wait_for

SCOPE = MemoryScope("alice", "__default__")


def turns(*texts: str) -> tuple[Turn, ...]:
    roles = ("user", "assistant")
    return tuple(Turn(roles[i % 2], t, f"fp-{i}-{t}") for i, t in enumerate(texts))  # type: ignore[arg-type]


def conversation(marker: str) -> list[Any]:
    return [HumanMessage(f"Please remember {marker}, it matters."), AIMessage("Noted.")]


def marker_model() -> ScriptedChatModel:
    """Answers each extraction with one fact naming the marker it was shown."""

    def answer(messages: list[Any]) -> str:
        text = str(messages[-1].content)
        found = sorted({w.strip(".,") for w in text.split() if w.startswith("MK-")})
        return update_json(facts=[(f"User mentioned {m}", "context", 0.9) for m in found])

    return ScriptedChatModel(answers=[answer])


# -- the journal -----------------------------------------------------------------------------


@pytest.fixture(params=["file", "memory"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return FileJournal(tmp_path / "pending") if request.param == "file" else InMemoryJournal()


def test_journal_put_replace_done(journal: Any) -> None:
    odd = MemoryScope("ユーザー/../x", "a b")
    journal.put(odd, "thread/1", turns("hello", "hi"))
    journal.put(odd, "thread/1", turns("hello", "hi", "more", "ok"))  # replaces
    journal.put(SCOPE, "t2", turns("x", "y"))
    entries = sorted(journal.entries(), key=lambda e: e.thread_id)
    assert [(e.scope, e.thread_id, len(e.turns)) for e in entries] == [
        (SCOPE, "t2", 2),
        (odd, "thread/1", 4),
    ]
    journal.done(odd, "thread/1", job_token(turns("hello", "hi")))  # an older capture finished
    assert len(journal.entries()) == 2  # the newer capture is still pending
    journal.done(odd, "thread/1", job_token(turns("hello", "hi", "more", "ok")))
    assert [e.thread_id for e in journal.entries()] == ["t2"]
    journal.done(SCOPE, "missing", "0:")  # unknown entries are fine
    assert journal.forget(SCOPE) == 1
    assert journal.entries() == []


def test_unreadable_journal_entry_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = FileJournal(tmp_path / "pending")
    journal.put(SCOPE, "good", turns("a", "b"))
    bad = journal.path_for(SCOPE, "bad")
    bad.write_text("{ torn", encoding="utf-8")
    with caplog.at_level(logging.ERROR):
        entries = journal.entries()
    assert [e.thread_id for e in entries] == ["good"]
    assert str(bad) in caplog.text
    assert not bad.exists() and list(bad.parent.glob(".bad.json.unreadable-*"))


def test_owner_liveness() -> None:
    mine = JournalEntry.mine(SCOPE, "t", turns("a", "b"))
    assert not mine.owner_is_gone(600)
    host, pid, run = _owner()
    # the same pid in another process (a restarted container's pid 1): a predecessor's entry
    predecessor = JournalEntry(SCOPE, "t", (), host, pid, time.time(), run="0" * 16)
    assert run != "0" * 16 and predecessor.owner_is_gone(600)
    assert JournalEntry(SCOPE, "t", (), host, pid, time.time()).owner_is_gone(600)  # no token
    assert JournalEntry(SCOPE, "t", (), host, dead_pid(), time.time()).owner_is_gone(600)
    elsewhere = JournalEntry(SCOPE, "t", (), "other-host", 1, created=1000.0)
    assert not elsewhere.owner_is_gone(600, now=1500.0)
    assert elsewhere.owner_is_gone(600, now=1700.0)


def _owner() -> tuple[str, int, str]:
    from deermem_middleware.storage.journal import process_owner

    return process_owner()


def _config(tmp_path: Path, **kw: Any) -> MemoryConfig:
    return memory_config(tmp_path, **kw)


def _orphan(journal_root: Path) -> None:
    """Make every journal entry look like it was left by a process that died."""
    pid = dead_pid()
    for path in journal_root.glob("*/*/*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["owner"]["pid"] = pid
        path.write_text(json.dumps(data), encoding="utf-8")


def test_capture_is_journaled_until_stored(tmp_path: Path) -> None:
    mw = MemoryMiddleware(_config(tmp_path), model=marker_model())
    assert mw.capture(conversation("MK-1"), user_id="alice", thread_id="t1")
    assert [e.thread_id for e in mw.service.pending_entries()] == ["t1"]
    assert mw.flush(timeout=10)
    assert mw.service.pending_entries() == []
    assert [f.content for f in mw.get_memory("alice").facts] == ["User mentioned MK-1"]
    mw.close()


def test_pending_capture_survives_a_crash_exactly_once(tmp_path: Path) -> None:
    config = _config(tmp_path)
    crashed = MemoryMiddleware(config, model=marker_model())
    crashed.capture(conversation("MK-7"), user_id="alice", thread_id="t1")
    crashed.capture(conversation("MK-8"), user_id="bob", thread_id="t2")
    crashed.service._scheduler.close(0)  # the process "dies": nothing ran
    _orphan(Path(config.storage_path) / "pending")

    restarted = MemoryMiddleware(config, model=marker_model())  # replays at construction
    assert restarted.flush(timeout=10)
    assert [f.content for f in restarted.get_memory("alice").facts] == ["User mentioned MK-7"]
    assert [f.content for f in restarted.get_memory("bob").facts] == ["User mentioned MK-8"]
    assert restarted.service.pending_entries() == []
    restarted.close()
    again = MemoryMiddleware(config, model=marker_model())
    assert again.recover() == 0
    again.close()
    assert len(again.get_memory("alice").facts) == 1


def test_crash_between_save_and_journal_removal_applies_nothing_twice(tmp_path: Path) -> None:
    config = _config(tmp_path)
    mw = MemoryMiddleware(config, model=marker_model())
    mw.capture(conversation("MK-3"), user_id="alice", thread_id="t1")
    entry_path = Path(config.storage_path) / "pending"
    saved = {p: p.read_bytes() for p in entry_path.glob("*/*/*.json")}
    assert mw.flush(timeout=10)
    mw.close()
    for path, raw in saved.items():  # as if the process died right after saving the memory
        path.write_bytes(raw)
    _orphan(entry_path)
    model = marker_model()
    restarted = MemoryMiddleware(config, model=model)
    assert restarted.flush(timeout=10)
    assert [f.content for f in restarted.get_memory("alice").facts] == ["User mentioned MK-3"]
    assert model.calls == []  # the watermark shows the turns are stored: no extraction at all
    assert restarted.service.pending_entries() == []
    restarted.close()


def test_other_agents_and_live_owners_are_not_replayed(tmp_path: Path) -> None:
    config = _config(tmp_path)
    live = MemoryMiddleware(config, model=marker_model())
    live.capture(conversation("MK-9"), user_id="alice", thread_id="t1")
    other = MemoryMiddleware(config, model=marker_model())
    assert other.recover() == 0  # its owner (this process) is alive and will do it
    coder = MemoryMiddleware(config, model=marker_model(), agent_name="coder")
    _orphan(Path(config.storage_path) / "pending")
    assert coder.recover() == 0  # the entry belongs to the default agent
    assert other.recover() == 1
    for mw in (live, other, coder):
        mw.close()


def test_no_model_keeps_the_capture_pending(tmp_path: Path) -> None:
    mw = MemoryMiddleware(_config(tmp_path))  # no extraction model yet
    mw.capture(conversation("MK-4"), user_id="alice", thread_id="t1")
    assert mw.flush(timeout=10)
    assert len(mw.service.pending_entries()) == 1
    mw.service.use_model(marker_model())  # the agent's (or the graph's) model becomes known
    assert mw.flush(timeout=10)
    assert [f.content for f in mw.get_memory("alice").facts] == ["User mentioned MK-4"]
    assert mw.service.pending_entries() == []
    mw.close()


def test_journal_can_be_switched_off(tmp_path: Path) -> None:
    mw = MemoryMiddleware(_config(tmp_path, journal=False), model=marker_model())
    mw.capture(conversation("MK-5"), user_id="alice", thread_id="t1")
    assert mw.service._journal is None
    assert not (Path(mw.config.storage_path) / "pending").exists()
    mw.close()


def test_in_memory_storage_gets_an_in_memory_journal(tmp_path: Path) -> None:
    mw = MemoryMiddleware(_config(tmp_path), model=marker_model(), storage=InMemoryStorage())
    assert isinstance(mw.service._journal, InMemoryJournal)
    mw.close()


# -- back-off and the circuit breaker --------------------------------------------------------


def test_breaker_backoff_doubles_with_jitter_and_caps() -> None:
    now = [0.0]
    breaker = CircuitBreaker(
        base_seconds=1, max_seconds=10, threshold=3, clock=lambda: now[0], jitter=lambda: 1.0
    )
    assert [breaker.record_failure() for _ in range(2)] == [1, 2]
    assert not breaker.is_open  # below the threshold: only the failed work waits
    assert breaker.record_failure() == 4
    assert breaker.blocked_for() == 4  # open: nobody calls for 4 s
    now[0] = 4.0
    assert not breaker.is_open  # half-open: one probe may go
    assert [breaker.record_failure() for _ in range(3)] == [8, 10, 10]
    breaker.record_success()
    assert not breaker.is_open and breaker.failures == 0
    low = CircuitBreaker(base_seconds=1, max_seconds=10, threshold=1, jitter=lambda: 0.0)
    assert low.record_failure() == 0.5  # jitter never drops the wait to zero


def test_transient_errors_are_recognised() -> None:
    import httpx
    import openai

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    assert is_transient(openai.APITimeoutError(request=request))
    assert is_transient(
        openai.InternalServerError("boom", response=httpx.Response(503, request=request), body=None)
    )
    assert is_transient(
        openai.RateLimitError("slow", response=httpx.Response(429, request=request), body=None)
    )
    assert not is_transient(
        openai.AuthenticationError("key", response=httpx.Response(401, request=request), body=None)
    )
    assert is_transient(TimeoutError()) and not is_transient(ValueError())


def test_retry_later_keeps_work_pending_and_newest_payload() -> None:
    table: DebounceTable[str, int] = DebounceTable(debounce_seconds=1, max_wait_seconds=None)
    table.submit("t", 1, now=0)
    assert table.pop_due(1.0) == [("t", 1, 0)]
    table.defer("t", 1, now=1.0, not_before=11.0)
    table.submit("t", 2, now=2.0)  # a newer capture arrives during the back-off
    assert table.pop_due(5.0) == []
    assert table.pop_all(now=5.0) == []  # even a flush does not force it
    assert table.deferred(5.0) == 1
    assert table.pop_due(11.0) == [("t", 2, 1.0)]  # pending since the deferral


def test_scheduler_retries_after_the_delay_and_flush_does_not_spin() -> None:
    attempts: list[float] = []
    done = threading.Event()

    def handler(key: str, payload: int) -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RetryLater(0.05)
        done.set()

    scheduler: DebounceScheduler[str, int] = DebounceScheduler(
        handler, debounce_seconds=0, max_wait_seconds=None, flush_on_exit_seconds=None
    )
    scheduler.submit("t", 1)
    assert done.wait(5)
    assert len(attempts) == 3 and scheduler.stats.retried == 2

    def always_failing(key: str, payload: int) -> None:
        attempts.append(time.monotonic())
        raise RetryLater(60)

    stuck: DebounceScheduler[str, int] = DebounceScheduler(
        always_failing, debounce_seconds=0, max_wait_seconds=None, flush_on_exit_seconds=None
    )
    attempts.clear()
    stuck.submit("t", 1)
    assert stuck.flush(timeout=5) is False  # returns at once: the work is backed off
    assert stuck.flush(timeout=5) is False
    assert len(attempts) == 1  # and nothing was retried meanwhile
    assert stuck.pending() == 1
    scheduler.close(1)
    stuck.close(0)


def _failing_then_ok(stub_failures: int, status: int = 500) -> tuple[OpenAIStub, Any]:
    ok = update_json(facts=[("User writes Go at a payments company", "knowledge", 0.9)])
    stub = OpenAIStub([(status, "upstream exploded")] * stub_failures + [(200, ok)])
    return stub, stub.model(timeout=5)  # the client itself does not retry (max_retries=0)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_real_chat_openai_failures_are_retried_until_success(
    tmp_path: Path, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    stub, model = _failing_then_ok(4, status)
    config = _config(tmp_path, debounce_seconds=0, retry_base_seconds=0.02, retry_max_seconds=0.1)
    mw = MemoryMiddleware(config, model=model)
    mw.capture(
        [HumanMessage("I write Go at a payments company."), AIMessage("Nice.")],
        user_id="alice",
        thread_id="t1",
    )
    deadline = time.monotonic() + 20
    while not mw.get_memory("alice").facts and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [f.content for f in mw.get_memory("alice").facts] == [
        "User writes Go at a payments company"
    ]
    assert mw.flush(timeout=10)  # the run that saved the facts also clears its journal entry
    assert len(stub.requests) == 5  # four failures, one success, nothing lost
    assert mw.service.pending_entries() == []
    assert "kept pending" in caplog.text and f"HTTP {status}" in caplog.text
    mw.close()


def test_dead_endpoint_does_not_spin_the_worker(tmp_path: Path) -> None:
    stub, model = _failing_then_ok(10_000)
    config = _config(
        tmp_path,
        debounce_seconds=0,
        retry_base_seconds=0.05,
        retry_max_seconds=0.2,
        breaker_failures=2,
    )
    mw = MemoryMiddleware(config, model=model)
    for i in range(20):  # many threads with pending work
        mw.capture(conversation(f"MK-{i}"), user_id="alice", thread_id=f"t{i}")
    time.sleep(1.0)  # the window the calls are counted in (a busy machine makes fewer)
    # with the breaker open, calls are about one per back-off period, not one per thread
    # per retry: 20 threads x (1 s / 0.05 s) would be ~400 without it
    assert len(stub.requests) < 60
    wait_for(lambda: mw.service._scheduler.stats.retried, "a retry to be scheduled", timeout=60)
    assert mw.service._scheduler.pending() == 20  # nothing dropped
    assert len(mw.service.pending_entries()) == 20
    assert mw.flush(timeout=1) is False
    mw.close(timeout=0)


def test_storage_errors_do_not_open_the_breaker(tmp_path: Path) -> None:
    class BrokenStorage(JSONFileStorage):
        def save(self, *args: Any, **kwargs: Any) -> int:
            from deermem_middleware.storage import StorageError

            raise StorageError("disk full")

        update = save

    config = _config(tmp_path, debounce_seconds=0, retry_base_seconds=10)
    mw = MemoryMiddleware(config, model=marker_model(), storage=BrokenStorage(tmp_path / "m"))
    mw.capture(conversation("MK-1"), user_id="alice", thread_id="t1")
    assert mw.flush(timeout=5) is False  # kept pending, backed off
    assert mw.service._breaker.failures == 0
    assert len(mw.service.pending_entries()) == 1
    mw.close(timeout=0)


def test_shorter_entry_written_over_a_longer_one_reads_cleanly(tmp_path: Path) -> None:
    """A shorter entry replaces a longer one whole; bytes after the JSON object (left by versions
    that wrote entries in place) are ignored."""
    journal = FileJournal(tmp_path / "pending")
    journal.put(SCOPE, "t", turns("a much longer first message " * 20, "and its answer"))
    journal.put(SCOPE, "t", turns("short", "ok"))
    assert [len(e.turns[0].text) for e in journal.entries()] == [5]
    path = journal.path_for(SCOPE, "t")
    path.write_bytes(path.read_bytes() + b' "left over from a longer entry"}')
    assert [e.turns[0].text for e in journal.entries()] == ["short"]

"""A storage that hangs or refuses: the agent's path waits at most ``storage_timeout_seconds``.

A PostgreSQL outage once cost about a minute per agent turn: the memory read before the model
call and the journal write after the turn each waited psycopg_pool's 30 s for a connection, and
``deermem show`` printed a ``PoolTimeout`` traceback. These tests use a storage double that
hangs (a host that does not answer) or refuses (a server that is down) on demand, and assert
what happens, never how long it took: the turn goes on without memory, the capture is kept in
the process, and once the storage is back the update of the outage turn is stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from psycopg_pool import PoolTimeout

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.cli import main
from deermem_middleware.runtime.hotpath import StorageGuard
from deermem_middleware.runtime.scheduler import RetryLater
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import InMemoryStorage, MemoryScope, StoredMemory
from deermem_middleware.storage.base import StorageError
from deermem_middleware.storage.factory import connection_kwargs, open_storage
from deermem_middleware.storage.journal import InMemoryJournal, JournalEntry
from deermem_middleware.storage.outage import StorageUnavailable, describe_dsn, is_outage
from deermem_middleware.testing import (
    RecordingAgentModel,
    ScriptedChatModel,
    system_text,
    update_json,
)
from tests.helpers import memory_config
from tests.unit_tests.conftest import SAFETY

SCOPE = MemoryScope("alice", "__default__")
BEFORE = "The user writes backend services in Go"
DURING = "The user moved to Lisbon"
DEAD_DSN = "postgresql://bob:hunter2@/deermem_gone?host=/nonexistent-deermem-socket-dir"
"""A database nobody serves (a socket folder that does not exist: no network is touched)."""

Mode = Literal["up", "hang", "refuse"]


class Switch:
    """Whether the storage double answers, hangs until it is back, or refuses at once."""

    def __init__(self) -> None:
        self.mode: Mode = "up"
        self._back = threading.Event()
        self._back.set()

    def set(self, mode: Mode) -> None:
        self.mode = mode
        if mode == "hang":
            self._back.clear()
        else:
            self._back.set()

    def check(self) -> None:
        if self.mode == "refuse":
            raise psycopg.OperationalError("connection refused (test double)")
        if not self._back.wait(SAFETY):
            raise AssertionError("the storage double hung past the safety net")


class OutageJournal(InMemoryJournal):
    def __init__(self, switch: Switch) -> None:
        super().__init__()
        self.switch = switch
        self.written: list[str] = []
        """Thread ids of the entries written, in order."""

    def capture(self, entry: JournalEntry) -> None:
        self.switch.check()
        super().capture(entry)
        self.written.append(entry.thread_id)


class OutageStorage(InMemoryStorage):
    """An in-memory storage every call of which goes through the switch (journal included)."""

    def __init__(self) -> None:
        super().__init__()
        self.switch = Switch()
        self._journal = OutageJournal(self.switch)

    def load(self, scope: MemoryScope) -> StoredMemory:
        self.switch.check()
        return super().load(scope)

    def revision(self, scope: MemoryScope) -> int:
        self.switch.check()
        return super().revision(scope)

    def save(self, scope: MemoryScope, memory: Any, expected_revision: int, **kw: Any) -> int:
        self.switch.check()
        return super().save(scope, memory, expected_revision, **kw)

    def journal(self, *, fsync: bool = False) -> OutageJournal:
        return self._journal


def _extractor(*answers: Any) -> ScriptedChatModel:
    """One fact per extraction: the facts named, in this order (an exception: that call fails)."""
    script = [
        a if isinstance(a, Exception) else update_json(facts=[(a, "context", 0.95)])
        for a in answers
    ]
    return ScriptedChatModel(answers=script)


def _conversation(text: str) -> list[Any]:
    return [HumanMessage(text), AIMessage("Noted.")]


def _config(tmp_path: Path, **overrides: Any) -> MemoryConfig:
    values: dict[str, Any] = {
        "storage_timeout_seconds": 0.2,
        "retry_base_seconds": 0.01,
        "retry_max_seconds": 0.05,
    }
    values.update(overrides)
    return memory_config(tmp_path, **values)


@pytest.fixture
def engine_on(tmp_path: Path) -> Iterator[Callable[..., tuple[MemoryService, OutageStorage]]]:
    made: list[MemoryService] = []

    def make(*answers: Any, **overrides: Any) -> tuple[MemoryService, OutageStorage]:
        storage = OutageStorage()
        service = MemoryService(
            _config(tmp_path, **overrides), model=_extractor(*answers), storage=storage
        )
        made.append(service)
        return service, storage

    yield make
    for service in made:
        service._storage.switch.set("up")  # type: ignore[attr-defined]
        service.close(timeout=SAFETY)


def _facts(storage: OutageStorage) -> list[str]:
    return [f.content for f in InMemoryStorage.load(storage, SCOPE).memory.facts]


def _stored_before(service: MemoryService, storage: OutageStorage) -> None:
    """A fact stored while the storage is up, so a memory block has something to show."""
    assert service.capture(_conversation("I write backend services in Go."), user_id="alice")
    assert service.flush(timeout=SAFETY)
    assert BEFORE in service.memory_block([HumanMessage("Go?")], "alice")


# -- the guard -------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_call_that_hangs_is_abandoned_at_the_timeout() -> None:
    guard = StorageGuard(0.05)
    release = threading.Event()
    try:
        with pytest.raises(StorageUnavailable, match="no answer within"):
            guard.call("reading memory", lambda: release.wait(SAFETY))
        assert guard.down
    finally:
        release.set()


def test_while_a_call_hangs_the_next_ones_do_not_wait() -> None:
    clock = FakeClock()
    guard = StorageGuard(0.05, probe_seconds=5.0, clock=clock)
    release = threading.Event()
    calls: list[str] = []
    try:
        with pytest.raises(StorageUnavailable):
            guard.call("reading memory", lambda: release.wait(SAFETY))
        clock.now += 60  # past the probe interval, but the first call still hangs
        with pytest.raises(StorageUnavailable, match="still"):
            guard.call("journaling a capture", lambda: calls.append("ran"))
        assert calls == []  # not even started: a hung storage gets one waiting call at a time
    finally:
        release.set()


def test_during_an_outage_calls_skip_the_storage_until_the_next_probe() -> None:
    clock = FakeClock()
    guard = StorageGuard(1.0, probe_seconds=5.0, clock=clock)
    calls: list[str] = []

    def refused() -> None:
        calls.append("refused")
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(StorageUnavailable):
        guard.call("reading memory", refused)
    clock.now += 1.0
    with pytest.raises(StorageUnavailable):
        guard.call("reading memory", lambda: calls.append("skipped?"))
    assert calls == ["refused"]  # inside the probe interval the storage is not asked
    clock.now += 5.0
    assert guard.call("reading memory", lambda: "answer") == "answer"  # the probe
    assert not guard.down


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    guard = StorageGuard(1.0, probe_seconds=5.0, clock=clock)

    def refused() -> None:
        raise psycopg.OperationalError("connection refused")

    for _ in range(4):  # a probe and skipped calls, twice
        for _ in range(3):
            with pytest.raises(StorageUnavailable):
                guard.call("reading memory", refused)
        clock.now += 6.0
    guard.call("reading memory", lambda: None)
    with pytest.raises(StorageUnavailable):  # a second outage
        guard.call("reading memory", refused)
    records = [r for r in caplog.records if r.name == "deermem_middleware.runtime.hotpath"]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert "unreachable" in warnings[0].getMessage()
    assert [r.levelno for r in records if r.levelno >= logging.INFO].count(logging.INFO) == 1
    assert not [r for r in records if r.levelno >= logging.ERROR]


def test_errors_that_are_not_an_outage_pass_through() -> None:
    guard = StorageGuard(1.0)

    def broken() -> None:
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError, match="a bug"):
        guard.call("reading memory", broken)
    assert not guard.down


def _guard_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}-")]


def test_closing_the_guard_lets_its_threads_go_at_once() -> None:
    """An engine released per request must not leave a waiting thread behind for 30 s."""
    guard = StorageGuard(5.0, name="guard-close-test")
    assert guard.call("reading memory", lambda: 1) == 1
    threads = _guard_threads("guard-close-test")
    assert len(threads) == 1 and threads[0].is_alive()
    guard.close()
    threads[0].join(SAFETY)
    assert not threads[0].is_alive()
    # a late call still runs, on a thread that leaves when it is done
    assert guard.call("reading memory", lambda: 2) == 2
    for thread in _guard_threads("guard-close-test"):
        thread.join(SAFETY)
        assert not thread.is_alive()


def test_closing_an_engine_closes_its_storage_guard() -> None:
    service = MemoryService(
        MemoryConfig(enabled=True), storage=InMemoryStorage(), agent_name="guard-close-engine"
    )
    service._hot_path.call("reading memory", lambda: None)
    name = service._hot_path._runner._name
    assert _guard_threads(name)
    service.close()
    for thread in _guard_threads(name):
        thread.join(SAFETY)
        assert not thread.is_alive()


def test_success_seen_elsewhere_ends_the_outage() -> None:
    guard = StorageGuard(1.0, probe_seconds=3600.0)
    with pytest.raises(StorageUnavailable):
        guard.call("reading memory", lambda: (_ for _ in ()).throw(TimeoutError("slow")))
    assert guard.down
    guard.record_success()  # e.g. a background update was stored
    assert not guard.down
    assert guard.call("reading memory", lambda: 1) == 1


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        PoolTimeout("couldn't get a connection after 2.00 sec"),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError("timed out"),
        StorageUnavailable("already known"),
    ],
)
def test_connection_failures_are_outages(exc: Exception) -> None:
    assert is_outage(exc)


@pytest.mark.parametrize("exc", [ValueError("x"), StorageError("disk full"), KeyError("k")])
def test_other_failures_are_not_outages(exc: Exception) -> None:
    assert not is_outage(exc)


# -- the engine's hot path -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hang", "refuse"])
def test_outage_turn_goes_on_without_memory_and_is_stored_after_recovery(
    engine_on: Callable[..., tuple[MemoryService, OutageStorage]], mode: Mode
) -> None:
    service, storage = engine_on(BEFORE, DURING)
    _stored_before(service, storage)

    storage.switch.set(mode)
    assert service.memory_block([HumanMessage("Where do I live?")], "alice") == ""
    queued = service.capture(
        _conversation("I moved to Lisbon last month."), user_id="alice", thread_id="outage"
    )
    assert queued  # accepted: kept in this process while the storage is away
    assert "outage" not in storage.journal().written  # the journal write did not get through
    assert service._scheduler.pending() == 1

    storage.switch.set("up")
    assert service.flush(timeout=SAFETY)
    assert _facts(storage) == [BEFORE, DURING]
    if mode == "refuse":  # a hung write may still land late; its replay would be a no-op
        assert storage.journal().entries() == []


def test_injection_is_skipped_quietly_during_an_outage(
    engine_on: Callable[..., tuple[MemoryService, OutageStorage]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, storage = engine_on(BEFORE)
    _stored_before(service, storage)
    storage.switch.set("refuse")
    caplog.clear()
    for turn in range(5):
        assert service.memory_block([HumanMessage(f"turn {turn}")], "alice") == ""
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "unreachable" in warnings[0].getMessage()
    assert warnings[0].exc_info is None  # one line, not a traceback per turn


def test_a_capture_the_journal_missed_is_journaled_once_the_storage_is_back(
    engine_on: Callable[..., tuple[MemoryService, OutageStorage]],
) -> None:
    # the storage is back before the update runs, but the extraction endpoint fails once: the
    # capture stays pending, and the journal entry it missed is written then
    service, storage = engine_on(TimeoutError("extraction endpoint timed out"), DURING)
    storage.switch.set("refuse")
    assert service.capture(
        _conversation("I moved to Lisbon last month."), user_id="alice", thread_id="outage"
    )
    storage.switch.set("up")
    assert service.flush(timeout=SAFETY)
    assert _facts(storage) == [DURING]
    assert storage.journal().written == ["outage"]  # written late, by the worker
    assert storage.journal().entries() == []  # and cleared once stored


def test_agent_turn_goes_on_when_the_storage_hangs(tmp_path: Path) -> None:
    storage = OutageStorage()
    mw = MemoryMiddleware(
        _config(tmp_path, debounce_seconds=0.05),
        model=_extractor(BEFORE, DURING),
        storage=storage,
    )
    model = RecordingAgentModel()
    agent = create_agent(model, [], middleware=[mw], checkpointer=InMemorySaver())
    try:

        def turn(text: str, thread: str) -> str:
            config: Any = {"configurable": {"thread_id": thread, "user_id": "alice"}}
            agent.invoke({"messages": [HumanMessage(text)]}, config)
            return system_text(model.seen[-1])

        turn("I write backend services in Go.", "before")
        assert mw.flush(timeout=SAFETY)
        assert BEFORE in turn("Which language should I use?", "check")

        storage.switch.set("hang")
        assert "<memory>" not in turn("I moved to Lisbon last month.", "outage")

        storage.switch.set("up")
        assert mw.flush(timeout=SAFETY)
        assert DURING in _facts(storage)
    finally:
        storage.switch.set("up")
        mw.close(timeout=SAFETY)


# -- opening PostgreSQL, and the command line ------------------------------------------------


def test_the_pool_connects_with_a_timeout_unless_the_dsn_names_one() -> None:
    assert connection_kwargs("postgresql://u@db/x", 0.5)["connect_timeout"] == 2  # libpq's least
    assert connection_kwargs("postgresql://u@db/x", 2.5)["connect_timeout"] == 3
    assert "connect_timeout" not in connection_kwargs("postgresql://u@db/x?connect_timeout=9", 1)
    assert "connect_timeout" not in connection_kwargs("host=db dbname=x connect_timeout=9", 1)
    assert connection_kwargs("host=db dbname=x", 1)["autocommit"] is True


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:hunter2@db.internal:6543/memories",
        "host=db.internal port=6543 dbname=memories user=bob password=hunter2",
    ],
)
def test_a_database_is_named_without_its_password(dsn: str) -> None:
    text = describe_dsn(dsn)
    assert "memories" in text and "db.internal:6543" in text and "bob" in text
    assert "hunter2" not in text


def test_an_unparsable_dsn_is_not_echoed() -> None:
    text = describe_dsn("postgresql://bob:hunter2@db:notaport/x")
    assert "hunter2" not in text


def test_opening_a_dead_database_is_one_clear_error() -> None:
    config = MemoryConfig(
        storage={"backend": "postgres", "dsn": DEAD_DSN},  # type: ignore[arg-type]
        storage_timeout_seconds=0.2,
    )
    with pytest.raises(StorageUnavailable) as caught:
        open_storage(config)
    message = str(caught.value)
    assert "deermem_gone" in message and "storage_timeout_seconds" in message
    assert "hunter2" not in message and "\n" not in message


def _dead_database_config(tmp_path: Path, extra: str = "") -> Path:
    """A config file naming :data:`DEAD_DSN` with a short storage timeout."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "memory:\n"
        "  storage_timeout_seconds: 0.2\n"
        "  storage:\n"
        "    backend: postgres\n"
        f"{extra}"
        f"    dsn: {DEAD_DSN}\n",
        encoding="utf-8",
    )
    return config


def test_deermem_show_against_a_dead_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _dead_database_config(tmp_path)
    assert main(["show", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("deermem: ")]
    assert len(lines) == 1, err
    assert "cannot reach" in lines[0] and "deermem_gone" in lines[0]
    assert "hunter2" not in err and "Traceback" not in err


def test_a_database_lost_after_opening_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # setup: false opens without a query; the first read is the one that fails
    config = _dead_database_config(tmp_path, "    setup: false\n")
    assert main(["show", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "cannot reach" in err and "deermem_gone" in err
    assert "hunter2" not in err and "Traceback" not in err


# -- flushing after an outage ----------------------------------------------------------------


def test_flush_runs_work_when_its_back_off_ends_not_at_its_debounce_deadline(
    make_scheduler: Callable[..., Any],
) -> None:
    # a storage fault backs the update off for seconds; the debounce deadline can be minutes
    # away (max_wait_seconds): a flush waits for the back-off, then runs it
    runs: list[str] = []

    def handler(key: str, payload: str) -> None:
        runs.append(payload)
        if len(runs) == 1:
            raise RetryLater(0.05, "storage unreachable")

    scheduler = make_scheduler(handler, debounce_seconds=3600, max_wait_seconds=3600)
    scheduler.submit("thread", "capture")
    assert scheduler.flush(timeout=SAFETY)
    assert runs == ["capture", "capture"]

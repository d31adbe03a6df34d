"""Several replica processes on one PostgreSQL, for real: started together on a fresh database,
round-robin turns without sticky sessions, a replica killed (SIGKILL) or paused (SIGSTOP) while
it holds the newest capture of its threads.

Each replica is a process running a real ``create_agent`` agent with ``MemoryMiddleware`` on the
shared storage and a shared PostgreSQL checkpointer (:mod:`.workers.replica`), as a stateless
server behind a load balancer; extraction is a marker model, so what is counted is calls and
markers, not memory quality. Figures for more threads: ``benchmarks/replicas.py``.
"""

from __future__ import annotations

import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import postgres_dsn
from .fleet import (
    Traffic,
    everything_stored,
    fleet,
    open_memory,
    round_robin,
    setup_checkpointer,
    start_replicas,
    stored_markers,
    wait_until,
)

DEBOUNCE = 3.0
LEASE = 3.0
STARTS = 20


@pytest.fixture(scope="module")
def dsn() -> str:
    dsn = postgres_dsn()
    setup_checkpointer(dsn)
    return dsn


def _settings(dsn: str, **extra: Any) -> dict[str, Any]:
    prefix = f"r{uuid.uuid4().hex[:10]}"
    return {"dsn": dsn, "prefix": prefix, "debounce": DEBOUNCE, "lease": LEASE, **extra}


def _database(dsn: str, name: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "dbname": name})


@pytest.fixture
def setup_workers() -> Iterator[list[Any]]:
    replicas = start_replicas(3, {"setup_only": True})
    try:
        yield replicas
    finally:
        for replica in replicas:
            replica.stop()


def _start_together(replicas: list[Any], location: str, backend: str) -> list[dict[str, Any]]:
    at = time.time() + 0.3
    for replica in replicas:
        replica.send(op="setup", dsn=location, backend=backend, at=at)
    return [replica.receive() for replica in replicas]


def test_replicas_started_together_on_a_fresh_postgres_database_all_start(
    dsn: str, setup_workers: list[Any]
) -> None:
    """Before: 5 of 14 such starts lost a replica (UniqueViolation, deadlock detected)."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    failures = []
    with psycopg.connect(dsn, autocommit=True) as admin:
        for start in range(STARTS):
            name = f"deermem_start_{uuid.uuid4().hex[:12]}"
            admin.execute(f'CREATE DATABASE "{name}"')
            try:
                answers = _start_together(setup_workers, _database(dsn, name), "postgres")
                failures += [(start, a["error"]) for a in answers if not a["ok"]]
                with psycopg.connect(_database(dsn, name)) as conn:
                    versions = [r[0] for r in conn.execute("SELECT v FROM store_migrations")]
                    invalid = conn.execute(
                        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                        "WHERE c.relname = 'store' AND NOT i.indisvalid"
                    ).fetchone()
                assert sorted(versions) == list(range(len(PostgresStore.MIGRATIONS))), versions
                assert invalid == (0,)
            finally:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    assert failures == []


def test_replicas_started_together_on_a_fresh_sqlite_file_all_start(
    tmp_path: Path, setup_workers: list[Any]
) -> None:
    from langgraph.store.sqlite import SqliteStore

    failures = []
    for start in range(STARTS):
        path = tmp_path / f"memory-{start}.db"
        answers = _start_together(setup_workers, str(path), "sqlite")
        failures += [(start, a["error"]) for a in answers if not a["ok"]]
        with sqlite3.connect(path) as conn:
            versions = [r[0] for r in conn.execute("SELECT v FROM store_migrations")]
        assert sorted(versions) == list(range(len(SqliteStore.MIGRATIONS)))
    assert failures == []


def test_round_robin_replicas_extract_once_per_burst(dsn: str) -> None:
    """Before: 3 replicas made 2.8–3.3 calls per burst; now within 1.2× of one replica."""
    settings = _settings(dsn)
    storage = open_memory(dsn, settings["prefix"])
    with fleet(3, settings) as replicas:
        single, spread = Traffic(threads=20, turns=6), Traffic(threads=20, turns=6)

        single.play(replicas, lambda number, turn: 0)  # one replica takes every turn
        assert wait_until(everything_stored(storage, single, replicas), 60) is not None
        calls_single = sum(r.ask(op="stats")["calls"] for r in replicas)

        spread.play(replicas, round_robin(3))
        assert wait_until(everything_stored(storage, spread, replicas), 60) is not None
        calls_total = sum(r.ask(op="stats")["calls"] for r in replicas)

    calls_spread = calls_total - calls_single
    assert calls_single == single.threads  # one call per burst
    assert calls_spread <= 1.2 * calls_single, (calls_spread, calls_single)
    for traffic in (single, spread):
        found = stored_markers(storage, traffic.users())
        assert sorted(found) == traffic.markers() and set(found.values()) == {1}
    storage.close()


def _last_turn_on_replica_2(number: int, turn: int) -> int:
    """Turns 0, 1, 2 of every thread on replicas 0, 1, 2: replica 2 takes each last turn."""
    return turn % 3


def _stop_the_last_replica(
    replicas: list[Any], storage: Any, number: int
) -> tuple[Traffic, float | None]:
    """10 threads × 3 turns, each thread's last turn on replica 2, which then gets signal
    ``number``; returns the traffic and what :func:`wait_until` said (None: the other two did
    not store every turn within a minute of the signal).

    How many seconds the takeover takes is a figure of ``benchmarks/replicas.py``, not an
    assertion here: a bound near ``2 × debounce + lease`` failed once on a loaded CI machine
    (9.07 s against 9 s). The minute still tells a takeover by lease (seconds) from the old
    behaviour, which waited for a process to start (600 s from another host)."""
    traffic = Traffic(threads=10, turns=3)
    traffic.play(replicas, _last_turn_on_replica_2)
    replicas[2].signal(number)
    if number == signal.SIGKILL:
        replicas[2].process.wait(timeout=10)
    took = wait_until(everything_stored(storage, traffic, replicas[:2]), 60)
    return traffic, took


def test_a_killed_replicas_captures_are_stored_by_the_survivors(dsn: str) -> None:
    """Before: nobody took them over until a process started (another host's: after 600 s)."""
    settings = _settings(dsn)
    storage = open_memory(dsn, settings["prefix"])
    with fleet(3, settings) as replicas:
        traffic, took = _stop_the_last_replica(replicas, storage, signal.SIGKILL)
        stats = [r.ask(op="stats")["coordinator"] for r in replicas[:2]]
    assert took is not None, "the survivors did not store the killed replica's captures"
    assert sum(s["taken_over"] for s in stats) == traffic.threads
    found = stored_markers(storage, traffic.users())
    assert sorted(found) == traffic.markers() and set(found.values()) == {1}
    storage.close()


def test_a_paused_replica_that_comes_back_stores_nothing_twice(dsn: str) -> None:
    settings = _settings(dsn)
    storage = open_memory(dsn, settings["prefix"])
    with fleet(3, settings) as replicas:
        traffic, took = _stop_the_last_replica(replicas, storage, signal.SIGSTOP)
        replicas[2].signal(signal.SIGCONT)  # its timers fire now, long overdue
        time.sleep(DEBOUNCE + LEASE)
        assert wait_until(everything_stored(storage, traffic, replicas), 30) is not None
        back = replicas[2].ask(op="stats")
    assert took is not None, "the others did not store the paused replica's captures"
    assert back["calls"] == 0  # its captures were stored: not even a model call
    found = stored_markers(storage, traffic.users())
    assert sorted(found) == traffic.markers() and set(found.values()) == {1}
    storage.close()


def test_a_replica_paused_in_the_middle_of_its_extractions_stores_nothing_twice(
    dsn: str,
) -> None:
    """Its claims expire, the others run the threads; when it comes back its model calls
    return and its saves find the turns stored (the watermark): nothing applied twice."""
    settings = _settings(dsn, slow=2.0)
    storage = open_memory(dsn, settings["prefix"])
    with fleet(3, settings) as replicas:
        traffic = Traffic(threads=4, turns=3)
        victim = replicas[2]
        traffic.play(replicas, _last_turn_on_replica_2)

        def victim_is_extracting() -> bool:
            return any(
                e.claim is not None and e.claim.pid == victim.pid
                for e in storage.journal().entries()
            )

        assert wait_until(victim_is_extracting, 30, step=0.02) is not None
        victim.signal(signal.SIGSTOP)
        took = wait_until(everything_stored(storage, traffic, replicas[:2]), 60)
        victim.signal(signal.SIGCONT)
        assert wait_until(everything_stored(storage, traffic, replicas), 60) is not None
        calls = [r.ask(op="stats")["calls"] for r in replicas]
    assert took is not None
    assert calls[2] >= 1  # it was caught calling the model
    found = stored_markers(storage, traffic.users())
    assert sorted(found) == traffic.markers() and set(found.values()) == {1}
    storage.close()

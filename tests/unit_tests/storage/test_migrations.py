"""Store setup serialised across processes (``storage/migrations.py``): what is retried, what is
not, and the SQLite lock beside the database. The real races (three processes at the same
moment on a fresh PostgreSQL database or SQLite file, 20 times) are in
``tests/integration_tests/test_replicas.py``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore

from deermem_middleware.storage import migrations
from deermem_middleware.storage.migrations import serialised_setup


class Flaky:
    """A setup that fails with ``errors`` first, then succeeds."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migrations.time, "sleep", lambda seconds: None)


def test_a_setup_that_lost_a_race_runs_again_and_other_errors_are_raised() -> None:
    from psycopg import errors

    setup = Flaky(errors.UniqueViolation("duplicate key"), errors.DeadlockDetected("deadlock"))
    migrations._retrying(setup, migrations._postgres_race)
    assert setup.calls == 3
    broken = Flaky(errors.UndefinedTable("no such table"))
    with pytest.raises(errors.UndefinedTable):
        migrations._retrying(broken, migrations._postgres_race)
    assert broken.calls == 1
    endless = Flaky(*[errors.UniqueViolation("again")] * 10)
    with pytest.raises(errors.UniqueViolation):
        migrations._retrying(endless, migrations._postgres_race)
    assert endless.calls == migrations.RACE_RETRIES + 1


def test_sqlite_setup_takes_the_lock_beside_the_database_and_reruns_after_a_race(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    real = store.setup
    failures = [sqlite3.IntegrityError("UNIQUE constraint failed: store_migrations.v")]

    def racing() -> None:
        if failures:
            store.is_setup = True  # the store marks itself set up before failing half-way
            raise failures.pop()
        real()

    serialised_setup(store, racing)
    assert (tmp_path / "memory.db.setup-lock").exists()
    versions = [row[0] for row in conn.execute("SELECT v FROM store_migrations")]
    assert versions == list(range(len(SqliteStore.MIGRATIONS)))
    conn.close()


def test_other_stores_are_set_up_as_they_are() -> None:
    setup = Flaky()
    serialised_setup(object(), setup)
    assert setup.calls == 1


def test_a_database_in_memory_has_no_file_to_lock() -> None:
    store: Any = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False))
    serialised_setup(store, store.setup)
    assert store.is_setup

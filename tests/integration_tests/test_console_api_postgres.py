"""The console's REST API over PostgreSQL (LangGraph's ``PostgresStore``): the same cases as over
JSON files (:mod:`tests.console_api_cases`), each test in a namespace of its own.

Needs a server: ``eval "$(.ci/postgres.sh start)"`` sets ``DEERMEM_TEST_DSN``. Without it these
tests skip with the reason — unless ``DEERMEM_REQUIRE_POSTGRES=1`` (CI), which fails them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.console_api_cases")  # its asserts explain failures too

from deermem_middleware.console.audit import AUDIT_SCOPE, RESERVED_USER  # noqa: E402
from deermem_middleware.storage import StoreStorage  # noqa: E402
from tests.console_api_cases import Api, ConsoleApiCases, ConsoleEnv, ok  # noqa: E402
from tests.helpers import postgres_store as open_postgres_store  # noqa: E402

from .conftest import postgres_dsn  # noqa: E402


@pytest.fixture(scope="module")
def postgres_store() -> Iterator[Any]:
    with open_postgres_store(postgres_dsn()) as store:
        yield store


@pytest.fixture
def console_storage(postgres_store: Any) -> StoreStorage:
    """A namespace per test: tests see only their own users."""
    return StoreStorage(postgres_store, prefix=f"console{uuid.uuid4().hex[:12]}")


class TestConsoleApiOnPostgres(ConsoleApiCases):
    def test_documents_and_the_audit_log_are_rows_of_the_store(
        self, console: ConsoleEnv, api: Api, console_storage: StoreStorage, postgres_store: Any
    ) -> None:
        console.seed_alice()
        ok(api.post("/api/facts", json={"user": "alice", "content": "Plays chess"}), 201)
        items = postgres_store.search((console_storage.prefix,), limit=1000)
        held = {
            (tuple(i.namespace), i.key): json.dumps(i.value, ensure_ascii=False) for i in items
        }  # a document item, and beside it its derived data
        alice = console_storage.namespace(console.scope("alice"))
        audit = console_storage.namespace(AUDIT_SCOPE)
        assert "Plays chess" in held[tuple(alice), "document"]
        assert (tuple(alice), "derived") in held
        assert RESERVED_USER in audit and "fact.add" in held[tuple(audit), "document"]
        # another engine on the same database sees what the console wrote
        other = StoreStorage(postgres_store, prefix=console_storage.prefix)
        contents = [f.content for f in other.load(console.scope("alice")).memory.facts]
        assert "Plays chess" in contents

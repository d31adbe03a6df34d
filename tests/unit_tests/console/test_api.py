"""The console's REST API over JSON files (the shared cases in :mod:`tests.console_api_cases`),
and what no backend changes: login links, sessions and their clock.

The same cases run over PostgreSQL in ``tests/integration_tests/test_console_api_postgres.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.console_api_cases")  # its asserts explain failures too

from deermem_middleware.config import MemoryConfig  # noqa: E402
from deermem_middleware.console.auth import (  # noqa: E402
    LINK_TTL_SECONDS,
    SESSION_TTL_SECONDS,
    Operator,
)
from deermem_middleware.runtime.service import MemoryService  # noqa: E402
from tests.console_api_cases import (  # noqa: E402
    EDIT,
    Api,
    Clock,
    ConsoleApiCases,
    assert_error,
    console_app_with_clock,
    ok,
)


@pytest.fixture
def console_storage() -> Any:
    """None: the engine opens its JSON files under the test's temp folder."""
    return None


class TestConsoleApiOnFiles(ConsoleApiCases):
    def test_the_documents_are_json_files_in_the_storage_folder(
        self, console: Any, api: Api, tmp_path: Path
    ) -> None:
        console.seed_alice()
        ok(api.post("/api/facts", json={"user": "alice", "content": "Plays chess"}), 201)
        files = sorted(
            p.relative_to(tmp_path / "memory").as_posix()
            for p in (tmp_path / "memory").rglob("*.json")
        )
        assert "users/alice/__default__.json" in files
        assert any("__deermem_console__" in f for f in files), files  # the audit log


# -- login links and sessions (the clock moved by hand) -------------------------------------------


@pytest.fixture
def clocked(tmp_path: Path) -> Any:
    service = MemoryService(
        MemoryConfig(storage_path=str(tmp_path / "memory"), enabled=False, embeddings="none")
    )
    clock = Clock()
    app, auth = console_app_with_clock(service, clock)
    seen: list[tuple[str, str, int]] = []
    yield app, auth, clock, seen
    service.close()
    assert not [s for s in seen if s[2] >= 500], seen


def test_a_login_link_opens_one_session_once(clocked: Any) -> None:
    app, auth, _clock, seen = clocked
    secret = auth.issue_link(Operator("sam", "edit"))
    browser = Api(app, seen, token=None)
    first = browser.get("/login", params={"token": secret})
    assert first.status_code == 303 and first.headers["location"] == "./"
    assert "deermem_console=" in first.headers["set-cookie"]
    session = ok(browser.get("/api/session"))
    assert (session["operator"], session["role"]) == ("sam", "edit") and session["csrf"]
    again = Api(app, seen, token=None).get("/login", params={"token": secret})
    assert again.status_code == 401 and "already used or has expired" in again.text
    assert "set-cookie" not in again.headers
    assert Api(app, seen, token=None).get("/login", params={"token": "made-up"}).status_code == 401
    assert Api(app, seen, token=None).get("/login").status_code == 401


def test_a_login_link_expires(clocked: Any) -> None:
    app, auth, clock, seen = clocked
    fresh = auth.issue_link(Operator("sam", "read"))
    stale = auth.issue_link(Operator("sam", "read"))
    clock.advance(LINK_TTL_SECONDS - 1)
    assert Api(app, seen, token=None).get("/login", params={"token": fresh}).status_code == 303
    clock.advance(2)
    browser = Api(app, seen, token=None)
    assert browser.get("/login", params={"token": stale}).status_code == 401
    assert_error(browser.get("/api/session"), 401)


def test_a_session_ends_after_its_idle_time_and_each_use_extends_it(clocked: Any) -> None:
    app, _auth, clock, seen = clocked
    browser = Api(app, seen, token=None)
    assert browser.post("/login", data={"token": EDIT}).status_code == 303
    for _ in range(3):  # used within its lifetime: stays alive past the first deadline
        clock.advance(SESSION_TTL_SECONDS - 60)
        assert ok(browser.get("/api/session"))["operator"] == "erin"
    clock.advance(SESSION_TTL_SECONDS + 1)
    assert_error(browser.get("/api/session"), 401, says="not logged in")
    assert browser.get("/").text.count("<form") == 1  # the login page again
    # the bearer token does not expire
    assert ok(Api(app, seen).get("/api/session"))["operator"] == "erin"


def test_the_login_form_refuses_unknown_tokens_and_large_forms(clocked: Any) -> None:
    app, _auth, _clock, seen = clocked
    browser = Api(app, seen, token=None)
    refused = browser.post("/login", data={"token": "nope"})
    assert refused.status_code == 401 and "not known" in refused.text
    assert browser.post("/login", data={"token": "x" * 10_000}).status_code == 413
    assert_error(browser.get("/api/session"), 401)

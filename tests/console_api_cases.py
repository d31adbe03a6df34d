"""The memory console's REST API, route by route — one set of test bodies run over every backend.

:class:`ConsoleApiCases` holds the tests; a test module runs them over a backend by subclassing
it and defining a ``console_storage`` fixture: ``None`` for the JSON files under a temp folder
(``tests/unit_tests/console/test_api.py``), a :class:`StoreStorage` over PostgreSQL
(``tests/integration_tests/test_console_api_postgres.py``).

Every request goes through :class:`Api`, which fails the test on any 5xx answer; the ``console``
fixture checks again at teardown that no client it handed out ever got one. An error answer is
checked for its JSON shape (``{"error", "field"}``), its status, the field and a word of its
message (:func:`assert_error`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage
from starlette.applications import Starlette
from starlette.routing import Mount

from deermem_middleware.config import MemoryConfig
from deermem_middleware.console import (
    Console,
    ConsoleAuth,
    Operator,
    console_router,
    create_console_app,
)
from deermem_middleware.console.audit import AUDIT_KEY, AUDIT_SCOPE, RESERVED_USER
from deermem_middleware.console.views import fact_version
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage.base import MemoryScope

# -- credentials ----------------------------------------------------------------------------------

EDIT = "tok-edit"
"""Erin: edit role, every user."""
READ = "tok-read"
"""Rudy: read role, every user."""
ALICE_ONLY = "tok-alice"
"""Ada: edit role, scoped to the user ``alice``."""
NOBODY = "tok-unknown"

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
NOW_TEXT = "2026-06-01T12:00:00Z"
DEFAULT_AGENT = "__default__"
DEERFLOW_V1 = (
    Path(__file__).parent / "fixtures" / "deerflow_memory" / "v1-locations" / "users" / "bob"
) / "memory.json"


def standard_auth(**kwargs: Any) -> ConsoleAuth:
    auth = ConsoleAuth(**kwargs)
    auth.add_token(Operator("erin", "edit"), EDIT)
    auth.add_token(Operator("rudy", "read"), READ)
    auth.add_token(Operator("ada", "edit", frozenset({"alice"})), ALICE_ONLY)
    return auth


# -- the client -----------------------------------------------------------------------------------

_DEFAULT = object()


class Api:
    """A test client that sends a bearer token (``token=None``: none, cookies only) and fails
    on any 5xx answer, noting every answer in ``seen``."""

    def __init__(
        self,
        app: Any,
        seen: list[tuple[str, str, int]],
        token: str | None = EDIT,
        base_url: str = "http://testserver",
    ) -> None:
        self.client = TestClient(app, raise_server_exceptions=False, base_url=base_url)
        self.seen = seen
        self.token = token

    def request(
        self, method: str, url: str, *, token: Any = _DEFAULT, **kwargs: Any
    ) -> httpx.Response:
        token = self.token if token is _DEFAULT else token
        headers = dict(kwargs.pop("headers", None) or {})
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        kwargs.setdefault("follow_redirects", False)
        response = self.client.request(method, url, headers=headers, **kwargs)
        self.seen.append((method, url, response.status_code))
        assert response.status_code < 500, (
            f"{method} {url} answered {response.status_code}: {response.text[:2000]}"
        )
        return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    @property
    def cookies(self) -> httpx.Cookies:
        return self.client.cookies


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.text[:2000]}"
    return response.json()


_ANY_FIELD = object()


def assert_error(
    response: httpx.Response, status: int, field: Any = _ANY_FIELD, says: str | None = None
) -> dict[str, Any]:
    """``response`` is a JSON error with this status (and field, and words in its message)."""
    assert response.status_code == status, f"{response.status_code}: {response.text[:2000]}"
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert {"error", "field"} <= set(body), body
    assert isinstance(body["error"], str) and body["error"].strip(), body
    if field is not _ANY_FIELD:
        assert body["field"] == field, body
    if says is not None:
        assert says.casefold() in body["error"].casefold(), body
    return body


# -- documents ------------------------------------------------------------------------------------


def fact(fact_id: str, content: str, **more: Any) -> Fact:
    values: dict[str, Any] = {
        "category": "context",
        "confidence": 0.8,
        "createdAt": "2026-05-01T00:00:00Z",
    }
    values.update(more)
    return Fact(id=fact_id, content=content, **values)


def alice_facts() -> list[Fact]:
    """Five facts: three active, one superseded, one archived; distinct dates and scores."""
    return [
        fact(
            "f_tea",
            "Drinks green tea every morning",
            category="preference",
            confidence=0.9,
            createdAt="2026-05-20T00:00:00Z",
            injections=3,
            lastInjectedAt="2026-05-30T00:00:00Z",
        ),
        fact(
            "f_go",
            "Writes Go services at work",
            category="knowledge",
            confidence=0.7,
            createdAt="2026-04-01T00:00:00Z",
        ),
        fact(
            "f_lis",
            "Lives in Lisbon",
            confidence=0.8,
            createdAt="2026-03-01T00:00:00Z",
            confirmations=2,
            lastConfirmedAt="2026-05-01T00:00:00Z",
        ),
        fact(
            "f_arch",
            "Was training for a marathon",
            category="goal",
            confidence=0.5,
            createdAt="2026-02-01T00:00:00Z",
            status="archived",
        ),
        fact(
            "f_old",
            "Lives in Berlin",
            confidence=0.6,
            createdAt="2026-01-01T00:00:00Z",
            status="superseded",
            supersededBy="f_lis",
        ),
    ]


def document(facts: list[Fact], work: str = "") -> Memory:
    data: dict[str, Any] = {"facts": [f.model_dump(mode="json") for f in facts]}
    if work:
        data["user"] = {"workContext": {"summary": work, "updatedAt": "2026-05-01T00:00:00Z"}}
    return Memory.from_json_dict(data)


# -- the console under test -----------------------------------------------------------------------


@dataclass
class ConsoleEnv:
    """One engine over the backend under test, an app over it, and helpers to set it up."""

    service: MemoryService
    app: FastAPI
    seen: list[tuple[str, str, int]] = field(default_factory=list)

    def api(self, token: str | None = EDIT, app: Any = None) -> Api:
        return Api(self.app if app is None else app, self.seen, token)

    def make_app(self, **options: Any) -> FastAPI:
        """Another console app over the same engine (its own credentials and limits)."""
        options.setdefault("auth", standard_auth())
        app = create_console_app(self.service, **options)
        app.state.console.clock = lambda: NOW
        return app

    def scope(self, user: str, agent: str | None = None) -> MemoryScope:
        return self.service.scope(user, agent)

    def seed(self, user: str, facts: list[Fact], agent: str | None = None, work: str = "") -> int:
        """Store this document for ``user`` (as an agent's update would); its revision."""
        doc = document(facts, work)
        return self.service.change(self.scope(user, agent), lambda _m: doc)[2]

    def seed_alice(self) -> None:
        self.seed("alice", alice_facts(), work="Backend engineer at a fintech")

    def agent_change(
        self, user: str, fact_id: str, agent: str | None = None, **update: Any
    ) -> None:
        """Change one fact's stored fields the way an agent's update does (not manual)."""

        def change(doc: Memory) -> Memory:
            facts = tuple(f.model_copy(update=update) if f.id == fact_id else f for f in doc.facts)
            return doc.model_copy(update={"facts": facts})

        self.service.change(self.scope(user, agent), change)

    def stored(self, user: str, agent: str | None = None) -> Memory:
        return self.service.load(self.scope(user, agent)).memory

    def stored_facts(self, user: str, agent: str | None = None) -> dict[str, Fact]:
        return {f.id: f for f in self.stored(user, agent).facts}

    def revision(self, user: str, agent: str | None = None) -> int:
        return self.service.load(self.scope(user, agent)).revision

    def audit_raw(self) -> list[dict[str, Any]]:
        stored = self.service.load(AUDIT_SCOPE).memory
        return list((stored.model_extra or {}).get(AUDIT_KEY) or [])

    def version(self, user: str, fact_id: str, agent: str | None = None) -> str:
        return fact_version(self.stored_facts(user, agent)[fact_id])


def _routes(console: Console) -> set[tuple[str, str]]:
    out = set()
    for route in console_router(console).routes:
        assert isinstance(route, APIRoute), route
        out.update((m, route.path_format) for m in route.methods)
    return out


def route_calls() -> list[tuple[str, str, dict[str, Any]]]:
    """One valid call of every API route (alice's data; f_tea's real version is filled in)."""
    return [
        ("GET", "/api/session", {}),
        ("GET", "/api/users", {}),
        ("GET", "/api/agents", {}),
        ("GET", "/api/memory", {"params": {"user": "alice"}}),
        ("GET", "/api/facts", {"params": {"user": "alice"}}),
        ("GET", "/api/search", {"params": {"user": "alice", "q": "tea"}}),
        ("POST", "/api/explain", {"json": {"user": "alice", "message": "tea?"}}),
        ("POST", "/api/facts", {"json": {"user": "alice", "content": "Plays chess"}}),
        (
            "PATCH",
            "/api/facts/f_tea",
            {"json": {"user": "alice", "version": "VERSION", "content": "Drinks black tea"}},
        ),
        ("DELETE", "/api/facts/f_tea", {"params": {"user": "alice", "version": "VERSION"}}),
        ("POST", "/api/forget", {"json": {"user": "alice", "confirm": "alice"}}),
        (
            "POST",
            "/api/import",
            {"json": {"user": "alice", "document": {"facts": []}, "replace": True}},
        ),
        ("GET", "/api/export", {"params": {"user": "alice"}}),
        ("GET", "/api/stats", {}),
        ("GET", "/api/ledger", {}),
        ("GET", "/api/audit", {}),
        ("GET", "/api/openapi.json", {}),
    ]


WRITES = {
    ("POST", "/api/facts"),
    ("PATCH", "/api/facts/f_tea"),
    ("DELETE", "/api/facts/f_tea"),
    ("POST", "/api/forget"),
    ("POST", "/api/import"),
}
USER_ROUTES = [c for c in route_calls() if "user" in (c[2].get("params") or c[2].get("json") or {})]


def _with_version(kwargs: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(kwargs)
    for key in ("params", "json"):
        if key in out and out[key].get("version") == "VERSION":
            out[key]["version"] = version
    return out


def _as_user(kwargs: dict[str, Any], user: str) -> dict[str, Any]:
    out = copy.deepcopy(kwargs)
    for key in ("params", "json"):
        if key in out and "user" in out[key]:
            out[key]["user"] = user
            if "confirm" in out[key]:
                out[key]["confirm"] = user
    return out


def import_available() -> bool:
    try:
        import deermem_middleware.formats.importing  # noqa: F401
    except ImportError:
        return False
    return True


# -- the tests ------------------------------------------------------------------------------------


class ConsoleApiCases:
    """Every route of the console API: success, and every bad input a 4xx, never a 500."""

    @pytest.fixture
    def console(self, console_storage: Any, tmp_path: Path) -> Iterator[ConsoleEnv]:
        config = MemoryConfig(
            storage_path=str(tmp_path / "memory"), enabled=False, embeddings="none"
        )
        service = MemoryService(config, storage=console_storage)
        env = ConsoleEnv(service, create_console_app(service, auth=standard_auth()))
        env.app.state.console.clock = lambda: NOW
        yield env
        service.close()
        errors = [s for s in env.seen if s[2] >= 500]
        assert not errors, f"the server answered 5xx: {errors}"

    @pytest.fixture
    def api(self, console: ConsoleEnv) -> Api:
        return console.api()

    # -- who --------------------------------------------------------------------------------

    def test_session_names_the_caller(self, console: ConsoleEnv, api: Api) -> None:
        assert ok(api.get("/api/session")) == {
            "operator": "erin",
            "role": "edit",
            "users": None,
            "csrf": None,
            "agent": DEFAULT_AGENT,
        }
        scoped = ok(api.get("/api/session", token=ALICE_ONLY))
        assert (scoped["operator"], scoped["role"], scoped["users"]) == ("ada", "edit", ["alice"])
        assert ok(api.get("/api/session", token=READ))["role"] == "read"

    def test_the_route_table_covers_every_api_route(self, console: ConsoleEnv) -> None:
        listed = {(m, p.replace("f_tea", "{fact_id}")) for m, p, _ in route_calls()}
        assert listed == _routes(console.app.state.console)

    def test_every_route_refuses_a_missing_or_wrong_credential(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        wrong: list[dict[str, str]] = [
            {},
            {"Authorization": f"Bearer {NOBODY}"},
            {"Authorization": "Bearer "},
            {"Authorization": f"Basic {EDIT}"},
            {"Authorization": EDIT},
        ]
        for method, path, kwargs in route_calls():
            for headers in wrong:
                response = api.request(method, path, token=None, headers=headers, **kwargs)
                assert_error(response, 401, says="not logged in")
        assert console.stored_facts("alice").keys() == {f.id for f in alice_facts()}
        assert console.audit_raw() == []

    def test_a_read_token_reads_but_every_write_route_is_refused(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        version = console.version("alice", "f_tea")
        revision = console.revision("alice")
        for method, path, kwargs in route_calls():
            if (method, path) in WRITES:
                response = api.request(method, path, token=READ, **_with_version(kwargs, version))
                assert_error(response, 403, says="read role")
        assert console.revision("alice") == revision
        assert console.stored_facts("alice").keys() == {f.id for f in alice_facts()}
        assert console.audit_raw() == []
        assert ok(api.get("/api/facts", token=READ, params={"user": "alice"}))["total"] == 5
        assert ok(api.get("/api/memory", token=READ, params={"user": "alice"}))["user"] == "alice"
        assert len(ok(api.get("/api/export", token=READ, params={"user": "alice"}))["facts"]) == 5

    def test_a_scoped_operator_neither_sees_nor_touches_other_users(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        console.seed("bob", [fact("b1", "Bob rides a bike")])
        console.seed("bob", [fact("b2", "Bob plans trips")], agent="planner")
        console.seed("alicia", [fact("c1", "Alicia paints")])  # a prefix of alice is not alice
        ok(
            api.patch(
                "/api/facts/b1",
                json={
                    "user": "bob",
                    "version": console.version("bob", "b1"),
                    "content": "Bob rides a red bike",
                },
            )
        )
        console.service.memory_block([HumanMessage("bike?")], "bob")
        console.service.memory_block([HumanMessage("tea?")], "alice")
        revision = console.revision("bob")
        for method, path, kwargs in USER_ROUTES:
            bob = _as_user(_with_version(kwargs, console.version("bob", "b1")), "bob")
            if method == "PATCH" or method == "DELETE":
                path = path.replace("f_tea", "b1")
            response = api.request(method, path, token=ALICE_ONLY, **bob)
            assert_error(response, 403, "user", says="may not see user 'bob'")
        assert_error(api.get("/api/audit", token=ALICE_ONLY, params={"user": "bob"}), 403, "user")
        assert console.revision("bob") == revision
        users = ok(api.get("/api/users", token=ALICE_ONLY))
        assert users["users"] == [{"user": "alice", "agents": [DEFAULT_AGENT]}]
        assert users["total"] == 1
        agents = ok(api.get("/api/agents", token=ALICE_ONLY))
        assert agents["agents"] == [{"agent": DEFAULT_AGENT, "users": 1}]
        audit = ok(api.get("/api/audit", token=ALICE_ONLY))
        assert audit["total"] == 0 and audit["entries"] == []
        assert ok(api.get("/api/audit"))["total"] == 1  # erin sees bob's edit
        ledger = ok(api.get("/api/ledger", token=ALICE_ONLY))["records"]
        assert [r["user"] for r in ledger] == ["alice"]
        assert {r["user"] for r in ok(api.get("/api/ledger"))["records"]} == {"alice", "bob"}
        if import_available():
            stats = ok(api.get("/api/stats", token=ALICE_ONLY))
            assert stats["users"] == 1
            assert stats["documents"] == 1
            assert "bob" not in json.dumps(stats)
            assert (
                ok(api.get("/api/stats", token=ALICE_ONLY, params={"user": "bob"}))["scopes"] == []
            )
        # and alice, whom ada may see, works
        assert ok(api.get("/api/facts", token=ALICE_ONLY, params={"user": "alice"}))["total"] == 5

    def test_a_cookie_session_must_send_its_csrf_token_with_changes(
        self, console: ConsoleEnv
    ) -> None:
        console.seed_alice()
        browser = console.api(token=None)
        assert browser.post("/login", data={"token": NOBODY}).status_code == 401
        assert_error(browser.get("/api/session"), 401)
        login = browser.post("/login", data={"token": EDIT})
        assert login.status_code == 303, login.text
        assert "httponly" in login.headers["set-cookie"].lower()
        assert "samesite=strict" in login.headers["set-cookie"].lower()
        session = ok(browser.get("/api/session"))
        csrf = session["csrf"]
        assert session["operator"] == "erin" and isinstance(csrf, str) and len(csrf) >= 20
        body = {"user": "alice", "content": "Plays chess on Sundays"}
        assert_error(browser.post("/api/facts", json=body), 403, says="X-CSRF-Token")
        bad = {"X-CSRF-Token": csrf[:-1] + ("A" if csrf[-1] != "A" else "B")}
        assert_error(browser.post("/api/facts", json=body, headers=bad), 403, says="X-CSRF-Token")
        version = console.version("alice", "f_go")
        assert_error(
            browser.delete("/api/facts/f_go", params={"user": "alice", "version": version}), 403
        )
        assert "Plays chess on Sundays" not in [f.content for f in console.stored("alice").facts]
        assert "f_go" in console.stored_facts("alice")
        good = {"X-CSRF-Token": csrf}
        added = ok(browser.post("/api/facts", json=body, headers=good), 201)
        assert added["fact"]["content"] == "Plays chess on Sundays"
        ok(
            browser.delete(
                "/api/facts/f_go", params={"user": "alice", "version": version}, headers=good
            )
        )
        assert "f_go" not in console.stored_facts("alice")
        assert (
            ok(browser.get("/api/facts", params={"user": "alice"}))["total"] == 5
        )  # GET: no token
        # the logout needs it too, and ends the session
        assert browser.post("/logout").status_code == 403
        assert browser.post("/logout", headers=good).status_code == 204
        assert_error(browser.get("/api/session"), 401)

    # -- listing ----------------------------------------------------------------------------

    def test_users_are_paged_searchable_and_list_their_agents(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        console.seed("alice", [fact("p1", "Plans a trip")], agent="planner")
        console.seed("bob", [fact("b1", "Rides a bike")])
        console.seed("bobby", [fact("y1", "Likes kites")])
        ok(api.post("/api/facts", json={"user": "bob", "content": "Has a dog"}), 201)  # audit
        assert RESERVED_USER in {s.user_id for s in console.service.list_scopes()}
        users = ok(api.get("/api/users"))
        assert users == {
            "total": 3,
            "offset": 0,
            "limit": 50,
            "users": [
                {"user": "alice", "agents": [DEFAULT_AGENT, "planner"]},
                {"user": "bob", "agents": [DEFAULT_AGENT]},
                {"user": "bobby", "agents": [DEFAULT_AGENT]},
            ],
        }
        found = ok(api.get("/api/users", params={"q": "BOB"}))
        assert [u["user"] for u in found["users"]] == ["bob", "bobby"] and found["total"] == 2
        second = ok(api.get("/api/users", params={"offset": 1, "limit": 1}))
        assert second["total"] == 3 and [u["user"] for u in second["users"]] == ["bob"]
        assert ok(api.get("/api/users", params={"offset": 5}))["users"] == []
        for bad in ({"limit": 0}, {"limit": -1}, {"limit": 501}, {"offset": -1}, {"limit": "x"}):
            key = next(iter(bad))
            assert_error(api.get("/api/users", params=bad), 422, key)

    def test_agents_count_their_users(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        console.seed("alice", [fact("p1", "Plans a trip")], agent="planner")
        console.seed("bob", [fact("b1", "Plans a hike")], agent="planner")
        ok(
            api.post(
                "/api/facts", json={"user": "bob", "agent": "planner", "content": "Has a dog"}
            ),
            201,
        )
        agents = ok(api.get("/api/agents"))
        assert agents["agents"] == [
            {"agent": DEFAULT_AGENT, "users": 1},
            {"agent": "planner", "users": 2},
        ]
        assert "audit" not in [a["agent"] for a in agents["agents"]]  # the reserved scope's
        assert ok(api.get("/api/agents", params={"q": "PLAN"}))["agents"] == [
            {"agent": "planner", "users": 2}
        ]
        assert_error(api.get("/api/agents", params={"limit": 0}), 422, "limit")

    def test_the_reserved_audit_user_is_never_listed_nor_served(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        ok(api.post("/api/facts", json={"user": "alice", "content": "Plays chess"}), 201)
        assert AUDIT_SCOPE in console.service.list_scopes()
        assert RESERVED_USER not in json.dumps(ok(api.get("/api/users")))
        assert ok(api.get("/api/users", params={"q": "deermem"}))["users"] == []
        for path in ("/api/memory", "/api/facts", "/api/export"):
            assert_error(api.get(path, params={"user": RESERVED_USER}), 400, "user", "reserved")
        body = {"user": RESERVED_USER, "content": "x"}
        assert_error(api.post("/api/facts", json=body), 400, "user", "reserved")
        forget = {"user": RESERVED_USER, "confirm": RESERVED_USER}
        assert_error(api.post("/api/forget", json=forget), 400, "user", "reserved")
        assert len(console.audit_raw()) == 1  # still there
        if import_available():
            assert RESERVED_USER not in json.dumps(ok(api.get("/api/stats")))

    # -- one user's memory ------------------------------------------------------------------

    def test_memory_shows_the_profile_revision_and_counts(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        revision = console.seed("alice", alice_facts(), work="Backend engineer at a fintech")
        console.agent_change("alice", "f_go", manual=True)
        memory = ok(api.get("/api/memory", params={"user": "alice"}))
        assert memory["user"] == "alice" and memory["agent"] == DEFAULT_AGENT
        assert memory["revision"] == revision + 1
        assert memory["profile"]["workContext"] == {
            "summary": "Backend engineer at a fintech",
            "updatedAt": "2026-05-01T00:00:00Z",
        }
        assert set(memory["profile"]) == {
            "workContext",
            "personalContext",
            "topOfMind",
            "recentMonths",
            "earlierContext",
            "longTermBackground",
        }
        assert memory["counts"] == {
            "facts": 5,
            "byStatus": {"active": 3, "archived": 1, "superseded": 1},
            "byCategory": {"context": 2, "goal": 1, "knowledge": 1, "preference": 1},
            "manual": 1,
        }
        assert memory["droppedFacts"] == 0

    def test_an_unknown_user_or_agent_is_a_404_on_every_read(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        for params in ({"user": "nobody"}, {"user": "alice", "agent": "nope"}):
            for path in ("/api/memory", "/api/facts", "/api/export"):
                assert_error(api.get(path, params=params), 404, "user", "no memory for user")
            search = {**params, "q": "tea"}
            assert_error(api.get("/api/search", params=search), 404, "user", "no memory")
            body = {"user": "nobody", "content": "x"}
            assert_error(api.post("/api/facts", json=body), 404, "user")
            edit = {"user": "nobody", "version": "v", "content": "x"}
            assert_error(api.patch("/api/facts/f_tea", json=edit), 404, "user")
            drop = {"user": "nobody", "version": "v"}
            assert_error(api.delete("/api/facts/f_tea", params=drop), 404, "user")
        assert_error(api.post("/api/explain", json={"user": "nobody", "message": "hi"}), 404)
        assert "nobody" not in {s.user_id for s in console.service.list_scopes()}
        assert_error(api.get("/api/memory"), 422, "user")  # no user at all
        assert_error(api.get("/api/memory", params={"user": ""}), 422, "user")

    def test_facts_are_filtered_sorted_and_paged(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()

        def ids(**params: Any) -> list[str]:
            return [
                f["id"]
                for f in ok(api.get("/api/facts", params={"user": "alice", **params}))["facts"]
            ]

        page = ok(api.get("/api/facts", params={"user": "alice"}))
        assert page["total"] == 5 and page["offset"] == 0 and page["limit"] == 50
        assert page["revision"] == console.revision("alice")
        assert page["categories"] == ["context", "goal", "knowledge", "preference"]
        assert page["statuses"] == ["all", "active", "superseded", "archived"]
        assert [f["id"] for f in page["facts"]] == ["f_tea", "f_go", "f_lis", "f_arch", "f_old"]
        tea = page["facts"][0]
        stored = console.stored_facts("alice")["f_tea"]
        assert tea["content"] == "Drinks green tea every morning"
        assert tea["category"] == "preference" and tea["confidence"] == 0.9
        assert tea["injections"] == 3 and tea["status"] == "active"
        assert tea["version"] == fact_version(stored)
        assert 0.0 < tea["score"] <= 0.9
        assert page["facts"][4]["supersededBy"] == "f_lis"
        assert ids(status="active") == ["f_tea", "f_go", "f_lis"]
        assert ids(status="superseded") == ["f_old"]
        assert ids(status="archived") == ["f_arch"]
        assert ids(category="context") == ["f_lis", "f_old"]
        assert ids(q="LISBON") == ["f_lis"]
        assert ids(q="lives in") == ["f_lis", "f_old"]
        assert ids(q="knowledge") == ["f_go"]  # the category
        assert ids(q="f_arch") == ["f_arch"]  # an id, exactly
        assert ids(q="lives", status="active") == ["f_lis"]
        assert ids(q="no such words") == []
        assert ids(sort="confidence") == ["f_tea", "f_lis", "f_go", "f_old", "f_arch"]
        assert ids(sort="injections")[0] == "f_tea"
        assert ids(sort="confirmations")[0] == "f_lis"
        assert ids(sort="created") == ["f_tea", "f_go", "f_lis", "f_arch", "f_old"]
        assert ids(offset=1, limit=2) == ["f_go", "f_lis"]
        paged = ok(api.get("/api/facts", params={"user": "alice", "offset": 4, "limit": 2}))
        assert paged["total"] == 5 and [f["id"] for f in paged["facts"]] == ["f_old"]
        other = {"user": "alice", "agent": "planner"}
        console.seed("alice", [fact("p1", "Plans a trip")], agent="planner")
        assert [f["id"] for f in ok(api.get("/api/facts", params=other))["facts"]] == ["p1"]

    def test_facts_refuse_bad_parameters(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        for params, where, says in (
            ({"status": "nope"}, "status", "active"),
            ({"sort": "bogus"}, "sort", "updated"),
            ({"limit": -1}, "limit", "greater than"),
            ({"limit": 0}, "limit", None),
            ({"limit": 501}, "limit", "less than"),
            ({"limit": "ten"}, "limit", "integer"),
            ({"offset": -1}, "offset", None),
            ({"q": "x" * 2001}, "q", None),
            ({"category": "c" * 201}, "category", None),
        ):
            assert_error(
                api.get("/api/facts", params={"user": "alice", **params}), 422, where, says
            )

    def test_nul_characters_and_lone_surrogates_in_ids_are_400(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        for path in ("/api/memory", "/api/facts", "/api/export"):
            assert_error(api.get(f"{path}?user=al%00ice"), 400, "user", "NUL")
            assert_error(api.get(f"{path}?user=alice&agent=a%00b"), 400, "user", "NUL")
        assert_error(api.get("/api/search?user=al%00ice&q=tea"), 400, "user", "NUL")
        # an URL cannot carry a lone surrogate: its bytes decode to U+FFFD, another (unknown) id
        assert_error(api.get("/api/facts?user=al%ED%A0%80ice"), 404, "user")
        json_headers = {"content-type": "application/json"}
        for raw in (b'"al\\u0000ice"', b'"al\\ud800ice"', b'"\\udfff"'):
            body = b'{"user": ' + raw + b', "content": "Plays chess"}'
            response = api.post("/api/facts", content=body, headers=json_headers)
            assert_error(response, 400, "user")
            forget = b'{"user": ' + raw + b', "confirm": ' + raw + b"}"
            assert_error(api.post("/api/forget", content=forget, headers=json_headers), 400)
        surrogate = b'{"user": "alice", "content": "tea \\ud83d time"}'
        assert_error(api.post("/api/facts", content=surrogate, headers=json_headers), 400)
        assert_error(
            api.patch("/api/facts/f%00x", json={"user": "alice", "version": "v", "content": "x"}),
            404,
            "id",
        )
        assert len(console.stored("alice").facts) == 5
        assert console.audit_raw() == []

    def test_search_ranks_facts_as_injection_does(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        found = ok(api.get("/api/search", params={"user": "alice", "q": "green tea please"}))
        assert found["user"] == "alice" and found["query"] == "green tea please"
        results = found["results"]
        assert results, found
        assert results[0]["rank"] == 1 and results[0]["fact"]["id"] == "f_tea"
        assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
        assert all(r["fact"]["status"] == "active" for r in results)
        scores = [r["score"] for r in results]
        assert scores == sorted(scores, reverse=True)
        assert {"relevance", "lexical", "semantic"} <= set(results[0])
        one = ok(api.get("/api/search", params={"user": "alice", "q": "tea", "limit": 1}))
        assert len(one["results"]) == 1
        assert_error(api.get("/api/search", params={"user": "alice"}), 422, "q")
        assert_error(api.get("/api/search", params={"user": "alice", "q": ""}), 422, "q")
        assert_error(
            api.get("/api/search", params={"user": "alice", "q": "t", "limit": 101}), 422, "limit"
        )

    def test_explain_tells_what_would_be_injected(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.injection.explain")
        console.seed_alice()
        report = ok(api.post("/api/explain", json={"user": "alice", "message": "More green tea?"}))
        assert (report["user"], report["agent"]) == ("alice", DEFAULT_AGENT)
        assert report["message"] == "More green tea?" and report["activeFacts"] == 3
        assert "Drinks green tea every morning" in report["block"]
        rows = {r["id"]: r for r in report["facts"]}
        assert rows["f_tea"]["inBlock"] is True and rows["f_tea"]["reason"].startswith("in the")
        others = {o["id"]: o for o in report["others"]}
        assert set(rows) | set(others) == {f.id for f in alice_facts()}
        assert "f_old" not in rows and others["f_old"]["reason"].startswith("status superseded")
        assert "Lives in Berlin" not in report["block"]
        assert_error(
            api.post("/api/explain", json={"user": "alice", "message": ""}), 422, "message"
        )
        too_long = {"user": "alice", "message": "x" * 8001}
        assert_error(api.post("/api/explain", json=too_long), 422, "message")
        assert_error(api.post("/api/explain", json={"user": "alice", "message": 5}), 422, "message")
        assert_error(api.post("/api/explain", json={"user": "alice"}), 422, "message")

    # -- changes ----------------------------------------------------------------------------

    def test_add_a_fact(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        before = console.revision("alice")
        body = {
            "user": "alice",
            "content": "  Plays   chess on Sundays ",
            "category": "hobby",
            "confidence": 0.95,
            "eventAt": "2026-05",
        }
        added = ok(api.post("/api/facts", json=body), 201)
        assert added["revision"] == before + 1 == console.revision("alice")
        new = added["fact"]
        assert new["content"] == "Plays chess on Sundays"
        assert (new["category"], new["confidence"], new["eventAt"]) == ("hobby", 0.95, "2026-05")
        assert new["manual"] is True and new["sourceKind"] == "stated"
        assert new["createdAt"] == NOW_TEXT and new["status"] == "active"
        stored = console.stored_facts("alice")[new["id"]]
        assert stored.content == "Plays chess on Sundays" and stored.manual
        assert new["version"] == fact_version(stored)
        assert len(console.stored("alice").facts) == 6
        entry = ok(api.get("/api/audit"))["entries"][0]
        assert (entry["action"], entry["factId"], entry["operator"]) == (
            "fact.add",
            new["id"],
            "erin",
        )
        assert entry["after"]["content"] == "Plays chess on Sundays" and entry["before"] is None
        defaults = ok(api.post("/api/facts", json={"user": "alice", "content": "Owns a kite"}), 201)
        # what a person types is what the user said: full confidence unless they give one
        assert (defaults["fact"]["category"], defaults["fact"]["confidence"]) == ("context", 1.0)

    def test_add_refuses_bad_facts(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        for body, status, where, says in (
            ({"content": 5}, 422, "content", "string"),
            ({"content": "x", "confidence": "high"}, 422, "confidence", "number"),
            ({"content": "x", "confidence": 1.5}, 422, "confidence", None),
            ({"content": "x", "confidence": True}, 422, "confidence", None),
            ({"content": "x", "category": 3}, 422, "category", None),
            ({"content": ""}, 422, "content", None),
            ({}, 422, "content", "required"),
            ({"content": "x", "colour": "red"}, 422, "colour", None),
            ({"content": "x" * 1601}, 422, "content", None),
            ({"content": "x" * 401}, 400, "content", "at most 400"),
            ({"content": "   \u200b  "}, 400, "content", "blank"),
            ({"content": "drinks GREEN tea   every morning"}, 409, "content", "equal fact"),
            ({"content": "x", "user": 7}, 422, "user", None),
            ({"content": "x", "user": ""}, 422, "user", None),
            ({"content": "x", "user": "   "}, 400, "user", None),
        ):
            response = api.post("/api/facts", json={"user": "alice", **body})
            err = assert_error(response, status, where, says)
            if status == 409:
                assert err["existing"] == "f_tea"
        for raw in (b"{bad", b'{"user": "alice", "content": "x",}', b"", b"\xff\xfe"):
            response = api.post(
                "/api/facts", content=raw, headers={"content-type": "application/json"}
            )
            assert response.status_code in (400, 422), response.text
            assert_error(response, response.status_code)
        assert_error(
            api.post("/api/facts", content=b"{bad", headers={"content-type": "application/json"}),
            400,
            "body",
            "not valid JSON",
        )
        assert_error(api.post("/api/facts", json=["alice", "x"]), 422)
        assert len(console.stored("alice").facts) == 5
        assert console.audit_raw() == []

    def test_edit_a_fact(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        version = console.version("alice", "f_go")
        body = {
            "user": "alice",
            "version": version,
            "content": "Writes Go and Rust services",
            "confidence": 0.85,
        }
        edited = ok(api.patch("/api/facts/f_go", json=body))
        new = edited["fact"]
        assert new["content"] == "Writes Go and Rust services" and new["confidence"] == 0.85
        assert new["category"] == "knowledge"  # kept
        assert new["manual"] is True and new["updatedAt"] == NOW_TEXT
        assert new["version"] != version and edited["revision"] == console.revision("alice")
        stored = console.stored_facts("alice")["f_go"]
        assert stored.content == "Writes Go and Rust services" and stored.manual
        entry = ok(api.get("/api/audit"))["entries"][0]
        assert entry["action"] == "fact.edit" and entry["factId"] == "f_go"
        assert entry["before"]["content"] == "Writes Go services at work"
        assert entry["after"]["content"] == "Writes Go and Rust services"
        # the old version is spent now
        again = {**body, "content": "Writes only Rust"}
        err = assert_error(api.patch("/api/facts/f_go", json=again), 409, "version", "changed")
        assert err["current"]["content"] == "Writes Go and Rust services"
        # clearing a date with an empty text
        dated = {"user": "alice", "version": new["version"], "eventAt": "2026-01"}
        new = ok(api.patch("/api/facts/f_go", json=dated))["fact"]
        assert new["eventAt"] == "2026-01"
        cleared = ok(
            api.patch(
                "/api/facts/f_go", json={"user": "alice", "version": new["version"], "eventAt": ""}
            )
        )
        assert cleared["fact"]["eventAt"] is None

    def test_edit_refuses_bad_input(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        version = console.version("alice", "f_go")
        base = {"user": "alice", "version": version}
        for body, status, where, says in (
            ({}, 400, None, "nothing to change"),
            ({"content": 5}, 422, "content", None),
            ({"confidence": "high"}, 422, "confidence", None),
            ({"confidence": -0.1}, 422, "confidence", None),
            ({"version": None, "content": "x"}, 422, "version", None),
            ({"version": "", "content": "x"}, 422, "version", None),
            ({"content": "Lives in Lisbon"}, 409, "content", "equal fact"),
            ({"content": "x", "status": "archived"}, 422, "status", None),
        ):
            response = api.patch("/api/facts/f_go", json={**base, **body})
            assert_error(response, status, where, says)
        assert_error(
            api.patch("/api/facts/f_go", json={"user": "alice", "content": "x"}), 422, "version"
        )
        missing = {**base, "content": "Something"}
        assert_error(api.patch("/api/facts/f_nope", json=missing), 404, "id", "no fact 'f_nope'")
        assert_error(
            api.patch(
                "/api/facts/f_go", content=b"{", headers={"content-type": "application/json"}
            ),
            400,
            "body",
        )
        assert console.stored_facts("alice")["f_go"].content == "Writes Go services at work"
        assert console.audit_raw() == []

    def test_delete_a_fact(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        version = console.version("alice", "f_arch")
        assert_error(api.delete("/api/facts/f_arch", params={"user": "alice"}), 422, "version")
        assert_error(
            api.delete("/api/facts/f_x", params={"user": "alice", "version": version}), 404, "id"
        )
        assert_error(
            api.delete("/api/facts/f_arch", params={"user": "alice", "version": "0" * 16}),
            409,
            "version",
        )
        removed = ok(api.delete("/api/facts/f_arch", params={"user": "alice", "version": version}))
        assert removed["removed"]["id"] == "f_arch"
        assert removed["removed"]["content"] == "Was training for a marathon"
        assert removed["revision"] == console.revision("alice")
        assert set(console.stored_facts("alice")) == {"f_tea", "f_go", "f_lis", "f_old"}
        entry = ok(api.get("/api/audit"))["entries"][0]
        assert (entry["action"], entry["factId"]) == ("fact.delete", "f_arch")
        assert entry["before"]["content"] == "Was training for a marathon"
        assert entry["after"] is None
        gone = {"user": "alice", "version": version}
        assert_error(api.delete("/api/facts/f_arch", params=gone), 404, "id")

    def test_an_agents_change_since_loading_is_a_409_and_nothing_is_overwritten(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        loaded = ok(api.get("/api/facts", params={"user": "alice"}))
        tea = next(f for f in loaded["facts"] if f["id"] == "f_tea")
        # an agent's update rewrites the fact in the meantime
        console.agent_change("alice", "f_tea", content="Drinks oolong tea every morning")
        revision = console.revision("alice")
        body = {"user": "alice", "version": tea["version"], "content": "Drinks matcha"}
        err = assert_error(
            api.patch("/api/facts/f_tea", json=body), 409, "version", "nothing was saved"
        )
        assert err["current"]["content"] == "Drinks oolong tea every morning"
        assert err["current"]["version"] == console.version("alice", "f_tea") != tea["version"]
        drop = {"user": "alice", "version": tea["version"]}
        err = assert_error(api.delete("/api/facts/f_tea", params=drop), 409, "version")
        assert err["current"]["id"] == "f_tea"
        assert console.revision("alice") == revision
        assert console.stored_facts("alice")["f_tea"].content == "Drinks oolong tea every morning"
        assert console.audit_raw() == []
        # a status change (the agent superseded it) is a change too
        go = console.version("alice", "f_go")
        console.agent_change("alice", "f_go", status="superseded", supersededBy="f_tea")
        err = assert_error(
            api.patch("/api/facts/f_go", json={"user": "alice", "version": go, "confidence": 0.1}),
            409,
        )
        assert err["current"]["status"] == "superseded"
        # with the current version the edit goes through
        current = console.version("alice", "f_tea")
        assert (
            ok(api.patch("/api/facts/f_tea", json={**body, "version": current}))["fact"]["content"]
            == "Drinks matcha"
        )

    def test_other_facts_changing_or_injection_counts_are_not_a_conflict(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        tea = console.version("alice", "f_tea")
        lis = console.version("alice", "f_lis")
        console.agent_change("alice", "f_go", content="Writes Go and Python at work")
        console.agent_change("alice", "f_tea", injections=9, lastInjectedAt="2026-06-01T00:00:00Z")
        console.agent_change(
            "alice", "f_lis", confirmations=5, lastConfirmedAt="2026-05-31T00:00:00Z"
        )
        assert console.version("alice", "f_tea") == tea
        body = {"user": "alice", "version": tea, "content": "Drinks matcha every morning"}
        edited = ok(api.patch("/api/facts/f_tea", json=body))["fact"]
        assert edited["content"] == "Drinks matcha every morning"
        stored = console.stored_facts("alice")
        assert stored["f_tea"].injections == 9  # the agent's count was kept, not overwritten
        assert stored["f_tea"].lastInjectedAt == "2026-06-01T00:00:00Z"
        assert stored["f_go"].content == "Writes Go and Python at work"
        ok(api.delete("/api/facts/f_lis", params={"user": "alice", "version": lis}))
        assert "f_lis" not in console.stored_facts("alice")

    # -- forget -----------------------------------------------------------------------------

    def test_forget_needs_the_user_id_typed_again(self, console: ConsoleEnv, api: Api) -> None:
        console.seed("bob", [fact("b1", "Bob rides a bike")])
        for confirm in ("Bob", "bob ", "", "bobby"):
            body = {"user": "bob", "confirm": confirm}
            assert_error(api.post("/api/forget", json=body), 400, "confirm", "type the user id")
        assert_error(api.post("/api/forget", json={"user": "bob"}), 422, "confirm")
        assert_error(api.post("/api/forget", json={"user": "bob", "confirm": 1}), 422, "confirm")
        assert "b1" in console.stored_facts("bob")
        assert_error(
            api.post("/api/forget", json={"user": "ghost", "confirm": "ghost"}), 404, "user"
        )
        body = {"user": "bob", "agent": "ghost", "confirm": "bob"}
        assert_error(api.post("/api/forget", json=body), 404, "user", "agent 'ghost'")
        assert "b1" in console.stored_facts("bob")

    def test_forget_erases_the_user_and_their_audit_texts_and_nobody_else(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed("bob", [fact("b1", "Bob rides a bike"), fact("b2", "Bob keeps bees")])
        console.seed("bob", [fact("b3", "Bob plans a hike")], agent="planner")
        console.seed("bobby", [fact("y1", "Bobby flies kites")])
        console.seed_alice()
        edit = {
            "user": "bob",
            "version": console.version("bob", "b1"),
            "content": "Bob rides a red bike",
        }
        ok(api.patch("/api/facts/b1", json=edit))
        edit = {
            "user": "bobby",
            "version": console.version("bobby", "y1"),
            "content": "Bobby flies red kites",
        }
        ok(api.patch("/api/facts/y1", json=edit))
        ok(
            api.post(
                "/api/facts",
                json={"user": "bob", "agent": "planner", "content": "Bob hikes in May"},
            ),
            201,
        )
        forgotten = ok(api.post("/api/forget", json={"user": "bob", "confirm": "bob"}))
        assert forgotten["user"] == "bob" and forgotten["agent"] is None
        receipt = forgotten["receipt"]
        assert isinstance(receipt, list) and len(receipt) >= 3
        assert any("audit log" in line and "2" in line for line in receipt), receipt
        # bob is gone, everywhere
        assert "bob" not in {s.user_id for s in console.service.list_scopes()}
        assert [u["user"] for u in ok(api.get("/api/users"))["users"]] == ["alice", "bobby"]
        assert_error(api.get("/api/memory", params={"user": "bob"}), 404)
        assert_error(api.get("/api/memory", params={"user": "bob", "agent": "planner"}), 404)
        # bobby (whose id starts with bob) and alice are untouched
        assert console.stored_facts("bobby")["y1"].content == "Bobby flies red kites"
        assert len(console.stored("alice").facts) == 5
        # the audit log keeps who did what, without bob's texts
        raw = json.dumps(console.audit_raw())
        for text in ("Bob rides", "Bob keeps", "Bob hikes", "red bike"):
            assert text not in raw, text
        assert "Bobby flies red kites" in raw
        entries = ok(api.get("/api/audit"))["entries"]
        assert [e["action"] for e in entries] == ["forget", "fact.add", "fact.edit", "fact.edit"]
        forget, added, bobby, bob = entries
        assert (forget["user"], forget["operator"], forget["role"]) == ("bob", "erin", "edit")
        assert forget["at"] == NOW_TEXT and "2 entry" in forget["detail"]
        assert "bike" not in forget["detail"]
        assert added["redacted"] is True and added["after"] is None and added["user"] == "bob"
        assert bob["redacted"] is True and bob["before"] is None and bob["factId"] == "b1"
        assert bobby["redacted"] is False and bobby["after"]["content"] == "Bobby flies red kites"
        assert ok(api.get("/api/audit", params={"user": "bob"}))["total"] == 3

    def test_forget_one_agent_keeps_the_others(self, console: ConsoleEnv, api: Api) -> None:
        console.seed("bob", [fact("b1", "Bob rides a bike")])
        console.seed("bob", [fact("b3", "Bob plans a hike")], agent="planner")
        body = {"user": "bob", "agent": "planner", "confirm": "bob"}
        forgotten = ok(api.post("/api/forget", json=body))
        assert forgotten["agent"] == "planner" and forgotten["receipt"]
        assert_error(api.get("/api/facts", params={"user": "bob", "agent": "planner"}), 404)
        assert [f["id"] for f in ok(api.get("/api/facts", params={"user": "bob"}))["facts"]] == [
            "b1"
        ]
        assert ok(api.get("/api/users"))["users"] == [{"user": "bob", "agents": [DEFAULT_AGENT]}]
        entry = ok(api.get("/api/audit"))["entries"][0]
        assert (entry["action"], entry["user"], entry["agent"]) == ("forget", "bob", "planner")

    # -- interchange ------------------------------------------------------------------------

    def test_export_in_both_formats(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        ours = ok(api.get("/api/export", params={"user": "alice"}))
        assert ours == console.stored("alice").to_json_dict()
        assert {f["id"] for f in ours["facts"]} == {f.id for f in alice_facts()}
        assert ours["user"]["workContext"]["summary"] == "Backend engineer at a fintech"
        theirs = ok(api.get("/api/export", params={"user": "alice", "format": "deerflow"}))
        assert theirs["version"] == "1.0"
        assert [f["id"] for f in theirs["facts"]] == ["f_tea", "f_go", "f_lis"]  # active only
        assert all("status" not in f for f in theirs["facts"])
        assert_error(
            api.get("/api/export", params={"user": "alice", "format": "xml"}), 422, "format"
        )

    def test_import_merges_into_a_users_memory(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        console.seed_alice()
        doc = document(
            [
                fact("n1", "Speaks Portuguese"),
                fact("n2", "drinks green tea   every morning"),  # same text as f_tea
                fact("f_go", "Writes Go services at work"),  # same id
            ]
        ).to_json_dict()
        result = ok(api.post("/api/import", json={"user": "alice", "document": doc}))
        assert result["added"] == 1 and result["replaced"] is None
        assert (result["sameId"], result["sameText"]) == (1, 1)
        assert result["format"] == "deermem"  # to_json_dict writes our "watermarks"
        assert result["revision"] == console.revision("alice")
        facts = console.stored_facts("alice")
        assert len(facts) == 6
        assert "Speaks Portuguese" in [f.content for f in facts.values()]
        assert facts["f_tea"].content == "Drinks green tea every morning"
        entry = ok(api.get("/api/audit"))["entries"][0]
        assert entry["action"] == "import" and "merged" in entry["detail"]
        # an import creates a user that has no memory yet
        ok(api.post("/api/import", json={"user": "carol", "document": doc}))
        assert len(console.stored("carol").facts) == 3
        assert "carol" in [u["user"] for u in ok(api.get("/api/users"))["users"]]

    def test_import_can_replace_a_users_memory(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        console.seed_alice()
        doc = document([fact("n1", "Speaks Portuguese")]).to_json_dict()
        body = {"user": "alice", "document": doc, "replace": True}
        result = ok(api.post("/api/import", json=body))
        assert result["replaced"] == 5
        assert [f.content for f in console.stored("alice").facts] == ["Speaks Portuguese"]
        assert "replaced" in ok(api.get("/api/audit"))["entries"][0]["detail"]

    def test_import_accepts_a_deerflow_v1_document(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        doc = json.loads(DEERFLOW_V1.read_text(encoding="utf-8"))
        for fmt in ("auto", "deerflow"):
            user = f"bob-{fmt}"
            result = ok(
                api.post("/api/import", json={"user": user, "document": doc, "format": fmt})
            )
            assert result["format"] == "deerflow" and result["added"] == 2
            assert result["sameId"] == 0 and result["sameText"] == 0 and result["capped"] == []
            assert "workContext" in result["sections"] and result["replaced"] is None
            stored = console.stored(user)
            assert sorted(f.content for f in stored.facts) == [
                "Has a cat called Miso.",
                "Writes Rust at work.",
            ]
            assert stored.section("workContext").summary == "Bob: workContext summary."

    def test_import_answers_which_fact_ids_it_replaced(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        doc = {"facts": [{"id": "  ", "content": "Speaks Portuguese"}, {"id": 7, "content": "x"}]}
        result = ok(api.post("/api/import", json={"user": "alice", "document": doc}))
        assert result["added"] == 2
        assert (result["repaired"], result["idsRepaired"]) == (2, 2)
        first, second = result["repairs"]
        assert first.startswith(
            "document: facts[0].id: blank id '  ' (fact 'Speaks Portuguese'); given fact_"
        )
        assert second.startswith("document: facts[1].id: id 7 is a number, not a string")
        assert sorted(f.content for f in console.stored("alice").facts) == [
            "Speaks Portuguese",
            "x",
        ]

    def test_import_names_the_bad_field(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        console.seed_alice()
        for doc, where, says in (
            ({"facts": "nope"}, "document.facts", "must be a list"),
            ({"facts": [{"id": "x", "content": 5}]}, "document.facts[0]", "content"),
            ({"user": 3}, "document.user", "not an object"),
            (
                {"facts": [{"content": "a", "confidence": "lots"}]},
                "document.facts[0].confidence",
                "lots",
            ),
            ({"revision": -1}, "document.revision", "non-negative"),
        ):
            response = api.post("/api/import", json={"user": "alice", "document": doc})
            err = assert_error(response, 400, where, says)
            assert err["error"].startswith(f"{where}: "), err
        for body, where in (
            ({"document": "text"}, "document"),
            ({"document": {}, "format": "xml"}, "format"),
            ({"document": {}, "replace": "yes"}, "replace"),
            ({}, "document"),
        ):
            assert_error(api.post("/api/import", json={"user": "alice", **body}), 422, where)
        assert len(console.stored("alice").facts) == 5
        assert console.audit_raw() == []

    def test_exports_round_trip_through_import(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.formats.importing")
        console.seed_alice()
        ours = ok(api.get("/api/export", params={"user": "alice"}))
        ok(api.post("/api/import", json={"user": "copy", "document": ours, "format": "deermem"}))
        again = ok(api.get("/api/export", params={"user": "copy"}))
        assert again["facts"] == ours["facts"]
        assert again["user"] == ours["user"] and again["history"] == ours["history"]
        theirs = ok(api.get("/api/export", params={"user": "alice", "format": "deerflow"}))
        result = ok(api.post("/api/import", json={"user": "flow", "document": theirs}))
        assert result["format"] == "deerflow"
        back = ok(api.get("/api/export", params={"user": "flow", "format": "deerflow"}))
        assert [(f["id"], f["content"]) for f in back["facts"]] == [
            (f["id"], f["content"]) for f in theirs["facts"]
        ]
        assert back["user"] == theirs["user"]

    # -- the whole memory -------------------------------------------------------------------

    def test_stats_per_user_and_agent(self, console: ConsoleEnv, api: Api) -> None:
        pytest.importorskip("deermem_middleware.runtime.stats")
        console.seed_alice()
        console.seed("bob", [fact("b1", "Bob rides a bike", injections=4)], agent="planner")
        ok(api.post("/api/facts", json={"user": "alice", "content": "Plays chess"}), 201)  # audit
        stats = ok(api.get("/api/stats"))
        assert stats["users"] == 2 and stats["documents"] == 2
        assert stats["facts"] == 7
        assert stats["injections"] == 7
        assert RESERVED_USER not in json.dumps(stats)
        alice, bob = stats["scopes"]
        assert (alice["user"], alice["agent"], bob["user"], bob["agent"]) == (
            "alice",
            DEFAULT_AGENT,
            "bob",
            "planner",
        )
        assert alice["facts"] == 6 and alice["manual"] == 1 and alice["injections"] == 3
        assert alice["byStatus"] == {"active": 4, "archived": 1, "superseded": 1}
        assert alice["revision"] == console.revision("alice") and alice["bytes"] > 0
        assert alice["confidence"] == {"min": 0.5, "median": 0.75, "max": 1.0}
        bob = ok(api.get("/api/stats", params={"user": "bob"}))
        assert bob["users"] == 1 and bob["facts"] == 1 and bob["injections"] == 4

    def test_the_ledger_lists_recent_injections(self, console: ConsoleEnv, api: Api) -> None:
        console.seed_alice()
        console.seed("bob", [fact("b1", "Bob rides a bike")])
        assert ok(api.get("/api/ledger")) == {"records": []}
        console.service.memory_block([HumanMessage("Any green tea?")], "alice")
        console.service.memory_block([HumanMessage("bike?")], "bob")
        records = ok(api.get("/api/ledger"))["records"]
        assert [r["user"] for r in records] == ["bob", "alice"]  # newest first
        alice = records[1]
        assert alice["agent"] == DEFAULT_AGENT and alice["tokens"] > 0
        ids = [f["id"] for f in alice["facts"]]
        assert "f_tea" in ids and "f_old" not in ids
        assert [
            r["user"] for r in ok(api.get("/api/ledger", params={"user": "alice"}))["records"]
        ] == ["alice"]
        assert len(ok(api.get("/api/ledger", params={"limit": 1}))["records"]) == 1
        assert_error(api.get("/api/ledger", params={"limit": 0}), 422, "limit")
        assert_error(api.get("/api/ledger", params={"limit": 257}), 422, "limit")

    def test_the_audit_log_is_bounded_and_records_who_and_what(self, console: ConsoleEnv) -> None:
        console.seed_alice()
        api = console.api(app=console.make_app(audit_max_entries=3))
        added = [
            ok(api.post("/api/facts", json={"user": "alice", "content": f"Fact number {i}"}), 201)
            for i in range(4)
        ]
        version = console.version("alice", "f_go")
        body = {"user": "alice", "version": version, "category": "work"}
        ok(api.patch("/api/facts/f_go", json=body, token=ALICE_ONLY))
        log = ok(api.get("/api/audit"))
        assert log["total"] == 3 and len(console.audit_raw()) == 3
        assert [e["factId"] for e in log["entries"]] == [
            "f_go",
            added[3]["fact"]["id"],
            added[2]["fact"]["id"],
        ]  # newest first; the two oldest were dropped
        edit = log["entries"][0]
        assert (edit["operator"], edit["role"], edit["action"]) == ("ada", "edit", "fact.edit")
        assert (edit["user"], edit["agent"], edit["at"]) == ("alice", DEFAULT_AGENT, NOW_TEXT)
        assert edit["before"]["category"] == "knowledge" and edit["after"]["category"] == "work"
        assert edit["before"]["content"] == edit["after"]["content"]
        assert edit["redacted"] is False
        paged = ok(api.get("/api/audit", params={"offset": 1, "limit": 1}))
        assert paged["total"] == 3 and [e["factId"] for e in paged["entries"]] == [
            added[3]["fact"]["id"]
        ]
        assert ok(api.get("/api/audit", params={"user": "bob"}))["total"] == 0
        assert ok(api.get("/api/audit", params={"user": "alice", "agent": "planner"}))["total"] == 0
        assert_error(api.get("/api/audit", params={"limit": 0}), 422, "limit")

    def test_an_imported_fact_whose_id_holds_a_slash_can_be_edited_and_deleted(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed("alice", [fact("team/a", "Shares a desk"), fact("100%", "Fully remote")])
        edit = {
            "user": "alice",
            "version": console.version("alice", "team/a"),
            "content": "Hot-desks",
        }
        edited = ok(api.patch("/api/facts/team%2Fa", json=edit))
        assert edited["fact"]["id"] == "team/a" and edited["fact"]["content"] == "Hot-desks"
        drop = {"user": "alice", "version": edited["fact"]["version"]}
        assert ok(api.delete("/api/facts/team/a", params=drop))["removed"]["id"] == "team/a"
        assert set(console.stored_facts("alice")) == {"100%"}
        assert_error(api.delete("/api/facts/", params=drop), 404, "id")

    def test_hostile_imports_are_refused_and_nothing_is_written(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        console.seed_alice()
        revision = console.revision("alice")
        json_headers = {"content-type": "application/json"}
        for document in (
            b'{"\\ud800": 1}',  # a lone surrogate in a key
            b'{"facts": [], "notes": {"deep": "\\udfff"}}',  # in a value nothing reads
            b'{"facts": [{"id": "a", "content": "x", "note": "\\ud800"}]}',  # a fact's own key
        ):  # (a bad fact id is not refused but replaced: the fact ids rule)
            raw = b'{"user": "alice", "document": ' + document + b"}"
            response = api.post("/api/import", content=raw, headers=json_headers)
            assert_error(response, 400)
        assert console.revision("alice") == revision
        assert len(console.stored("alice").facts) == 5
        assert console.audit_raw() == []

    def test_an_unknown_path_or_method_answers_json(self, console: ConsoleEnv, api: Api) -> None:
        assert_error(api.get("/api/nope"), 404)
        assert_error(api.request("PUT", "/api/facts"), 405)

    # -- limits -----------------------------------------------------------------------------

    def test_a_body_over_the_limit_is_a_413(self, console: ConsoleEnv) -> None:
        console.seed_alice()
        api = console.api(app=console.make_app(max_body_bytes=200))
        small = {"user": "alice", "content": "Plays chess"}
        ok(api.post("/api/facts", json=small), 201)
        big = {"user": "alice", "content": "Plays chess " + "x" * 300}
        assert_error(api.post("/api/facts", json=big), 413, "body", "larger than 200 bytes")
        raw = json.dumps(big).encode()

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it is read
            for i in range(0, len(raw), 50):
                yield raw[i : i + 50]

        response = api.post(
            "/api/facts", content=chunks(), headers={"content-type": "application/json"}
        )
        assert "content-length" not in {k.lower() for k in response.request.headers}
        assert_error(response, 413, "body")
        doc = {
            "user": "alice",
            "document": {"facts": [{"id": str(i), "content": "x" * 50} for i in range(9)]},
        }
        assert_error(api.post("/api/import", json=doc), 413, "body")
        edit = {"user": "alice", "version": console.version("alice", "f_go"), "content": "y" * 300}
        assert_error(api.patch("/api/facts/f_go", json=edit), 413, "body")
        bad_length = {"content-length": "12abc", "content-type": "application/json"}
        response = api.post("/api/facts", content=json.dumps(small).encode(), headers=bad_length)
        assert_error(response, 400, "body", "Content-Length")
        assert len(console.stored("alice").facts) == 6

    # -- mounting ---------------------------------------------------------------------------

    def test_the_router_works_inside_another_fastapi_app(self, console: ConsoleEnv) -> None:
        console.seed_alice()
        host = FastAPI()

        @host.get("/health")
        def health() -> dict[str, str]:
            return {"status": "up"}

        the_console = Console(
            console.service, standard_auth(), max_body_bytes=300, clock=lambda: NOW
        )
        host.include_router(console_router(the_console), prefix="/memory")
        api = console.api(app=host)
        assert ok(api.get("/health", token=None)) == {"status": "up"}
        assert ok(api.get("/memory/api/session"))["operator"] == "erin"
        assert_error(api.get("/memory/api/session", token=None), 401)
        assert ok(api.get("/memory/api/facts", params={"user": "alice"}))["total"] == 5
        added = ok(
            api.post("/memory/api/facts", json={"user": "alice", "content": "Plays chess"}), 201
        )
        assert added["fact"]["createdAt"] == NOW_TEXT
        # the console's errors are JSON here too, where the host's handlers are not the console's
        assert_error(api.get("/memory/api/facts", params={"user": "nobody"}), 404, "user")
        assert_error(
            api.get("/memory/api/facts", params={"user": "alice", "limit": -1}), 422, "limit"
        )
        assert_error(
            api.post(
                "/memory/api/facts", content=b"{", headers={"content-type": "application/json"}
            ),
            400,
            "body",
        )
        assert_error(
            api.post("/memory/api/facts", json={"user": "alice", "content": "x" * 400}), 413
        )
        assert_error(
            api.post("/memory/api/facts", token=READ, json={"user": "alice", "content": "y"}), 403
        )
        schema = ok(api.get("/memory/api/openapi.json"))
        assert "/memory/api/facts" in schema["paths"] and "/health" in schema["paths"]
        assert ok(api.get("/memory/api/audit"))["entries"][0]["action"] == "fact.add"

    def test_the_app_works_mounted_under_a_prefix(self, console: ConsoleEnv) -> None:
        console.seed_alice()
        outer = Starlette(routes=[Mount("/memory", app=console.make_app())])
        api = console.api(app=outer)
        assert ok(api.get("/memory/api/session"))["operator"] == "erin"
        assert ok(api.get("/memory/api/facts", params={"user": "alice"}))["total"] == 5
        assert_error(api.get("/memory/api/facts", params={"user": "nobody"}), 404, "user")
        page = api.get("/memory/", token=None)
        assert page.status_code == 200 and "<form" in page.text.lower()
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert api.get("/memory/app.js", token=None).status_code == 401
        browser = console.api(token=None, app=outer)
        login = browser.post("/memory/login", data={"token": EDIT})
        assert login.status_code == 303 and login.headers["location"] == "./"
        assert "path=/memory" in login.headers["set-cookie"].lower()
        csrf = ok(browser.get("/memory/api/session"))["csrf"]
        body = {"user": "alice", "content": "Plays chess"}
        ok(browser.post("/memory/api/facts", json=body, headers={"X-CSRF-Token": csrf}), 201)
        assert browser.get("/memory/app.js").status_code == 200
        assert browser.get("/memory/").text != page.text  # the app, not the login page

    def test_the_openapi_schema_needs_a_credential_and_lists_the_routes(
        self, console: ConsoleEnv, api: Api
    ) -> None:
        assert_error(api.get("/api/openapi.json", token=None), 401)
        assert_error(api.get("/api/openapi.json", token=NOBODY), 401)
        assert api.get("/openapi.json", token=None).status_code == 404
        assert api.get("/docs", token=None).status_code == 404
        schema = ok(api.get("/api/openapi.json", token=READ))
        assert schema["openapi"].startswith("3.")
        listed = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
        expected = {(m, p.replace("f_tea", "{fact_id}")) for m, p, _ in route_calls()}
        expected.discard(("GET", "/api/openapi.json"))
        assert listed == expected
        assert "/login" not in schema["paths"]
        assert schema["paths"]["/api/facts/{fact_id}"]["patch"]["summary"].startswith("Edit a fact")


@dataclass
class Clock:
    """A clock a test moves by hand."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def console_app_with_clock(
    service: MemoryService, clock: Callable[[], float]
) -> tuple[FastAPI, ConsoleAuth]:
    auth = standard_auth(clock=clock)
    app = create_console_app(service, auth=auth)
    app.state.console.clock = lambda: NOW
    return app, auth

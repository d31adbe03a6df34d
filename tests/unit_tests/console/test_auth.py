"""The console's pure logic: credentials (tokens, links, sessions, CSRF), operators and their
file, the audit log's algebra and store, the views of facts, and the error answers.

The HTTP routes are in ``test_console_api.py``; nothing here opens an app.
"""

from __future__ import annotations

import hashlib
import json
import logging
import stat
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request

from deermem_middleware.config import ConfigError, MemoryConfig
from deermem_middleware.console import auth as auth_module
from deermem_middleware.console.audit import (
    AUDIT_KEY,
    AUDIT_SCOPE,
    RESERVED_USER,
    AuditEntry,
    AuditLog,
    appended,
    redacted,
)
from deermem_middleware.console.auth import (
    LINK_TTL_SECONDS,
    SESSION_TTL_SECONDS,
    ConsoleAuth,
    Operator,
    token_digest,
)
from deermem_middleware.console.errors import ApiError, error_response
from deermem_middleware.console.operators import add_operator, load_operators
from deermem_middleware.console.state import Caller, Console
from deermem_middleware.console.views import (
    counts,
    fact_version,
    fact_view,
    filter_facts,
    page,
    profile_view,
    sort_facts,
)
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.manual import (
    DuplicateFactError,
    InvalidFactError,
    UnknownFactError,
)
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import InMemoryStorage
from deermem_middleware.storage.base import (
    CorruptedMemoryError,
    MemoryScope,
    RevisionConflict,
    StorageError,
)

# -- credentials ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def counter_secrets() -> Any:
    n = iter(range(10**6))
    return lambda: f"secret-{next(n)}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def auth(clock: Clock) -> ConsoleAuth:
    return ConsoleAuth(clock=clock, new_secret=counter_secrets())


def test_tokens_are_kept_as_digests_and_looked_up_by_them(auth: ConsoleAuth) -> None:
    sam = Operator("sam", "edit")
    given = auth.add_token(sam, "s3cret")
    assert given == "s3cret"
    assert auth.tokens == {token_digest("s3cret"): sam}
    assert "s3cret" not in json.dumps(list(auth.tokens))
    assert token_digest("s3cret") == hashlib.sha256(b"s3cret").hexdigest()
    assert auth.bearer("s3cret") is sam
    assert auth.bearer("s3cre") is None and auth.bearer("") is None
    random = auth.add_token(Operator("rob"))
    assert random == "secret-0" and auth.bearer(random) == Operator("rob")
    assert auth.operators == (sam, Operator("rob"))
    assert token_digest("\ud800") != token_digest("\ufffd")  # a lone surrogate: no crash


def test_console_auth_of_digests(auth: ConsoleAuth) -> None:
    sam = Operator("sam", "read")
    built = ConsoleAuth.of([(token_digest("t"), sam)], link_ttl=5.0)
    assert built.bearer("t") is sam and built.link_ttl == 5.0


def test_a_login_link_is_single_use_and_short_lived(auth: ConsoleAuth, clock: Clock) -> None:
    sam = Operator("sam", "edit")
    link = auth.issue_link(sam)
    session = auth.redeem_link(link)
    assert session is not None and session.operator is sam
    assert session.id != session.csrf and session.id != link
    assert session.expires_at == clock.now + SESSION_TTL_SECONDS
    assert auth.redeem_link(link) is None  # spent
    assert auth.redeem_link("") is None and auth.redeem_link("made-up") is None
    late = auth.issue_link(sam)
    clock.now += LINK_TTL_SECONDS + 0.001
    assert auth.redeem_link(late) is None
    on_time = auth.issue_link(sam)
    clock.now += LINK_TTL_SECONDS - 1
    assert auth.redeem_link(on_time) is not None


def test_a_session_slides_and_expires(auth: ConsoleAuth, clock: Clock) -> None:
    auth.add_token(Operator("sam", "edit"), "tok")
    assert auth.login("wrong") is None
    session = auth.login("tok")
    assert session is not None
    clock.now += SESSION_TTL_SECONDS - 10
    assert auth.session(session.id) is session  # used: its lifetime starts again
    assert session.expires_at == clock.now + SESSION_TTL_SECONDS
    clock.now += SESSION_TTL_SECONDS - 10
    assert auth.session(session.id) is session
    clock.now += SESSION_TTL_SECONDS + 1
    assert auth.session(session.id) is None
    assert auth.session(session.id) is None  # and it is gone
    assert auth.session("") is None


def test_ending_a_session(auth: ConsoleAuth) -> None:
    session = auth.start_session(Operator("sam"))
    auth.end_session(session.id)
    assert auth.session(session.id) is None
    auth.end_session("never-existed")  # no error


def test_sessions_are_bounded_least_recently_used_first(
    auth: ConsoleAuth, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth_module, "MAX_SESSIONS", 3)
    first, second, third = (auth.start_session(Operator(f"op{i}")) for i in range(3))
    assert auth.session(first.id) is first  # first is now the most recently used
    fourth = auth.start_session(Operator("op3"))
    assert auth.session(second.id) is None  # the least recently used went
    assert all(auth.session(s.id) is s for s in (first, third, fourth))


def test_expired_links_and_sessions_are_swept(auth: ConsoleAuth, clock: Clock) -> None:
    auth.issue_link(Operator("a"))
    auth.start_session(Operator("b"))
    clock.now += SESSION_TTL_SECONDS + 1
    auth.issue_link(Operator("c"))
    assert len(auth._links) == 1 and auth._sessions == {}


def test_csrf_tokens_must_match_exactly(auth: ConsoleAuth) -> None:
    session = auth.start_session(Operator("sam"))
    assert ConsoleAuth.csrf_ok(session, session.csrf)
    for sent in (None, "", session.csrf + "x", session.csrf[:-1], session.id):
        assert not ConsoleAuth.csrf_ok(session, sent), sent


# -- operators ------------------------------------------------------------------------------------


def test_operator_roles_and_scopes() -> None:
    everyone = Operator("sam", "edit")
    assert everyone.can_edit and everyone.can_see("anyone")
    assert everyone.describe() == {"operator": "sam", "role": "edit", "users": None}
    reader = Operator("rita")
    assert reader.role == "read" and not reader.can_edit
    scoped = Operator("ada", "read", frozenset({"alice", "team-a/*"}))
    assert scoped.can_see("alice") and scoped.can_see("team-a/x") and scoped.can_see("team-a/")
    assert not scoped.can_see("alicia") and not scoped.can_see("ali")
    assert not scoped.can_see("team-b/x") and not scoped.can_see("team-a")
    assert scoped.describe()["users"] == ["alice", "team-a/*"]
    assert Operator("none", "read", frozenset()).can_see("alice") is False
    for bad in ({"name": ""}, {"name": "  "}, {"name": "x", "role": "admin"}):
        with pytest.raises(ValueError):
            Operator(**bad)  # type: ignore[arg-type]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


DIGEST = "a" * 64


def test_the_operators_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "ops.yaml",
        f"""
        operators:
          - name: sam
            role: edit
            token_sha256: {DIGEST.upper()}
          - name: ada
            token_sha256: {"b" * 64}
            users: [alice, "team-a/*"]
        """,
    )
    (sam_digest, sam), (ada_digest, ada) = load_operators(path)
    assert sam_digest == DIGEST and sam == Operator("sam", "edit")
    assert ada_digest == "b" * 64
    assert ada == Operator("ada", "read", frozenset({"alice", "team-a/*"}))
    assert load_operators(write(tmp_path / "empty.yaml", "")) == []
    assert load_operators(write(tmp_path / "none.yaml", "operators: []\n")) == []


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (f"operators:\n  - name: sam\n    token_sha256: {DIGEST}\n    colour: red\n", 4, "unknown"),
        (f"operators:\n  - name: sam\n    role: admin\n    token_sha256: {DIGEST}\n", 3, "role"),
        ("operators:\n  - name: sam\n    token_sha256: abc\n", 3, "64 hex"),
        ("operators:\n  - name: sam\n", 2, "token_sha256"),
        (f"operators:\n  - token_sha256: {DIGEST}\n", 2, "name"),
        (f"operators:\n  - name: s\n    token_sha256: {DIGEST}\n    users: alice\n", 4, "users"),
        (
            f"operators:\n  - name: a\n    token_sha256: {DIGEST}\n"
            f"  - name: b\n    token_sha256: {DIGEST}\n",
            5,
            "same token as operator 'a'",
        ),
        ("operators:\n  - just a string\n", 2, "mapping"),
        ("- a list\n", None, "'operators' list"),
    ],
)
def test_mistakes_in_the_operators_file_name_file_line_and_key(
    tmp_path: Path, text: str, line: int | None, says: str
) -> None:
    path = write(tmp_path / "ops.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_operators(path)
    message = str(info.value)
    assert str(path) in message and says in message
    if line is not None:
        assert f"{path}:{line}:" in message


def test_adding_an_operator_writes_only_the_digest(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "ops.yaml"
    token, sam = add_operator(path, "sam", "edit")
    assert sam == Operator("sam", "edit") and len(token) >= 32
    text = path.read_text(encoding="utf-8")
    assert token not in text and token_digest(token) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    other, ada = add_operator(path, "ada", "read", ["alice"])
    assert other != token and ada.users == frozenset({"alice"})
    assert [(d, o) for d, o in load_operators(path)] == [
        (token_digest(token), sam),
        (token_digest(other), ada),
    ]
    with pytest.raises(ConfigError, match="an operator named 'sam' exists"):
        add_operator(path, "sam", "read")
    broken = write(tmp_path / "broken.yaml", "operators:\n  - name: x\n")
    with pytest.raises(ConfigError):
        add_operator(broken, "y", "read")
    assert broken.read_text(encoding="utf-8") == "operators:\n  - name: x\n"  # left as it was


# -- the audit log --------------------------------------------------------------------------------


def entry(user: str = "alice", n: int = 0, **more: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "at": f"2026-06-01T00:00:{n:02d}Z",
        "operator": "sam",
        "role": "edit",
        "action": "fact.edit",
        "user": user,
        "agent": "__default__",
        "fact_id": f"f{n}",
        "before": {"content": f"old {n}"},
        "after": {"content": f"new {n}"},
    }
    values.update(more)
    return AuditEntry(**values)


def test_audit_entries_round_trip_through_json() -> None:
    one = entry(detail="note", redacted=False)
    data = one.to_json()
    assert data["factId"] == "f0" and "fact_id" not in data
    assert AuditEntry.from_json(json.loads(json.dumps(data))) == one
    assert AuditEntry.from_json({}) == AuditEntry("", "", "", "", "", None)
    assert AuditEntry.from_json({"redacted": "yes"}).redacted is False


def test_appending_keeps_only_the_newest_entries() -> None:
    memory = Memory()
    for n in range(5):
        memory = appended(memory, entry(n=n), 3)
    kept = (memory.model_extra or {})[AUDIT_KEY]
    assert [e["factId"] for e in kept] == ["f2", "f3", "f4"]
    assert (appended(memory, entry(n=9), 0).model_extra or {})[AUDIT_KEY] == []
    messy = Memory.from_json_dict({AUDIT_KEY: [{"factId": "ok"}, "junk", 3]})
    assert [
        e["factId"] for e in (appended(messy, entry(n=1), 10).model_extra or {})[AUDIT_KEY]
    ] == [
        "ok",
        "f1",
    ]


def test_redacting_removes_one_users_texts_and_counts_them() -> None:
    memory = Memory()
    for n, (user, agent) in enumerate(
        [("bob", "__default__"), ("bobby", "__default__"), ("bob", "planner"), ("alice", "x")]
    ):
        memory = appended(memory, entry(user, n, agent=agent), 100)
    memory = appended(memory, entry("bob", 9, before=None, after=None, action="forget"), 100)
    same, none = redacted(memory, "carol", None)
    assert none == 0 and same is memory
    one_agent, count = redacted(memory, "bob", "planner")
    assert count == 1
    after, count = redacted(memory, "bob", None)
    assert count == 2  # the forget entry has no texts to remove
    rows = (after.model_extra or {})[AUDIT_KEY]
    text = json.dumps(rows)
    assert "old 0" not in text and "new 2" not in text and "old 1" in text and "new 3" in text
    assert [r["redacted"] for r in rows] == [True, False, True, False, False]
    assert [r["operator"] for r in rows] == ["sam"] * 5  # who and when are kept
    planner_only = (one_agent.model_extra or {})[AUDIT_KEY]
    assert planner_only[0]["before"] == {"content": "old 0"}


def test_the_audit_log_in_a_storage() -> None:
    storage = InMemoryStorage()
    log = AuditLog(storage, max_entries=10)
    log.record(entry("alice", 1))
    log.record(entry("bob", 2, agent="planner"))
    log.record(entry("bob", 3, agent=None, action="forget", before=None, after=None))
    assert storage.list_scopes() == [AUDIT_SCOPE] and AUDIT_SCOPE.user_id == RESERVED_USER
    assert [e.fact_id for e in log.entries()] == ["f3", "f2", "f1"]  # newest first
    assert [e.fact_id for e in log.entries(user="bob")] == ["f3", "f2"]
    assert [e.fact_id for e in log.entries(user="bob", agent="planner")] == ["f3", "f2"]
    assert [e.fact_id for e in log.entries(user="bob", agent="other")] == ["f3"]
    assert [e.fact_id for e in log.entries(visible=lambda u: u == "alice")] == ["f1"]
    assert log.forget("bob", None) == 1
    assert log.entries(user="bob")[1].redacted and log.entries(user="bob")[1].before is None
    assert log.entries(user="alice")[0].before == {"content": "old 1"}


def test_a_failing_audit_write_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(InMemoryStorage):
        def update(self, *args: Any, **kwargs: Any) -> int:
            raise StorageError("disk full")

    log = AuditLog(Broken())
    with caplog.at_level(logging.ERROR, logger="deermem_middleware.console.audit"):
        log.record(entry("alice", 1))
    assert "could not store the entry" in caplog.text and "old 1" in caplog.text


# -- views ----------------------------------------------------------------------------------------

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def make(fact_id: str, **more: Any) -> Fact:
    values: dict[str, Any] = {"content": f"text of {fact_id}", "createdAt": "2026-05-01T00:00:00Z"}
    values.update(more)
    return Fact(id=fact_id, **values)


def test_a_facts_version_covers_what_a_person_edits_and_not_the_counters() -> None:
    base = make("f1", confidence=0.7, category="work")
    version = fact_version(base)
    assert len(version) == 16 and version == fact_version(
        make("f1", confidence=0.7, category="work")
    )
    for counter in (
        {"injections": 4},
        {"lastInjectedAt": "2026-05-31T00:00:00Z"},
        {"confirmations": 2},
        {"lastConfirmedAt": "2026-05-30T00:00:00Z"},
        {"updatedAt": "2026-05-30T00:00:00Z"},
        {"source": "thread-9"},
    ):
        assert fact_version(base.model_copy(update=counter)) == version, counter
    for edit in (
        {"content": "other text"},
        {"category": "home"},
        {"confidence": 0.71},
        {"status": "archived"},
        {"supersededBy": "f2"},
        {"eventAt": "2026-05"},
        {"validUntil": "2026-07-01"},
        {"manual": True},
    ):
        assert fact_version(base.model_copy(update=edit)) != version, edit


def test_a_fact_view() -> None:
    fresh = make("f1", confidence=0.8, lastConfirmedAt="2026-06-01T00:00:00Z", injections=2)
    view = fact_view(fresh, NOW)
    assert view["id"] == "f1" and view["content"] == "text of f1" and view["injections"] == 2
    assert view["score"] == pytest.approx(0.8, abs=1e-3)  # confirmed just now: no decay
    assert view["version"] == fact_version(fresh)
    stale = fact_view(make("f2", confidence=0.8, createdAt="2025-06-01T00:00:00Z"), NOW)
    assert 0 <= stale["score"] < 0.8
    json.dumps(view)  # plain JSON
    slow = fact_view(
        make("f2", confidence=0.8, createdAt="2025-06-01T00:00:00Z", category="x"),
        NOW,
        {"x": 10_000},
    )
    assert slow["score"] > stale["score"]


def test_filters_sorts_and_pages() -> None:
    facts = [
        make("a", content="Likes TEA", category="pref", confidence=0.4, createdAt="2026-01-01"),
        make("b", content="likes coffee", category="pref", status="archived", confidence=0.9),
        make("c", content="Works on Go", category="work", updatedAt="2026-05-20", injections=7),
    ]
    ids = lambda found: [f.id for f in found]  # noqa: E731
    assert ids(filter_facts(facts)) == ["a", "b", "c"]
    assert ids(filter_facts(facts, status="active")) == ["a", "c"]
    assert ids(filter_facts(facts, status="archived")) == ["b"]
    assert ids(filter_facts(facts, category="pref")) == ["a", "b"]
    assert ids(filter_facts(facts, text="likes")) == ["a", "b"]
    assert ids(filter_facts(facts, text="tea")) == ["a"]
    assert ids(filter_facts(facts, text="WORK")) == ["c"]  # the category
    assert ids(filter_facts(facts, text="C")) == ["b", "c"]  # "coffee" and the id "c"
    assert ids(filter_facts(facts, text="", category="")) == ["a", "b", "c"]
    assert ids(sort_facts(facts, "updated")) == ["c", "b", "a"]
    assert ids(sort_facts(facts, "confidence")) == ["b", "c", "a"]
    assert ids(sort_facts(facts, "injections"))[0] == "c"
    assert ids(sort_facts(facts, "created")) == ["b", "c", "a"]
    with pytest.raises(KeyError):
        sort_facts(facts, "nope")
    assert page([1, 2, 3, 4], 1, 2) == [2, 3] and page([1], 5, 10) == []


def test_counts_and_profile() -> None:
    memory = Memory.from_json_dict(
        {
            "user": {"topOfMind": {"summary": "Moving house", "updatedAt": "2026-05-01"}},
            "facts": [
                make("a", category="pref").model_dump(),
                make("b", category="pref", status="archived", manual=True).model_dump(),
                make("c", category="work").model_dump(),
            ],
        }
    )
    assert counts(memory) == {
        "facts": 3,
        "byStatus": {"active": 2, "archived": 1},
        "byCategory": {"pref": 2, "work": 1},
        "manual": 1,
    }
    profile = profile_view(memory)
    assert profile["topOfMind"] == {"summary": "Moving house", "updatedAt": "2026-05-01"}
    assert profile["workContext"] == {"summary": "", "updatedAt": ""} and len(profile) == 6
    assert counts(Memory())["facts"] == 0


# -- errors ---------------------------------------------------------------------------------------


def answer(exc: Exception) -> tuple[int, dict[str, Any]]:
    response = error_response(exc)
    assert response is not None
    return response.status_code, json.loads(bytes(response.body))


def validation(*errors: dict[str, Any]) -> RequestValidationError:
    return RequestValidationError(list(errors))


def test_errors_become_json_answers() -> None:
    assert answer(ApiError(409, "changed", "version", current={"id": "f"})) == (
        409,
        {"error": "changed", "field": "version", "current": {"id": "f"}},
    )
    assert answer(validation({"type": "json_invalid", "loc": ("body", 5), "msg": "x"})) == (
        400,
        {"error": "the request body is not valid JSON", "field": "body"},
    )
    assert answer(validation({"type": "string_unicode", "loc": ("body", "user"), "msg": "x"})) == (
        400,
        {"error": "user: not valid Unicode (a lone surrogate)", "field": "user"},
    )
    status, body = answer(
        validation(
            {"type": "int_parsing", "loc": ("query", "limit"), "msg": "not an integer"},
            {"type": "missing", "loc": ("query", "user"), "msg": "required"},
        )
    )
    assert status == 422 and body == {
        "error": "limit: not an integer (and 1 more problem(s))",
        "field": "limit",
    }
    nested = validation({"type": "x", "loc": ("body", "document", "facts", 3, "id"), "msg": "bad"})
    assert answer(nested)[1]["field"] == "document.facts[3].id"
    assert answer(validation({"type": "x", "loc": ("body",), "msg": "bad"}))[1]["field"] == "body"
    assert answer(validation()) == (422, {"error": "the request is not valid", "field": None})
    assert answer(InvalidFactError("content", "blank")) == (
        400,
        {"error": "content: blank", "field": "content"},
    )
    status, body = answer(DuplicateFactError(make("f9")))
    assert (status, body["field"], body["existing"]) == (409, "content", "f9")
    assert answer(UnknownFactError("f1")) == (404, {"error": "no fact 'f1'", "field": "id"})
    scope = MemoryScope("alice", "a")
    assert answer(RevisionConflict(scope, 1, 2))[0] == 409
    status, body = answer(CorruptedMemoryError("/m.json", "bad JSON"))
    assert status == 503 and "cannot be read" in body["error"]
    assert answer(StorageError("db down"))[0] == 503
    assert error_response(RuntimeError("bug")) is None
    assert error_response(KeyError("x")) is None


# -- the console's checks -------------------------------------------------------------------------


def request(method: str = "GET", headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request(
        {"type": "http", "method": method, "path": "/", "headers": raw, "query_string": b""}
    )


@pytest.fixture
def console(tmp_path: Path) -> Any:
    service = MemoryService(
        MemoryConfig(storage_path=str(tmp_path / "m"), enabled=False, embeddings="none")
    )
    auth = ConsoleAuth()
    auth.add_token(Operator("sam", "edit"), "tok")
    auth.add_token(Operator("ada", "read", frozenset({"alice"})), "ada")
    yield Console(service, auth, audit_max_entries=7)
    service.close()


def test_console_checks_credentials_and_csrf(console: Console) -> None:
    assert console.audit.max_entries == 7
    caller = console.check(request(headers={"Authorization": "Bearer tok"}))
    assert caller.operator.name == "sam" and caller.session is None
    assert console.check(request("POST", {"Authorization": "bearer  tok "})).operator.name == "sam"
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic tok"}):
        with pytest.raises(ApiError) as info:
            console.check(request(headers=headers))
        assert info.value.status == 401
    session = console.auth.login("tok")
    assert session is not None
    cookie = {"Cookie": f"deermem_console={session.id}"}
    assert console.check(request("GET", cookie)).session is session
    with pytest.raises(ApiError) as info:
        console.check(request("DELETE", cookie))
    assert info.value.status == 403 and "X-CSRF-Token" in info.value.message
    assert console.check(request("PATCH", {**cookie, "X-CSRF-Token": session.csrf})).session
    # a bearer header wins over the cookie, and a wrong one is not rescued by it
    with pytest.raises(ApiError):
        console.check(request("GET", {**cookie, "Authorization": "Bearer nope"}))


def test_console_scopes_refuse_the_reserved_user_bad_ids_and_unseen_users(
    console: Console,
) -> None:
    sam = Caller(Operator("sam", "edit"))
    ada = Caller(Operator("ada", "read", frozenset({"alice"})))
    assert console.scope(sam, "bob", None) == MemoryScope("bob", "__default__")
    assert console.scope(sam, "bob", "") == MemoryScope("bob", "__default__")
    assert console.scope(ada, "alice", "planner") == MemoryScope("alice", "planner")
    for who, user, agent, status in (
        (sam, RESERVED_USER, None, 400),
        (sam, "a\x00b", None, 400),
        (sam, "alice", "a\x00", 400),
        (sam, "a\ud800", None, 400),
        (sam, "   ", None, 400),
        (ada, "bob", None, 403),
        (ada, "alicia", None, 403),
    ):
        with pytest.raises(ApiError) as info:
            console.scope(who, user, agent)
        assert (info.value.status, info.value.field) == (status, "user"), (user, agent)
    console.editor(sam)
    with pytest.raises(ApiError) as info:
        console.editor(ada)
    assert info.value.status == 403 and "read role" in info.value.message

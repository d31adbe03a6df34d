"""Hardening: each test reproduces one defect adversarial probing found (and failed before its fix).

The crash-level proofs (real processes, signals, pid namespaces, a full tmpfs) are in
``tests/integration_tests/test_hardening_crashes.py``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.cli import main as cli_main
from deermem_middleware.config import ConfigError, load_memory_config
from deermem_middleware.injection.render import fact_line
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import MAX_COUNT, MAX_FACT_CHARS, MAX_SUMMARY_CHARS, Memory
from deermem_middleware.runtime.retry import CircuitBreaker
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.testing import MarkerChatModel, OpenAIStub, marker_of, update_json
from tests.helpers import memory_config, wait_for

SCOPE = MemoryScope("alice", "__default__")


def _config(tmp_path: Path, **kw: Any) -> MemoryConfig:
    return memory_config(tmp_path, **{"debounce_seconds": 0, **kw})


# -- 3. a long outage ------------------------------------------------------------------------------


def test_the_back_off_never_overflows_however_long_the_outage() -> None:
    breaker = CircuitBreaker(base_seconds=2.0, max_seconds=300.0, threshold=3, jitter=lambda: 1.0)
    delays = [breaker.record_failure() for _ in range(5000)]  # 1,025 used to raise
    assert max(delays) == 300 and delays[-1] == 300
    assert breaker.is_open


def test_a_two_day_outage_keeps_the_work_pending_until_the_endpoint_is_back(
    tmp_path: Path,
) -> None:
    ok = update_json(facts=[("User writes Go at a payments company", "knowledge", 0.9)])
    down = True

    def reply(body: dict[str, Any]) -> Any:
        import httpx

        if down:
            return httpx.Response(503, json={"error": {"message": "down", "type": "server"}})
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "stub",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ok},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    stub = OpenAIStub([reply])
    config = _config(tmp_path, retry_base_seconds=0.01, retry_max_seconds=0.05)
    mw = MemoryMiddleware(config, model=stub.model(timeout=5))
    # two days of a dead endpoint at a 2 s base and a 300 s cap: well over 1,025 failures
    mw.service._breaker.failures = 2 * 86_400 // 300 * 3
    mw.capture(
        [HumanMessage("I write Go at a payments company."), AIMessage("Nice.")],
        user_id="alice",
        thread_id="t1",
    )
    deadline = time.monotonic() + 5
    while len(stub.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(stub.requests) >= 3  # it kept probing
    assert mw.flush(timeout=0.2) is False  # still down: not "done"
    assert mw.service._scheduler.pending() == 1
    assert len(mw.service.pending_entries()) == 1
    down = False
    deadline = time.monotonic() + 10
    while not mw.get_memory("alice").facts and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [f.content for f in mw.get_memory("alice").facts] == [
        "User writes Go at a payments company"
    ]
    assert mw.flush(timeout=5) is True
    mw.close()


# -- 10. config ------------------------------------------------------------------------------------

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path: Path, where: str) -> None:
    text = (
        BILLION_LAUGHS + "memory:\n  enabled: true\n"
        if where == "outside"
        else "memory:\n  enabled: true\n  agents:\n"
        + "".join(f"    {line}\n" for line in BILLION_LAUGHS.splitlines())
    )
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"config\.yaml:\d+: invalid YAML: aliases expand"):
        load_memory_config(path)
    assert time.monotonic() - started < 2


def test_self_referencing_and_deeply_nested_yaml_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("memory: &m\n  agents: *m\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="an alias refers to itself"):
        load_memory_config(path)
    path.write_text("memory: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_memory_config(path)


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "defaults: &d {top_k: 7}\nmemory:\n  agents:\n    coder: *d\n", encoding="utf-8"
    )
    assert load_memory_config(path, agent_name="coder").top_k == 7


@pytest.mark.parametrize("value", ['""', '"   "', "${EMPTY_DIR}"])
def test_a_blank_storage_path_is_the_default_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EMPTY_DIR", "")
    path = tmp_path / "config.yaml"
    path.write_text(f"memory:\n  storage_path: {value}\n", encoding="utf-8")
    assert load_memory_config(path).storage_path == "~/.deermem"
    assert MemoryConfig(storage_path="").storage_path == "~/.deermem"


@pytest.mark.parametrize("name", ["coder\n", "coder\nevil", "co der", ""])
def test_agent_names_with_newlines_or_spaces_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("memory: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="agent name must match"):
        load_memory_config(path, agent_name=name)
    with pytest.raises(ValueError, match="agent name must match"):
        MemoryConfig(agent_name=name)


# -- 2 and 4. re-journaling never destroys the previous entry --------------------------------------


def _turns(text: str) -> tuple[Turn, ...]:
    return (Turn("user", text, f"u:{text[:20]}"), Turn("assistant", "noted", "a:1"))


def test_a_failed_rejournal_leaves_the_previous_entry_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal(tmp_path / "pending")
    journal.put(SCOPE, "t1", _turns("the first capture"))
    real_write = os.write
    calls = {"n": 0}

    def short_then_full(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[:100]))  # a short write ...
        raise OSError(errno.ENOSPC, "No space left on device")  # ... then the disk is full

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(OSError, match="No space left"):
        journal.put(SCOPE, "t1", _turns("a much longer second capture " * 50))
    monkeypatch.undo()
    [entry] = journal.entries()
    assert entry.turns == _turns("the first capture")
    folder = journal.path_for(SCOPE, "t1").parent
    assert [p.name for p in folder.iterdir()] == ["t1.json"]  # no temp file left behind


def test_orphan_temp_files_of_killed_writers_are_cleaned_at_recovery(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path / "pending")
    journal.put(SCOPE, "t1", _turns("kept"))
    folder = journal.path_for(SCOPE, "t1").parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = folder / f".t1.json.{dead.pid}-1.tmp"
    orphan.write_bytes(b'{"scope": {"user_id": "alice", "agent_na')  # cut by SIGKILL
    writing = folder / f".t2.json.{os.getpid()}-1.tmp"  # a live writer's, just begun
    writing.write_bytes(b"{")
    stale = folder / f".t3.json.{os.getpid()}-2.tmp"  # a live pid, but far too old
    stale.write_bytes(b"{")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    assert [e.turns[0].text for e in journal.entries()] == ["kept"]
    assert not orphan.exists() and not stale.exists()
    assert writing.exists()  # a write in progress is left alone


# -- 8. crashing parses, 9. imports bypassing the caps --------------------------------------------

HUGE = "9" * 5000
HOSTILE_FILES = {
    "a 5,000-digit number": '{"facts": [{"id": "f1", "content": "x", "confirmations": '
    + HUGE
    + "}]}",
    "deep nesting": '{"facts": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "a huge confidence": '{"facts": [{"id": "f1", "content": "x", "confidence": 1e999}]}',
}


@pytest.fixture
def cli_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        "memory:\n  storage_path: mem\n  embeddings: none\n  max_facts: 100\n", encoding="utf-8"
    )
    return path


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_import_files_are_one_line_errors_and_store_nothing(
    tmp_path: Path, cli_config: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    source = tmp_path / "hostile.json"
    source.write_text(HOSTILE_FILES[name], encoding="utf-8")
    code = cli_main(["import", str(source), "--user", "alice", "--config", str(cli_config)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and str(source) in err and "Traceback" not in err
    assert JSONFileStorage(tmp_path / "mem").list_scopes() == []


@pytest.mark.parametrize("name", ["a 5,000-digit number", "deep nesting"])
def test_a_stored_document_that_crashes_the_parser_is_quarantined(
    tmp_path: Path, name: str
) -> None:
    storage = JSONFileStorage(tmp_path / "mem")
    path = storage.path_for(SCOPE)
    path.parent.mkdir(parents=True)
    path.write_text(HOSTILE_FILES[name], encoding="utf-8")
    assert storage.load(SCOPE).memory.facts == ()  # the user continues from an empty memory
    assert not path.exists()
    assert len(list(path.parent.glob(f"{path.name}.corrupted-*"))) == 1  # kept for a person


def test_oversized_counts_and_confidences_are_clamped_not_fatal() -> None:
    memory = Memory.from_json_dict(
        {
            "facts": [
                {"id": "f1", "content": "Likes tea", "confidence": 10**400, "injections": 10**4000},
                {"id": "f2", "content": "Uses Go", "confidence": -(10**400), "confirmations": -5},
            ],
            "watermarks": {"t": {"turn": "x", "count": 10**4000, "position": 10**4000}},
        }
    )
    first, second = memory.facts
    assert (first.confidence, first.injections) == (1.0, MAX_COUNT)
    assert (second.confidence, second.confirmations) == (0.0, 0)
    assert memory.watermarks["t"].count == MAX_COUNT
    json.dumps(memory.to_json_dict())  # saving works (a 4,000-digit int cannot be written)
    lines = [fact_line(f) for f in memory.facts]
    assert lines[0] == "- [context | 1.00] Likes tea"


def test_imports_go_through_the_caps_of_extracted_data(
    tmp_path: Path, cli_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = [
        {"id": f"f{i:03d}", "content": f"Imported fact number {i}", "confidence": 0.7 + i / 2000}
        for i in range(500)
    ]
    facts.append({"id": "long", "content": "y" * 5009, "confidence": 0.99})
    facts.append({"id": "bad", "content": "Likes \ud800 tea", "confidence": 0.99})
    document = {
        "facts": facts,
        "user": {"workContext": {"summary": "z" * 100_000, "updatedAt": "2026-01-01T00:00:00Z"}},
    }
    source = tmp_path / "big.json"
    source.write_text(json.dumps(document), encoding="utf-8")  # \ud800 written as an escape
    code = cli_main(["import", str(source), "--user", "alice", "--config", str(cli_config)])
    out = capsys.readouterr().out
    assert code == 0
    stored = JSONFileStorage(tmp_path / "mem").load(MemoryScope("alice", "__default__")).memory
    assert len(stored.facts) == 100  # max_facts
    by_id = {f.id: f for f in stored.facts}
    assert len(by_id["long"].content) == MAX_FACT_CHARS and by_id["long"].content.endswith("…")
    assert by_id["bad"].content == "Likes \ufffd tea"
    assert len(stored.user.workContext.summary) == MAX_SUMMARY_CHARS
    assert "100 fact(s) added" in out  # what was kept, not what the file had
    for note in (
        "1 fact(s) cut to 400 characters",
        "1 summary(ies) cut to 800 characters (workContext)",
        "1 text(s) with invalid characters repaired",
        "402 fact(s) over max_facts not kept",
    ):
        assert note in out, out
    kept = {f.id for f in stored.facts}
    assert {"long", "bad"} <= kept and "f000" not in kept  # the most confident are kept


# -- 5. stateless use: conversations that open alike ----------------------------------------------


def _opening(marker: str, *more: str) -> list[Any]:
    messages: list[Any] = [
        HumanMessage("Hi! Can you help me with something?"),
        AIMessage("Of course, what do you need?"),
        HumanMessage(f"Please keep this in mind: my marker for today is {marker}."),
        AIMessage(f"Understood, I will remember that your marker is {marker}."),
    ]
    for extra in more:
        messages += [
            HumanMessage(f"Also keep this in mind: the next marker is {extra}."),
            AIMessage(f"Noted: {extra}."),
        ]
    return messages


def test_two_threadless_conversations_with_the_same_opening_are_both_stored(
    tmp_path: Path,
) -> None:
    model = MarkerChatModel()
    mw = MemoryMiddleware(_config(tmp_path), model=model)
    assert mw.capture(_opening("S1-C001"), user_id="alice")  # no thread id
    assert mw.flush(timeout=10)
    assert mw.capture(_opening("S1-C002"), user_id="alice")  # another conversation, same "Hi!"
    assert mw.flush(timeout=10)
    markers = sorted(marker_of(f.content) for f in mw.get_memory("alice").facts)
    assert markers == ["S1-C001", "S1-C002"]
    # the first conversation goes on: only its new turns are extracted
    assert mw.capture(_opening("S1-C001", "S1-C003"), user_id="alice")
    assert mw.flush(timeout=10)
    assert model.calls[-1].conversation == ("S1-C003",)
    markers = sorted(marker_of(f.content) for f in mw.get_memory("alice").facts)
    assert markers == ["S1-C001", "S1-C002", "S1-C003"]
    mw.close()


def test_create_agent_without_a_checkpointer_stores_both_conversations(tmp_path: Path) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = MarkerChatModel()
    memory = MemoryMiddleware(_config(tmp_path, debounce_seconds=0.05), model=model)
    replies = iter([AIMessage(f"Reply {i}") for i in range(10)])
    agent = create_agent(GenericFakeChatModel(messages=replies), tools=[], middleware=[memory])
    for marker in ("S2-C001", "S2-C002"):
        agent.invoke({"messages": [*_opening(marker)[:3]]}, {"configurable": {"user_id": "alice"}})
        assert memory.flush(timeout=10)
    markers = sorted(marker_of(f.content) for f in memory.get_memory("alice").facts)
    assert markers == ["S2-C001", "S2-C002"]
    memory.close()


# -- 6. one user's poisoned id must not stall everyone -------------------------------------------


def test_a_lone_surrogate_user_id_is_refused_at_capture_and_others_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = MarkerChatModel()
    mw = MemoryMiddleware(_config(tmp_path), model=model)
    poisoned = json.loads('"user\\ud800"')  # what a web request's JSON can carry
    with caplog.at_level(logging.ERROR):
        assert mw.capture(_opening("S3-C001"), user_id=poisoned, thread_id="t1") is False
    assert "not valid Unicode" in caplog.text
    assert mw.capture(_opening("S3-C002"), user_id="bob", thread_id="t2")
    assert mw.flush(timeout=5)  # not stalled: the flush finished within its timeout
    assert [marker_of(f.content) for f in mw.get_memory("bob").facts] == ["S3-C002"]
    assert mw.service._breaker.failures == 0
    mw.close()


def test_a_lone_surrogate_thread_id_gets_a_storable_key(tmp_path: Path) -> None:
    model = MarkerChatModel()
    mw = MemoryMiddleware(_config(tmp_path), model=model)
    thread = json.loads('"thread\\udc80"')
    assert mw.capture(_opening("S4-C001"), user_id="alice", thread_id=thread)
    assert mw.flush(timeout=5)
    memory = mw.get_memory("alice")
    assert [marker_of(f.content) for f in memory.facts] == ["S4-C001"]
    assert list(memory.watermarks) == ["thread\\udc80"]
    assert mw.service._breaker.failures == 0
    mw.close()


# -- 7. storage faults: no breaker, and the model is called once ---------------------------------


class _ReadOnlyFor(JSONFileStorage):
    """Saves of one user fail as a read-only remount does, until ``healed``."""

    def __init__(self, root: Path, user: str) -> None:
        super().__init__(root)
        self.user = user
        self.healed = False
        self.failed_saves = 0

    def update(self, scope: MemoryScope, mutate: Any, **kw: Any) -> int:
        if scope.user_id == self.user and not self.healed:
            self.failed_saves += 1
            raise OSError(errno.EROFS, "Read-only file system", str(self.path_for(scope)))
        return super().update(scope, mutate, **kw)


def test_an_unsavable_update_calls_the_model_once_and_stalls_nobody(tmp_path: Path) -> None:
    model = MarkerChatModel()
    storage = _ReadOnlyFor(tmp_path / "memory", "alice")
    config = _config(tmp_path, retry_base_seconds=0.01, retry_max_seconds=0.05)
    mw = MemoryMiddleware(config, model=model, storage=storage)
    assert mw.capture(_opening("S5-C001"), user_id="alice", thread_id="t1")
    deadline = time.monotonic() + 5
    while storage.failed_saves < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert storage.failed_saves >= 5  # retried ...
    assert [c.conversation for c in model.calls] == [("S5-C001",)]  # ... the save alone
    assert mw.service._breaker.failures == 0 and not mw.service._breaker.is_open
    assert mw.capture(_opening("S5-C002"), user_id="bob", thread_id="t2")
    # bob's update is not held up by alice's disk: it is stored while hers is still refused
    wait_for(
        lambda: mw.get_memory("bob").facts,
        "bob's update to be stored while alice's saves still fail",
        timeout=60,
        seen=lambda: f"{storage.failed_saves} failed saves of alice's",
    )
    assert not mw.get_memory("alice").facts
    storage.healed = True  # the disk is writable again: the kept extraction is saved
    assert mw.flush(timeout=5)
    assert [marker_of(f.content) for f in mw.get_memory("alice").facts] == ["S5-C001"]
    assert len(model.calls) == 2  # one per user, however many saves failed
    mw.close()

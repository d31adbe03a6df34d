"""The ``deermem`` command on a real JSON-file storage, run in-process through ``main``.

Memory is written the way agents write it (the real middleware, a scripted extraction model), and
every verb is checked through its printed output and through what is left in storage — above all
that ``forget`` leaves no byte of a user behind.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import Fact, Memory, MemoryConfig, MemoryMiddleware, load_memory_config
from deermem_middleware.cli import _build_parser, main
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.storage.json_file import encode_name
from deermem_middleware.testing import ScriptedChatModel, update_json
from tests.helpers import make_fact as _fact

AGENT = "__default__"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        "memory:\n  storage_path: mem\n  embeddings: none\n  debounce_seconds: 0.05\n",
        encoding="utf-8",
    )
    return path


def _root(config_path: Path) -> Path:
    return config_path.parent / "mem"


def _storage(config_path: Path) -> JSONFileStorage:
    return JSONFileStorage(_root(config_path))


def _seed(config_path: Path, user: str, *facts: Fact, agent: str = AGENT) -> None:
    storage = _storage(config_path)
    scope = MemoryScope(user, agent)
    stored = storage.load(scope)
    storage.save(scope, Memory(facts=facts), stored.revision)


def _run(config_path: Path, *argv: str) -> int:
    return main([*argv, "--config", str(config_path)])


def _facts(config_path: Path, user: str, agent: str = AGENT) -> dict[str, Fact]:
    memory = _storage(config_path).load(MemoryScope(user, agent)).memory
    return {f.id: f for f in memory.facts}


# -- help ----------------------------------------------------------------------------------------


def test_help_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deermem_middleware.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for verb in ("show", "facts", "explain", "fact", "forget", "export", "import", "stats"):
        assert verb in done.stdout


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_parsers(child))
    return found


def test_every_verb_and_option_has_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    parsers = _parsers(_build_parser())
    assert len(parsers) >= 14
    for parser in parsers:
        assert parser.description, f"{parser.prog} has no description"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, f"{parser.prog} {choice.dest}: no help"
            elif action.option_strings or action.dest not in ("help",):
                assert action.help, f"{parser.prog} {action.dest}: no help text"
    for argv in (["forget", "--help"], ["fact", "add", "--help"], ["explain", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "--config" in out and "--user" in out and "--agent" in out


# -- show ----------------------------------------------------------------------------------------


def test_show_lists_active_facts_and_says_how_many_are_hidden(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(
        config_path,
        "alice",
        _fact("fact_go", "Writes backend services in Go"),
        _fact("fact_old", "Lives in Paris", status="superseded", supersededBy="fact_lyon"),
        _fact("fact_lyon", "Lives in Lyon", category="context"),
    )
    assert _run(config_path, "show", "--user", "alice") == 0
    out = capsys.readouterr().out
    assert "fact_go" in out and "fact_lyon" in out and "Writes backend services in Go" in out
    assert "Lives in Paris" not in out
    assert "1 superseded/archived fact(s) hidden" in out

    assert _run(config_path, "show", "--user", "alice", "--all") == 0
    out = capsys.readouterr().out
    assert "Lives in Paris" in out and "superseded" in out

    assert _run(config_path, "show", "--user", "alice", "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["revision"] == 1
    assert [f["id"] for f in document["facts"]] == ["fact_go", "fact_lyon"]


# -- facts search, explain -------------------------------------------------------------------------


def test_facts_search_ranks_through_the_selection(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(
        config_path,
        "alice",
        _fact("fact_go", "Writes backend services in Go"),
        _fact("fact_tea", "Drinks green tea every morning", category="preference"),
        _fact("fact_cat", "Has a cat named Miso", category="context"),
    )
    assert _run(config_path, "facts", "search", "green tea", "--user", "alice", "--json") == 0
    ranked = json.loads(capsys.readouterr().out)
    assert ranked[0]["id"] == "fact_tea"
    assert {"score", "relevance", "lexical", "category", "confidence", "content"} <= set(ranked[0])

    assert _run(config_path, "facts", "search", "green tea", "--user", "alice", "--limit", "1") == 0
    out = capsys.readouterr().out
    assert "fact_tea" in out and "fact_go" not in out
    assert "score" in out and "0.90" in out and "preference" in out


def test_explain_shows_score_parts_tokens_and_the_exact_block(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(
        config_path,
        "alice",
        _fact("fact_go", "Writes backend services in Go", confidence=0.95),
        _fact("fact_tea", "Drinks green tea every morning", category="preference"),
        _fact("fact_sam", "Wants to be called Sam", category="correction"),
    )
    message = "Which language should I use for the new service?"
    assert _run(config_path, "explain", message, "--user", "alice") == 0
    out = capsys.readouterr().out
    middleware = MemoryMiddleware(load_memory_config(config_path))
    block = middleware.render_memory([HumanMessage(message)], user_id="alice")
    middleware.close()
    assert block.startswith("<memory>") and block in out
    for part in ("relevance", "lexical", "conf", "score", "tokens", "in block", "fact_go"):
        assert part in out
    assert "score = 1.00 × relevance + 0.05 × confidence + 0.02 × recency" in out
    assert "yes (guaranteed)" in out
    assert "block: " in out and "max_injection_tokens 2000" in out

    assert _run(config_path, "explain", message, "--user", "alice", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["block"] == block
    rows = report["facts"]
    assert rows[0]["id"] == "fact_sam" and rows[0]["guaranteed"] and rows[0]["inBlock"]
    assert rows[1]["id"] == "fact_go"
    first = rows[1]
    assert first["recency"] is not None
    parts = first["relevance"] + 0.05 * first["confidenceUsed"] + 0.02 * first["recency"]
    assert first["confidenceUsed"] <= first["confidence"]  # decayed by age, never raised
    assert first["score"] == pytest.approx(parts)
    assert first["score"] > first["relevance"] > 0 and first["inBlock"] is True
    assert first["tokens"] > 0 and report["blockTokens"] >= first["tokens"]


def test_explain_names_the_fact_the_users_own_fact_overrules(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An extracted "User's name is Sam" (0.95) and the user's own "User's name is Samuel":
    the extracted one is withheld, and explain lists it with that reason (it used to vanish:
    "1 of 2 active fact(s) ranked")."""
    _seed(
        config_path,
        "alice",
        _fact("f1", "User's name is Sam", confidence=0.95),
        Fact(id="m1", content="User's name is Samuel", confidence=0.5, manual=True),
    )
    assert _run(config_path, "explain", "What is my name?", "--user", "alice") == 0
    out = capsys.readouterr().out
    assert "2 of 2 active fact(s) ranked" in out
    assert "f1 withheld: the user's own fact m1 says otherwise (“User's name is Samuel”)" in out


def test_explain_for_a_user_without_memory(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config_path, "explain", "hello", "--user", "nobody") == 0
    assert "nothing would be injected" in capsys.readouterr().out


# -- fact add / edit / rm ------------------------------------------------------------------------


def test_fact_add_edit_rm(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    added = _run(
        config_path,
        "fact",
        "add",
        "Prefers metric units",
        "--user",
        "alice",
        "--category",
        "preference",
        "--confidence",
        "0.8",
    )
    assert added == 0
    (fact,) = _facts(config_path, "alice").values()
    assert fact.id in capsys.readouterr().out
    assert (fact.content, fact.category, fact.confidence) == (
        "Prefers metric units",
        "preference",
        0.8,
    )
    assert fact.manual and fact.sourceKind == "stated" and fact.createdAt and fact.updatedAt

    assert _run(config_path, "fact", "add", "prefers metric units.", "--user", "alice") == 2
    assert "an equal fact exists" in capsys.readouterr().err

    edited = _run(
        config_path, "fact", "edit", fact.id, "--user", "alice", "--text", "Prefers SI units"
    )
    assert edited == 0
    assert "'Prefers metric units' -> 'Prefers SI units'" in capsys.readouterr().out
    now = _facts(config_path, "alice")[fact.id]
    assert now.content == "Prefers SI units" and now.manual and now.confidence == 0.8

    assert _run(config_path, "fact", "rm", fact.id, "--user", "alice") == 0
    assert _facts(config_path, "alice") == {}
    assert _storage(config_path).load(MemoryScope("alice", AGENT)).revision == 3


def test_fact_dates_from_the_command_line(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("fact", "add", "Ran the Porto half marathon", "--user", "alice", "--date", "May 2026")
    assert _run(config_path, *argv, "--until", "2026-12-31") == 0
    (fact,) = _facts(config_path, "alice").values()
    assert (fact.eventAt, fact.validUntil) == ("2026-05", "2026-12-31")
    capsys.readouterr()
    assert _run(config_path, "show", "--user", "alice") == 0
    assert "2026-05 (until 2026-12-31)" in capsys.readouterr().out
    edit = ("fact", "edit", fact.id, "--user", "alice")
    assert _run(config_path, *edit, "--date", "2026-05-03", "--until", "none") == 0
    assert "eventAt: '2026-05' -> '2026-05-03'" in capsys.readouterr().out
    edited = _facts(config_path, "alice")[fact.id]
    assert (edited.eventAt, edited.validUntil) == ("2026-05-03", None)
    assert _run(config_path, *edit, "--date", "last spring") == 2  # main() catches usage errors
    assert "not a date: 'last spring'" in capsys.readouterr().err


def test_unknown_fact_id_is_one_line_and_exit_2(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(config_path, "alice", _fact("fact_go", "Writes Go"))
    for argv in (
        ("fact", "edit", "fact_nope", "--user", "alice", "--text", "x"),
        ("fact", "rm", "fact_nope", "--user", "alice"),
        ("forget", "--fact", "fact_nope", "--user", "alice", "--yes"),
    ):
        assert _run(config_path, *argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("deermem: error: no fact 'fact_nope'") and err.count("\n") == 1
    assert list(_facts(config_path, "alice")) == ["fact_go"]


def test_bad_input_exits_2(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(config_path, "fact", "add", "x", "--confidence", "1.5") == 2
    assert "expected a number from 0 to 1" in capsys.readouterr().err
    assert _run(config_path, "fact", "edit", "fact_x", "--user", "alice") == 2
    assert "nothing to change" in capsys.readouterr().err
    assert _run(config_path, "forget") == 2
    assert "--user U" in capsys.readouterr().err

    broken = config_path.parent / "broken.yaml"
    broken.write_text("memory:\n  storage_path: mem\n  top_kk: 3\n", encoding="utf-8")
    assert main(["show", "--config", str(broken)]) == 2
    assert f"{broken}:3" in capsys.readouterr().err


def test_edits_are_compare_and_set_and_retry_on_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent saving between the command's load and save is not overwritten. (On the file
    backend the whole update runs under the file lock, so an agent waits instead of racing: the
    race is shown on SQLite, which takes the storage's compare-and-set loop.)"""
    from deermem_middleware.config import StorageConfig
    from deermem_middleware.storage.factory import open_storage
    from deermem_middleware.storage.store import StoreStorage

    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        "memory:\n  embeddings: none\n  storage: {backend: sqlite, path: memory.db}\n",
        encoding="utf-8",
    )
    storage = open_storage(
        MemoryConfig(storage=StorageConfig(backend="sqlite", path=str(tmp_path / "memory.db")))
    )
    storage.save(MemoryScope("alice", AGENT), Memory(facts=(_fact("fact_go", "Writes Go"),)), 0)
    real_save = StoreStorage.save
    raced: list[int] = []

    def racing_save(
        self: StoreStorage, scope: MemoryScope, memory: Memory, expected: int, **kw: Any
    ) -> int:
        if not raced:
            current = self.load(scope)
            agent_fact = _fact("fact_agent", "Learnt by an agent meanwhile")
            raced.append(
                real_save(
                    self,
                    scope,
                    current.memory.model_copy(
                        update={"facts": (*current.memory.facts, agent_fact)}
                    ),
                    current.revision,
                )
            )
        return real_save(self, scope, memory, expected, **kw)

    monkeypatch.setattr(StoreStorage, "save", racing_save)
    assert _run(config_path, "fact", "add", "Prefers tea", "--user", "alice") == 0
    monkeypatch.undo()
    contents = {f.content for f in storage.load(MemoryScope("alice", AGENT)).memory.facts}
    assert contents == {"Writes Go", "Learnt by an agent meanwhile", "Prefers tea"}
    assert raced and "(revision 3)" in capsys.readouterr().out
    storage.close()


# -- forget --------------------------------------------------------------------------------------

URSULA = "ursula@example.com"
VICTOR = "victor@example.com"
URSULA_FACTS = ("Ursula breeds axolotls", "Ursula flies to Reykjavik on Friday")
URSULA_PENDING = "I am learning the hurdy-gurdy these days."
URSULA_CORRUPTED = "Ursula keeps a diary in Esperanto"
VICTOR_FACT = "Victor restores vintage radios"
VICTOR_PENDING = "I am repairing a Grundig set this week."


def _talk(middleware: MemoryMiddleware, user: str, said: str, thread: str) -> None:
    messages = [HumanMessage(said), AIMessage("Thanks for telling me, I will keep that in mind.")]
    assert middleware.capture(messages, user_id=user, thread_id=thread)


def _extracting(config_path: Path, agent: str | None, *facts: str) -> MemoryMiddleware:
    model = ScriptedChatModel(answers=[update_json(facts=[(f, "context", 0.95) for f in facts])])
    return MemoryMiddleware(load_memory_config(config_path, agent_name=agent), model=model)


def _populate(config_path: Path) -> None:
    """Ursula: two agents with stored facts, a pending capture, a quarantined copy. Victor: a
    stored fact and a pending capture. All written by the real middleware and storage."""
    for agent, fact in (("planner", URSULA_FACTS[0]), ("coder", URSULA_FACTS[1])):
        middleware = _extracting(config_path, agent, fact)
        _talk(middleware, URSULA, f"Note this: {fact}.", f"thread-{agent}")
        assert middleware.flush(timeout=10)
        middleware.close()
    middleware = _extracting(config_path, "planner", VICTOR_FACT)
    _talk(middleware, VICTOR, "I restore vintage radios.", "thread-v")
    assert middleware.flush(timeout=10)
    middleware.close()

    # pending captures: no extraction model, so they stay in the journal
    idle = MemoryMiddleware(load_memory_config(config_path, agent_name="planner"))
    _talk(idle, URSULA, URSULA_PENDING, "thread-pending")
    _talk(idle, VICTOR, VICTOR_PENDING, "thread-v-pending")
    idle.close(timeout=2)

    # a corrupted document of Ursula's third agent, quarantined by the storage
    storage = _storage(config_path)
    scope = MemoryScope(URSULA, "scratch")
    path = storage.path_for(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"facts": [{"id": "f", "content": "' + URSULA_CORRUPTED + '"', "utf-8")
    assert storage.load(scope).revision == 0
    assert list(path.parent.glob("scratch.json.corrupted-*"))


def _traces(root: Path, needles: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        relative = str(path.relative_to(root))
        data = path.read_bytes() if path.is_file() else b""
        for needle in needles:
            if needle in relative or needle.encode("utf-8") in data:
                found.append(f"{relative}: {needle}")
    return found


def test_forget_user_leaves_no_trace(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _populate(config_path)
    root = _root(config_path)
    needles = [URSULA, encode_name(URSULA), *URSULA_FACTS, URSULA_PENDING, URSULA_CORRUPTED]
    assert len({t.split(":")[1].strip() for t in _traces(root, needles)}) == len(needles)
    victor_before = _traces(root, [VICTOR, VICTOR_FACT, VICTOR_PENDING])

    assert _run(config_path, "forget", "--user", URSULA, "--yes") == 0
    receipt = capsys.readouterr().out

    assert _traces(root, needles) == []
    assert _traces(root, [VICTOR, VICTOR_FACT, VICTOR_PENDING]) == victor_before
    victor = _facts(config_path, VICTOR, "planner")
    assert [f.content for f in victor.values()] == [VICTOR_FACT]
    assert not (root / "users" / encode_name(URSULA)).exists()
    assert not (root / "pending" / encode_name(URSULA)).exists()

    assert "planner.json (revision 1, 1 fact(s))" in receipt
    assert "coder.json (revision 1, 1 fact(s))" in receipt
    assert "pending captures of agent 'planner': 1" in receipt
    assert "scratch.json.corrupted-" in receipt
    assert ".lock" in receipt
    assert "total: 2 document(s), 2 fact(s), 1 pending capture(s)" in receipt

    # forgetting again is harmless
    assert _run(config_path, "forget", "--user", URSULA, "--yes") == 0
    assert "nothing was stored" in capsys.readouterr().out


def test_forget_one_agent_keeps_the_others(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(config_path)
    assert _run(config_path, "forget", "--user", URSULA, "--agent", "planner", "--yes") == 0
    receipt = capsys.readouterr().out
    assert "planner.json" in receipt and "coder.json" not in receipt
    root = _root(config_path)
    assert _traces(root, [URSULA_FACTS[0], URSULA_PENDING]) == []
    assert [f.content for f in _facts(config_path, URSULA, "coder").values()] == [URSULA_FACTS[1]]
    assert list((root / "users" / encode_name(URSULA)).glob("scratch.json.corrupted-*"))


def test_forget_asks_first(
    config_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(config_path, "alice", _fact("fact_go", "Writes Go"))
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert _run(config_path, "forget", "--user", "alice") == 1
    assert "nothing deleted" in capsys.readouterr().err
    assert list(_facts(config_path, "alice")) == ["fact_go"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))
    assert _run(config_path, "forget", "--user", "alice") == 0
    assert _facts(config_path, "alice") == {}


def test_forget_one_fact(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(config_path, "alice", _fact("fact_go", "Writes Go"), _fact("fact_tea", "Likes tea"))
    assert _run(config_path, "forget", "--fact", "fact_tea", "--user", "alice", "--yes") == 0
    assert "forgot fact fact_tea" in capsys.readouterr().out
    assert list(_facts(config_path, "alice")) == ["fact_go"]
    document = _storage(config_path).path_for(MemoryScope("alice", AGENT)).read_bytes()
    assert b"Likes tea" not in document


def test_forget_on_a_database_storage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite through LangGraph's store: documents, journal and quarantined keys of the user."""
    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        "memory:\n  embeddings: none\n  storage: {backend: sqlite, path: mem.db}\n", "utf-8"
    )
    for user, fact in ((URSULA, URSULA_FACTS[0]), (VICTOR, VICTOR_FACT)):
        middleware = _extracting(config_path, None, fact)
        _talk(middleware, user, f"Note this: {fact}.", "t1")
        assert middleware.flush(timeout=10)
        middleware.close()
    idle = MemoryMiddleware(load_memory_config(config_path))
    _talk(idle, URSULA, URSULA_PENDING, "t2")
    store = idle.service._storage.store  # type: ignore[attr-defined]
    namespace = idle.service._storage.namespace(MemoryScope(URSULA, AGENT))  # type: ignore[attr-defined]
    store.put(namespace, "corrupted-20260101T000000Z", {"value": URSULA_CORRUPTED}, index=False)
    idle.close(timeout=2)

    assert _run(config_path, "forget", "--user", URSULA, "--yes") == 0
    receipt = capsys.readouterr().out
    assert "1 document(s), 1 fact(s), 1 pending capture(s)" in receipt
    assert "corrupted-20260101T000000Z" in receipt

    check = MemoryMiddleware(load_memory_config(config_path))
    try:
        items = check.service._storage.store.search((), limit=1000)  # type: ignore[attr-defined]
        text = json.dumps([[list(i.namespace), i.key, i.value] for i in items])
        assert URSULA_FACTS[0] not in text and URSULA_PENDING not in text
        assert encode_name(URSULA) not in text and URSULA_CORRUPTED not in text
        assert VICTOR_FACT in text
    finally:
        check.close()


# -- export / import -----------------------------------------------------------------------------


def _rich_memory() -> Memory:
    return Memory.from_json_dict(
        {
            "lastUpdated": "2026-03-01T00:00:00Z",
            "user": {
                "workContext": {"summary": "Backend engineer.", "updatedAt": "2026-03-01T00:00:00Z"}
            },
            "facts": [
                _fact("fact_go", "Writes Go", manual=True, injections=3).model_dump(),
                _fact("fact_old", "Lives in Paris", status="superseded").model_dump(),
                _fact(
                    "fact_tea", "Likes tea", category="preference", source="thread-1"
                ).model_dump(),
            ],
            "watermarks": {"thread-1": {"turn": "abc", "count": 2}},
            "customKey": {"kept": True},
        }
    )


def test_export_import_round_trip_deermem(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _storage(config_path)
    storage.save(MemoryScope("alice", AGENT), _rich_memory(), 0)
    out = tmp_path / "alice.json"
    assert _run(config_path, "export", "--user", "alice", "--output", str(out)) == 0
    exported = json.loads(out.read_text("utf-8"))
    assert exported["revision"] == 1 and exported["scope"]["user_id"] == "alice"
    assert [f["id"] for f in exported["facts"]] == ["fact_go", "fact_old", "fact_tea"]

    assert _run(config_path, "import", str(out), "--user", "bob") == 0
    assert "deermem format" in capsys.readouterr().out
    copied = storage.load(MemoryScope("bob", AGENT)).memory.to_json_dict()
    original = storage.load(MemoryScope("alice", AGENT)).memory.to_json_dict()
    copied.pop("lastUpdated")
    original.pop("lastUpdated")
    assert copied == original


def test_export_import_round_trip_deerflow(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _storage(config_path).save(MemoryScope("alice", AGENT), _rich_memory(), 0)
    assert _run(config_path, "export", "--user", "alice", "--format", "deerflow") == 0
    exported = json.loads(capsys.readouterr().out)
    assert set(exported) == {"version", "lastUpdated", "user", "history", "facts"}
    assert set(exported["user"]) == {"workContext", "personalContext", "topOfMind"}
    assert exported["user"]["workContext"]["summary"] == "Backend engineer."
    assert [f["id"] for f in exported["facts"]] == ["fact_go", "fact_tea"]  # active only
    for fact in exported["facts"]:
        assert set(fact) == {"id", "content", "category", "confidence", "createdAt", "source"}

    out = tmp_path / "memory.json"
    out.write_text(json.dumps(exported), "utf-8")
    assert _run(config_path, "import", str(out), "--user", "bob") == 0
    assert "deerflow format" in capsys.readouterr().out
    bob = _storage(config_path).load(MemoryScope("bob", AGENT)).memory
    assert bob.section("workContext").summary == "Backend engineer."
    assert [(f.id, f.content, f.category, f.confidence, f.source) for f in bob.facts] == [
        ("fact_go", "Writes Go", "knowledge", 0.9, None),
        ("fact_tea", "Likes tea", "preference", 0.9, "thread-1"),
    ]
    assert _run(config_path, "export", "--user", "bob", "--format", "deerflow") == 0
    assert json.loads(capsys.readouterr().out)["facts"] == exported["facts"]


def test_import_merge_deduplicates_by_id_and_text(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(config_path, "alice", _fact("fact_go", "Writes Go"), _fact("fact_lyon", "Lives in Lyon"))
    incoming = {
        "facts": [
            {"id": "fact_go", "content": "Writes Go (other text)", "confidence": 0.9},
            {"id": "fact_x", "content": "  lives in LYON. ", "confidence": 0.9},
            {"id": "fact_new", "content": "Has a cat", "confidence": 0.8},
        ]
    }
    path = tmp_path / "in.json"
    path.write_text(json.dumps(incoming), "utf-8")
    assert _run(config_path, "import", str(path), "--user", "alice", "--merge") == 0
    out = capsys.readouterr().out
    assert "1 fact(s) added, 1 with a known id and 1 with known text skipped" in out
    assert sorted(_facts(config_path, "alice")) == ["fact_go", "fact_lyon", "fact_new"]

    assert _run(config_path, "import", str(path), "--user", "alice", "--replace") == 0
    assert sorted(_facts(config_path, "alice")) == ["fact_go", "fact_new", "fact_x"]


def test_bad_import_file_names_the_path_and_field(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    assert _run(config_path, "import", str(missing), "--user", "alice") == 2
    assert f"cannot read import file {missing}" in capsys.readouterr().err

    cases = {
        "not json {": "invalid JSON at line 1",
        "[1, 2]": "top level is a JSON list",
        '{"facts": [{"id": "a", "content": "x", "confidence": "lots"}]}': "facts[0].confidence",
        '{"revision": -1}': "revision",
    }
    for text, expected in cases.items():
        path = tmp_path / "bad.json"
        path.write_text(text, "utf-8")
        assert _run(config_path, "import", str(path), "--user", "alice") == 2
        err = capsys.readouterr().err
        assert f"{path}: " in err and expected in err, err
    assert not _storage(config_path).path_for(MemoryScope("alice", AGENT)).exists()


def test_an_import_says_which_fact_ids_it_replaced_and_counts_them(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule for ids from outside (blank, not a string, not valid Unicode, a duplicate):
    the fact is kept under a new id, and the receipt names the fact and counts it."""
    path = tmp_path / "ids.json"
    path.write_text(
        '{"facts": [{"id": "  ", "content": "x"}, {"id": 7, "content": "Rides a bike"}, '
        '{"id": "f\\ud800", "content": "Likes tea"}, {"id": "ok", "content": "Uses Go"}, '
        '{"id": "ok", "content": "Uses Rust"}]}',
        "utf-8",
    )
    assert _run(config_path, "import", str(path), "--user", "alice") == 0
    out = capsys.readouterr().out
    assert "5 fact(s) added" in out
    assert "4 fact(s) repaired (4 given a new id) on the way in (listed below)" in out
    assert f"{path}: facts[0].id: blank id '  ' (fact 'x'); given fact_" in out
    assert f"{path}: facts[1].id: id 7 is a number, not a string (fact 'Rides a bike')" in out
    assert "facts[2].id: id 'f\\ud800' is not valid Unicode" in out
    assert "facts[4].id: duplicate id 'ok' (also facts[3]) (fact 'Uses Rust')" in out
    stored = _facts(config_path, "alice")
    assert len(stored) == 5 and "ok" in stored and "  " not in stored


# -- stats ---------------------------------------------------------------------------------------


def test_stats(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _storage(config_path).save(MemoryScope("alice", AGENT), _rich_memory(), 0)
    _seed(config_path, "bob", _fact("fact_b", "Rides a bike"), agent="coach")
    assert _run(config_path, "stats", "--json") == 0
    items = {(i["user"], i["agent"]): i for i in json.loads(capsys.readouterr().out)}
    alice = items[("alice", AGENT)]
    assert alice["facts"] == 3 and alice["revision"] == 1 and alice["pending"] == 0
    assert alice["byStatus"] == {"active": 2, "superseded": 1}
    assert alice["byCategory"] == {"knowledge": 2, "preference": 1}
    assert alice["confidence"] == {"min": 0.9, "median": 0.9, "max": 0.9}
    assert alice["injections"] == 3 and alice["manual"] == 1 and alice["bytes"] > 100
    assert ("bob", "coach") in items

    assert _run(config_path, "stats", "--user", "bob") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "selection: lexical only (embeddings: none)"
    assert "user 'bob', agent 'coach'" in out and "alice" not in out
    assert "confidence min 0.90, median 0.90, max 0.90" in out


def test_forgetting_an_unknown_user_creates_nothing(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(config_path, "alice", _fact("fact_go", "Writes Go"))
    before = sorted(str(p) for p in _root(config_path).rglob("*"))
    assert _run(config_path, "forget", "--user", "nobody", "--agent", "coder", "--yes") == 0
    assert "nothing was stored for this user" in capsys.readouterr().out
    assert sorted(str(p) for p in _root(config_path).rglob("*")) == before


@pytest.mark.parametrize("user", ["", "   ", "a\x00b"])
def test_forget_refuses_a_blank_user(
    config_path: Path, capsys: pytest.CaptureFixture[str], user: str
) -> None:
    """A blank id must not name the folder of every user (nor fall back to "default")."""
    _seed(config_path, "default", _fact("fact_go", "Writes Go"))
    _seed(config_path, "alice", _fact("fact_tea", "Likes tea"))
    assert _run(config_path, "forget", "--user", user, "--yes") == 2
    assert "--user" in capsys.readouterr().err
    assert list(_facts(config_path, "default")) == ["fact_go"]
    assert list(_facts(config_path, "alice")) == ["fact_tea"]

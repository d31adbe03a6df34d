"""DeerFlow's folders: documents DeerFlow accepts load in our storage (repaired fact by fact),
``deermem import --deerflow DIR`` migrates a whole data folder per user and agent, ``deermem
export --format deerflow`` writes what DeerFlow's loaders read (v1.0 JSON, HEAD's v2 layout), and
``deermem show`` reads DeerFlow's files in place.

Fixtures: ``tests/fixtures/deerflow_memory`` (our content, DeerFlow's shapes: the four v1.0
locations, HEAD's Markdown layout with a migration backup, the older id -> path manifest), plus
DeerFlow's own pinned layouts when the checkout has them.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.cli import main
from deermem_middleware.formats.deerflow_layout import read_folder, scope_locations
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from tests.deerflow_files import pinned
from tests.unit_tests.formats.test_deerflow import (
    HeadRejects,
    check_v1_export,
    head_load_user,
    head_normalize_fact,
    nulls_where_strings_belong,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "deerflow_memory"
V1 = FIXTURES / "v1-locations"
V2 = FIXTURES / "v2-markdown"
PATH_MAP = FIXTURES / "v2-path-map"
DEFAULT = "__default__"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("memory:\n  storage_path: mem\n  embeddings: none\n", encoding="utf-8")
    return path


def _storage(config_path: Path) -> JSONFileStorage:
    return JSONFileStorage(config_path.parent / "mem")


def _run(config_path: Path, *argv: str) -> int:
    return main([*argv, "--config", str(config_path)])


def _memory(config_path: Path, user: str, agent: str = DEFAULT) -> Memory:
    return _storage(config_path).load(MemoryScope(user, agent)).memory


def _ids(config_path: Path, user: str, agent: str = DEFAULT) -> set[str]:
    return {f.id for f in _memory(config_path, user, agent).facts}


def expected_scope(relative: str) -> tuple[str, str]:
    """Whose memory a DeerFlow file or fact file is (the mapping, restated independently of
    ``layout``): outside ``users/`` the default user; ``memory.json`` the default agent;
    ``agents/<name>/`` that agent, ``lead-agent`` without a config the default one."""
    parts = relative.split("/")
    user = "default"
    if parts[0] == "users":
        user, parts = parts[1], parts[2:]
    if parts[0] == "memory.json":
        return user, DEFAULT
    assert parts[0] == "agents", relative
    return user, DEFAULT if parts[1] == "lead-agent" else parts[1]


def facts_in(root: Path) -> dict[tuple[str, str], set[str]]:
    """Every fact under a DeerFlow folder, per scope, counted straight from the files: the JSON
    facts of every memory.json (lists and id maps; never the .v1.bak backups) and one per
    Markdown file; each named by its id, or ``content:<text>`` when it has none."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in sorted(root.glob("**/memory.json")):
        facts = json.loads(path.read_text(encoding="utf-8")).get("facts") or []
        pairs = facts.items() if isinstance(facts, dict) else [(None, f) for f in facts]
        names = {
            str(f.get("id") or key or f"content:{f['content']}")
            for key, f in pairs
            if isinstance(f, dict) and isinstance(f.get("content"), str)
        }
        found.setdefault(expected_scope(path.relative_to(root).as_posix()), set()).update(names)
    for path in sorted(root.glob("**/facts/**/*.md")):
        scope = expected_scope(path.relative_to(root).as_posix())
        found.setdefault(scope, set()).add(path.stem)
    return {k: v for k, v in found.items() if v}


def _names(config_path: Path, user: str, agent: str) -> set[str]:
    facts = _memory(config_path, user, agent).facts
    return {f.id for f in facts} | {f"content:{f.content}" for f in facts}


# =============================================================================================
# 1. Documents DeerFlow accepts load in our storage, fact by fact
# =============================================================================================


def test_a_stored_deerflow_document_is_repaired_not_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = JSONFileStorage(tmp_path / "mem")
    scope = MemoryScope("bob")
    path = storage.path_for(scope)
    path.parent.mkdir(parents=True)
    raw = {
        "facts": [
            {"content": "Drinks green tea.", "confidence": 0.9},  # no id
            {"id": "fact_n", "content": "Lives near the harbour.", "confidence": None},
            {"id": "fact_lost", "category": "context"},  # no content: kept aside
            {"id": "fact_f", "content": "Ships with pnpm.", "sourceError": "Said npm."},
        ]
    }
    path.write_text(json.dumps(raw), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        stored = storage.load(scope)
    assert [f.content for f in stored.memory.facts] == [
        "Drinks green tea.",
        "Lives near the harbour.",
        "Ships with pnpm.",
    ]
    assert stored.memory.facts[1].confidence == 0.5
    assert not list(path.parent.glob("*.corrupted-*"))  # not quarantined
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in w and "facts[0].id" in w for w in warnings)
    assert any(str(path) in w and "facts[2]" in w and "dropped" in w for w in warnings)
    # the same id on every read, until saved
    assert JSONFileStorage(tmp_path / "mem").load(scope).memory.facts[0].id == (
        stored.memory.facts[0].id
    )
    storage.save(scope, stored.memory, stored.revision)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["droppedFacts"][0]["fact"] == {"id": "fact_lost", "category": "context"}
    assert saved["facts"][2]["sourceError"] == "Said npm."  # unknown keys survive
    assert storage.load(scope).memory.facts == stored.memory.facts


def test_a_stored_id_map_document_loads(tmp_path: Path) -> None:
    storage = JSONFileStorage(tmp_path / "mem")
    scope = MemoryScope("bob")
    path = storage.path_for(scope)
    path.parent.mkdir(parents=True)
    shutil.copy(V1 / "users" / "bob" / "memory.json", path)
    assert {f.id for f in storage.load(scope).memory.facts} == {"fact_b_rust", "fact_b_cat"}


# =============================================================================================
# 2. deermem import --deerflow DIR
# =============================================================================================


def test_import_the_four_v1_locations(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config_path, "import", "--deerflow", str(V1)) == 0
    out = capsys.readouterr().out
    assert _ids(config_path, "default") >= {"fact_g_tea", "fact_g_null", "fact_g_fix"}
    assert len(_ids(config_path, "default")) == 4  # the fact without an id got one
    assert _ids(config_path, "default", "planner") == {"fact_p_weekly", "fact_p_goal"}
    assert _ids(config_path, "bob") == {"fact_b_rust", "fact_b_cat"}  # the id -> record map
    assert _ids(config_path, "bob", "planner") == {"fact_bp_morning", "fact_bp_cat"}
    fix = next(f for f in _memory(config_path, "default").facts if f.id == "fact_g_fix")
    assert (fix.model_extra or {})["sourceError"].startswith("Suggested npm")
    goal = next(
        f for f in _memory(config_path, "default", "planner").facts if f.id == "fact_p_goal"
    )
    assert goal.manual and goal.source is None  # DeerFlow's "manual" source
    assert _memory(config_path, "bob").section("workContext").summary == "Bob: workContext summary."
    # the receipt, per user and agent
    assert "user 'default', agent '__default__' (revision 1): 4 fact(s) found, 4 added" in out
    assert "2 repaired (1 given a new id), 0 dropped" in out
    assert "user 'bob', agent 'planner' (revision 1): 3 fact(s) found, 2 added" in out
    assert "users/bob/agents/planner/memory.json: facts[1]: no content; dropped" in out
    assert "memory.json: facts[2].confidence: null is not a confidence; set to 0.5" in out
    assert (
        "total: 11 fact(s) found in 4 document(s): 10 added, 0 already known, 2 repaired "
        "(1 given a new id), 1 dropped" in out
    )


def test_import_heads_markdown_layout(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config_path, "import", "--deerflow", str(V2)) == 0
    out = capsys.readouterr().out
    dana = _memory(config_path, "dana")
    assert {f.id for f in dana.facts} == {
        "fact_d_violin",
        "fact_d_tabs",
        "fact_d_manual",
        "fact_d_fix",
        "fact_d_old",  # HEAD's earlier default bucket (lead-agent, no config.yaml)
    }
    assert "fact_d_deleted" not in _ids(config_path, "dana")  # the .v1.bak is never read
    assert "skipped users/dana/memory.json.v1.bak" in out
    by_id = {f.id: f for f in dana.facts}
    assert by_id["fact_d_tabs"].category == "workflow"  # from categoryExtension
    assert by_id["fact_d_violin"].source == "thread_d1"
    assert by_id["fact_d_manual"].manual
    assert (by_id["fact_d_fix"].model_extra or {}) == {
        "sourceError": "Assumed MySQL syntax.",
        "topics": ["database"],
    }
    assert dana.section("topOfMind").summary == "Dana: topOfMind summary."
    writer = _memory(config_path, "dana", "writer")
    assert [f.content for f in writer.facts] == [
        "Wants a dry, concise tone.\nNo exclamation marks."
    ]
    assert writer.section("topOfMind").summary == "Dana: topOfMind summary."  # user-wide
    assert _ids(config_path, "default", "helper") == {"fact_h_units"}
    assert "total: 7 fact(s) found in 3 document(s): 7 added" in out
    # again: nothing added, everything known, never a silent "0 added"
    assert _run(config_path, "import", "--deerflow", str(V2)) == 0
    again = capsys.readouterr().out
    assert "5 fact(s) found, 0 added, 5 with a known id" in again
    assert "7 already known" in again


def test_import_the_older_path_map_manifest(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config_path, "import", "--deerflow", str(PATH_MAP)) == 0
    out = capsys.readouterr().out
    assert _ids(config_path, "erin") == {"fact_e_go"}
    assert "fact_e_gone.md': No such file or directory; dropped" in out
    assert "ff/fact_e_broken.md: missing YAML front matter; dropped" in out
    assert "3 fact(s) found, 1 added" in out and "2 dropped" in out


def test_import_one_user_only(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(config_path, "import", "--deerflow", str(V1), "--user", "bob") == 0
    assert {s.user_id for s in _storage(config_path).list_scopes()} == {"bob"}


def test_import_merges_like_a_file_import(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _storage(config_path)
    mine = Fact(id="fact_mine", content="Rides a bike", createdAt="2026-01-01T00:00:00Z")
    same_text = Fact(id="fact_other", content="  writes RUST at work ", createdAt="")
    storage.save(MemoryScope("bob"), Memory(facts=(mine, same_text)), 0)
    assert _run(config_path, "import", "--deerflow", str(V1), "--user", "bob") == 0
    out = capsys.readouterr().out
    assert _ids(config_path, "bob") == {"fact_mine", "fact_other", "fact_b_cat"}
    assert "1 added, 0 with a known id and 1 with known text skipped" in out
    assert _run(config_path, "import", "--deerflow", str(V1), "--user", "bob", "--replace") == 0
    assert _ids(config_path, "bob") == {"fact_b_rust", "fact_b_cat"}


def test_not_a_deerflow_folder_is_a_clear_error(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    (empty / ".deer-flow").mkdir(parents=True)
    assert _run(config_path, "import", "--deerflow", str(empty)) == 2
    err = capsys.readouterr().err
    assert f"{empty} is not a DeerFlow data folder" in err and ".deer-flow?" in err
    assert _run(config_path, "import", "--deerflow", str(tmp_path / "missing")) == 2
    assert "no such folder" in capsys.readouterr().err
    assert _run(config_path, "import", "--deerflow", str(V1 / "memory.json")) == 2
    assert "is a file" in capsys.readouterr().err
    assert _run(config_path, "import") == 2
    assert "give the FILE" in capsys.readouterr().err
    assert _storage(config_path).list_scopes() == []


def test_an_unreadable_file_is_reported_and_the_rest_imported(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "df"
    shutil.copytree(V1, folder)
    (folder / "agents" / "planner" / "memory.json").write_text("{ broken", encoding="utf-8")
    assert _run(config_path, "import", "--deerflow", str(folder)) == 1
    captured = capsys.readouterr()
    assert "agents/planner/memory.json: invalid JSON at line 1" in captured.err
    assert "1 file(s) could not be read" in captured.out
    assert len(_ids(config_path, "default")) == 4
    assert _ids(config_path, "default", "planner") == set()


def test_a_file_import_of_a_v2_manifest_takes_the_markdown_beside_it(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = V2 / "users" / "dana" / "memory.json"
    assert _run(config_path, "import", str(manifest), "--user", "dana") == 0
    out = capsys.readouterr().out
    assert "5 fact(s) added" in out and "deerflow v2 format" in out  # with lead-agent's
    assert "Markdown facts of agent(s) writer (1)" in out
    assert _run(config_path, "import", str(manifest), "--user", "dana", "--agent", "writer") == 0
    assert _ids(config_path, "dana", "writer") == {"fact_dw_tone"}


@pytest.mark.parametrize(
    "layout",
    [
        V1,
        V2,
        PATH_MAP,
        *pinned("layouts", "v1-json-locations"),
        *pinned("layouts", "head-v2-markdown"),
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_fact_of_a_layout_is_taken(
    layout: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = facts_in(layout)
    assert expected, layout
    _run(config_path, "import", "--deerflow", str(layout))
    out = capsys.readouterr().out
    taken = 0
    for (user, agent), names in expected.items():
        missing = names - _names(config_path, user, agent)
        assert all(f"{name}.md" in out for name in missing), (user, agent, missing)
        taken += len(names) - len(missing)
    total = sum(len(n) for n in expected.values())
    unreadable = total - taken  # only Markdown files that cannot be parsed, named in the receipt
    dropped = int(re.search(r"(\d+) dropped", out.splitlines()[-1]).group(1))  # type: ignore[union-attr]
    assert dropped >= unreadable and taken >= total - dropped
    for line in out.splitlines():
        if line.strip().startswith("user "):
            assert " 0 added" not in line or "known" in line, line


# =============================================================================================
# 3. deermem export --format deerflow (v1.0 JSON, v2 layout), read back by DeerFlow's rules
# =============================================================================================


def _seed_native(config_path: Path) -> None:
    assert _run(config_path, "import", "--deerflow", str(V1), "--user", "default") == 0
    assert _run(config_path, "import", "--deerflow", str(V2), "--user", "dana") == 0
    assert _run(config_path, "fact", "add", "Prefers metric units", "--user", "dana") == 0


def test_fact_add_never_stores_a_null_source(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(config_path, "fact", "add", "Prefers metric units", "--user", "zoe") == 0
    stored = json.loads(_storage(config_path).path_for(MemoryScope("zoe")).read_text("utf-8"))
    (fact,) = stored["facts"]
    assert "source" not in fact and fact["updatedAt"]  # absent, never null
    capsys.readouterr()
    assert _run(config_path, "export", "--user", "zoe", "--format", "deerflow") == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["facts"][0]["source"] == "manual"
    check_v1_export(exported)


def test_the_v1_export_loads_in_deerflow(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed_native(config_path)
    capsys.readouterr()
    for user in ("default", "dana"):
        assert _run(config_path, "export", "--user", user, "--format", "deerflow") == 0
        check_v1_export(json.loads(capsys.readouterr().out))


def test_the_v2_export_loads_in_heads_storage_and_round_trips(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed_native(config_path)
    out = tmp_path / "deerflow"
    argv = ["export", "--user", "dana", "--format", "deerflow", "--layout", "v2"]
    assert _run(config_path, *argv, "--output", str(out)) == 0
    receipt = capsys.readouterr().out
    assert "in DeerFlow's v2 layout: users/dana/memory.json (summaries) and 7 fact file(s)" in (
        receipt
    )
    loaded = head_load_user(out, "dana")  # DeerFlow's rules, every file
    assert {a: len(f) for a, f in loaded.items()} == {DEFAULT: 6, "writer": 1}
    manifest = json.loads((out / "users" / "dana" / "memory.json").read_text("utf-8"))
    assert manifest["user"]["topOfMind"]["summary"] == "Dana: topOfMind summary."
    assert nulls_where_strings_belong(manifest) == []
    # exporting again over it never overwrites DeerFlow's memory
    assert _run(config_path, *argv, "--output", str(out)) == 2
    assert "never overwritten" in capsys.readouterr().err
    # import(export(x)): every fact, with content, category, confidence, createdAt, source and
    # unknown keys
    other = tmp_path / "other.yaml"
    other.write_text("memory:\n  storage_path: mem2\n  embeddings: none\n", encoding="utf-8")
    assert _run(other, "import", "--deerflow", str(out)) == 0
    for agent in (DEFAULT, "writer"):
        before = _memory(config_path, "dana", agent)
        after = JSONFileStorage(tmp_path / "mem2").load(MemoryScope("dana", agent)).memory
        assert _comparable(after) == _comparable(before)


def _comparable(memory: Memory) -> list[tuple[Any, ...]]:
    return sorted(
        (
            f.id,
            f.content,
            f.category,
            f.confidence,
            f.createdAt,
            f.source,
            f.manual,
            json.dumps(f.model_extra or {}, sort_keys=True),
        )
        for f in memory.facts
        if f.status == "active"
    )


def test_the_v1_export_round_trips_through_a_file_import(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed_native(config_path)
    out = tmp_path / "memory.json"
    assert _run(config_path, "export", "--format", "deerflow", "--output", str(out)) == 0
    assert _run(config_path, "import", str(out), "--user", "copy") == 0
    assert _comparable(_memory(config_path, "copy")) == _comparable(_memory(config_path, "default"))


def test_heads_loader_rejects_our_native_file_but_not_the_export(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _storage(config_path)
    memory = Memory(
        facts=(
            Fact(id="fact_a", content="Uses Go", createdAt="2026-01-01T00:00:00Z", updatedAt=None),
            Fact(id="fact_b", content="Used Java", status="superseded", supersededBy="fact_a"),
        )
    )
    storage.save(MemoryScope("ann"), memory, 0)
    native = json.loads(storage.path_for(MemoryScope("ann")).read_text("utf-8"))
    with pytest.raises(HeadRejects):
        for fact in native["facts"]:
            head_normalize_fact(fact, {})
    assert _run(config_path, "export", "--user", "ann", "--format", "deerflow") == 0
    check_v1_export(json.loads(capsys.readouterr().out))


def test_v2_export_refuses_names_deerflow_cannot_take(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _storage(config_path).save(
        MemoryScope("ann", "my_agent"), Memory(facts=(Fact(id="f", content="x"),)), 0
    )
    argv = ["export", "--user", "ann", "--format", "deerflow", "--layout", "v2"]
    assert _run(config_path, *argv, "--output", str(tmp_path / "out")) == 2
    assert "agent name 'my_agent'" in capsys.readouterr().err
    assert _run(config_path, "export", "--layout", "v2", "--output", str(tmp_path / "o")) == 2
    assert "--format deerflow" in capsys.readouterr().err


# =============================================================================================
# 4. deermem show on a DeerFlow data folder, and on a bad storage path
# =============================================================================================


@pytest.mark.parametrize(
    ("user", "agent", "expected"),
    [
        ("default", DEFAULT, "fact_g_tea"),  # memory.json
        ("default", "planner", "fact_p_weekly"),  # agents/planner/memory.json
        ("bob", DEFAULT, "fact_b_rust"),  # users/bob/memory.json
        ("bob", "planner", "fact_bp_morning"),  # users/bob/agents/planner/memory.json
    ],
)
def test_show_finds_the_four_v1_locations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], user: str, agent: str, expected: str
) -> None:
    folder = tmp_path / ".deer-flow"
    shutil.copytree(V1, folder)
    config = tmp_path / "config.yaml"
    config.write_text(f"memory:\n  storage_path: {folder}\n  embeddings: none\n", "utf-8")
    assert main(["show", "--user", user, "--agent", agent, "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert expected in captured.out and "DeerFlow's files in" in captured.out
    assert "not imported yet" in captured.err
    assert main(["show", "--json", "--user", user, "--agent", agent, "--config", str(config)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert expected in {f["id"] for f in document["facts"]}
    assert not (folder / "users" / user / f"{agent}.json").exists()  # read only


def test_show_reads_heads_markdown_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"memory:\n  storage_path: {V2}\n  embeddings: none\n", "utf-8")
    assert main(["show", "--user", "dana", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "fact_d_violin" in out and "fact_d_old" in out and "Dana: workContext" in out


def test_a_storage_path_that_is_a_file_is_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "memory.json"
    blocker.write_text("{}", "utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(f"memory:\n  storage_path: {blocker}/sub\n  embeddings: none\n", "utf-8")
    for argv in (["show"], ["export"], ["import", str(V1 / "memory.json")]):
        assert main([*argv, "--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and f"{blocker} is a file" in err, err


def test_scope_locations_follow_deerflows_rules(tmp_path: Path) -> None:
    def rel(user: str, agent: str) -> list[str]:
        return [p.relative_to(tmp_path).as_posix() for p in scope_locations(tmp_path, user, agent)]

    assert rel("default", DEFAULT)[:1] == ["memory.json"]
    assert "users/default/memory.json" in rel("default", DEFAULT)
    assert "agents/planner/memory.json" in rel("default", "Planner")  # folders are lower case
    assert rel("bob", "planner")[:2] == [
        "users/bob/agents/planner/memory.json",
        "users/bob/agents/planner/facts",
    ]
    assert read_folder(V1, only=[("bob", "planner")]).scopes() == [("bob", "planner")]


def test_show_with_v200s_file_storage_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """v2.0.0's ``storage_path: memory.json`` names the global file: its folder is the storage
    (the config layer's rule), and ``show`` reads the file there."""
    folder = tmp_path / "backend"
    shutil.copytree(V1, folder)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"memory:\n  storage_path: {folder / 'memory.json'}\n  embeddings: none\n", "utf-8"
    )
    assert main(["show", "--config", str(config)]) == 0
    assert "fact_g_tea" in capsys.readouterr().out

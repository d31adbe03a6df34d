"""DeerFlow's formats both ways (``formats.deerflow``), checked against readers written here from
DeerFlow's own rules: HEAD's Markdown-fact storage (parse, per-fact validation, the summary
manifest) and the two gateway response models (HEAD's, and v2.0.0's strict ``source: str``).

DeerFlow cannot be installed here (it needs Python 3.12), so the readers below restate, rule by
rule, what its pinned ``storage.py`` accepts, and ``tests/deerflow_gateway.py`` (shared with the
manager's tests) what its ``routers/memory.py`` accepts; every test that writes a DeerFlow shape
runs its output through them.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem_middleware.formats.deerflow import (
    fact_from_markdown,
    fact_shard,
    fact_to_markdown,
    from_deerflow,
    to_deerflow,
    v2_fact_record,
    v2_manifest,
)
from deermem_middleware.formats.repair import RepairReport
from deermem_middleware.memory.document import DocumentFormatError, Fact, Memory
from tests.deerflow_files import pinned
from tests.deerflow_gateway import HeadGatewayMemory, StrictGatewayMemory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "deerflow_memory"
NOW = "2026-06-01T12:00:00Z"

# =============================================================================================
# Readers restating DeerFlow's rules (HEAD f1f4af9 storage.py; gateway routers/memory.py)
# =============================================================================================

HEAD_CORE_CATEGORIES = {
    "preference",
    "correction",
    "context",
    "goal",
    "behavior",
    "identity",
    "constraint",
    "decision",
    "other",
}
HEAD_ID_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class HeadRejects(Exception):
    """What HEAD's storage raises (``ValueError`` / ``MemoryStorageCorruption``) for a file."""


def head_parse_fact_markdown(text: str) -> dict[str, Any]:
    """HEAD's ``_parse_fact_markdown``: front matter, optional ``# title``, body as content."""
    if not text.startswith("---\n"):
        raise HeadRejects("missing YAML front matter")
    try:
        front, body = text[4:].split("\n---\n", 1)
    except ValueError as exc:
        raise HeadRejects("front matter not closed") from exc
    metadata = yaml.safe_load(front) or {}
    if not isinstance(metadata, dict):
        raise HeadRejects("front matter is not a mapping")
    lines = body.lstrip("\n").splitlines()
    title = ""
    if lines and lines[0].startswith("# "):
        title = lines.pop(0)[2:].strip()
        if lines and not lines[0].strip():
            lines.pop(0)
    metadata["title"] = title
    metadata["content"] = "\n".join(lines).rstrip("\n")
    metadata["scope"] = {
        "userId": metadata.pop("user_id", None),
        "agentName": metadata.pop("agent_name", None),
    }
    return metadata


def head_normalize_fact(fact: Any, scope: dict[str, Any]) -> dict[str, Any]:
    """HEAD's ``_normalize_fact`` for a new fact (no existing revision): every check it makes."""
    if not isinstance(fact, dict):
        raise HeadRejects("fact must be an object")
    out = copy.deepcopy(fact)
    out["id"] = str(out.get("id") or "fact_generated")
    if not out["id"] or any(c not in HEAD_ID_CHARS for c in out["id"]):
        raise HeadRejects("fact.id may contain only letters, numbers, '_' and '-'")
    if not isinstance(out.get("content"), str) or not out["content"].strip():
        raise HeadRejects("fact.content must be a non-empty string")
    out["content"] = out["content"].strip()
    category = out.get("category", "context")
    if not isinstance(category, str):
        raise HeadRejects("fact.category must be a string")
    if (category or "context") not in HEAD_CORE_CATEGORIES:
        out.setdefault("categoryExtension", category)
        out["category"] = "other"
    confidence = out.get("confidence", 0.5)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise HeadRejects("fact.confidence must be a number")
    if not 0 <= confidence <= 1:
        raise HeadRejects("fact.confidence must be between 0 and 1")
    if out.get("status", "active") != "active":
        raise HeadRejects("fact.status must be 'active'")
    for key in ("topics", "consolidatedFrom"):
        value = out.get(key, [])
        if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
            raise HeadRejects(f"fact.{key} must be a list of strings")
    if out.get("lastConfirmedAt") is not None and not isinstance(out["lastConfirmedAt"], str):
        raise HeadRejects("fact.lastConfirmedAt must be a string when present")
    count = out.get("confirmationCount")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise HeadRejects("fact.confirmationCount must be an integer >= 1")
    revision = out.get("revision", 1)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise HeadRejects("fact.revision must be an integer >= 1")
    source = out.get("source")
    if isinstance(source, dict):
        if not isinstance(source.get("type", "unknown"), str):
            raise HeadRejects("fact.source.type must be a string")
        thread = source.get("threadId")
        if thread is not None and not isinstance(thread, str):
            raise HeadRejects("fact.source.threadId must be a string or null")
    out.setdefault("createdAt", NOW)
    out.setdefault("updatedAt", out["createdAt"])
    if not isinstance(out["createdAt"], str) or not isinstance(out["updatedAt"], str):
        raise HeadRejects("fact.createdAt and fact.updatedAt must be strings")
    out["scope"] = scope
    return out


def head_load_user(root: Path, user_id: str) -> dict[str, list[dict[str, Any]]]:
    """HEAD's file storage reading one user of a v2 layout under ``root`` (its storage_path):
    the manifest must be a clean v2 one (else HEAD migrates it first), and every agent's facts
    pass ``_parse_fact_markdown`` + ``_validate_loaded_fact``, each filed where
    ``fact_file_path`` looks for it (``facts/<sha256(id)[:2]>/<id>.md``). Returns the facts per
    agent folder."""
    user_dir = root / "users" / user_id
    manifest = json.loads((user_dir / "memory.json").read_text(encoding="utf-8"))
    if not isinstance(manifest, dict):
        raise HeadRejects("manifest is not an object")
    if "facts" in manifest or manifest.get("version") != "2.0":
        raise HeadRejects("manifest needs a migration (facts inside, or not version 2.0)")
    revision = manifest.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise HeadRejects("manifest revision must be an integer")
    if not isinstance(manifest.get("lastUpdated"), str) or not manifest["lastUpdated"]:
        raise HeadRejects("manifest lastUpdated must be a time")
    for group, names in (
        ("user", ("workContext", "personalContext", "topOfMind")),
        ("history", ("recentMonths", "earlierContext", "longTermBackground")),
    ):
        for name in names:
            section = manifest[group][name]
            if not isinstance(section["summary"], str) or not isinstance(section["updatedAt"], str):
                raise HeadRejects(f"{group}.{name} must hold strings")
    facts: dict[str, list[dict[str, Any]]] = {}
    for agent_dir in sorted((user_dir / "agents").iterdir()):
        agent = agent_dir.name
        for path in sorted((agent_dir / "facts").glob("**/*.md")):
            fact = head_parse_fact_markdown(path.read_text(encoding="utf-8"))
            if str(fact.get("id")) != path.stem:
                raise HeadRejects(f"fact id mismatch for {path}")
            scope = fact["scope"]
            if scope.get("userId") != user_id or str(scope.get("agentName")).lower() != agent:
                raise HeadRejects(f"fact scope mismatch for {path}")
            if path.parent.name != hashlib.sha256(path.stem.encode()).hexdigest()[:2]:
                raise HeadRejects(f"{path} is not where fact_file_path looks for it")
            facts.setdefault(agent, []).append(head_normalize_fact(fact, scope))
    return facts


STRING_KEYS = {"id", "content", "category", "createdAt", "source", "summary", "updatedAt"}


def nulls_where_strings_belong(value: Any, path: str = "") -> list[str]:
    """Every place a key DeerFlow types as a string holds ``null`` (or anything not a str)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in STRING_KEYS and not isinstance(item, str):
                found.append(f"{path}.{key}")
            found += nulls_where_strings_belong(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += nulls_where_strings_belong(item, f"{path}[{index}]")
    return found


def check_v1_export(document: dict[str, Any]) -> None:
    """A v1.0 document DeerFlow takes: both gateways' models, HEAD's migration of every fact
    (a v1 file it finds is migrated fact by fact), no null where a string belongs, a time in
    lastUpdated, only DeerFlow's top-level keys."""
    assert set(document) == {"version", "lastUpdated", "user", "history", "facts"}
    assert document["version"] == "1.0" and document["lastUpdated"]
    assert nulls_where_strings_belong(document) == []
    StrictGatewayMemory.model_validate(document)
    HeadGatewayMemory.model_validate(document)
    for fact in document["facts"]:
        head_normalize_fact(fact, {"userId": "u", "agentName": "__default__"})


def _fact(fact_id: str, content: str, **extra: Any) -> Fact:
    return Fact(id=fact_id, content=content, **{"createdAt": "2026-01-01T00:00:00Z", **extra})


# =============================================================================================
# The readers are faithful: DeerFlow's own files pass them
# =============================================================================================


CLEAN_V1_SAMPLES = [FIXTURES / "v1-locations" / "agents" / "planner" / "memory.json"]
"""Our v1.0 fixtures with nothing to repair (the others hold facts DeerFlow's API would refuse
as they are: no id, a null confidence)."""
SAMPLES = (
    CLEAN_V1_SAMPLES
    + pinned("head", "backend", "docs", "memory-settings-sample.json")
    + pinned("v2.0.0", "memory-settings-sample.json")
)


@pytest.mark.parametrize(
    ("layout", "user"),
    [(FIXTURES / "v2-markdown", "dana")]
    + [(p, "alice") for p in pinned("layouts", "head-v2-markdown")],
)
def test_the_head_reader_accepts_deerflows_own_v2_layout(layout: Path, user: str) -> None:
    facts = head_load_user(layout, user)
    files = list((layout / "users" / user).glob("**/*.md"))
    assert sum(len(f) for f in facts.values()) == len(files) > 0


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_the_gateway_models_accept_deerflows_own_sample(sample: Path) -> None:
    data = json.loads(sample.read_text(encoding="utf-8"))
    StrictGatewayMemory.model_validate(data)
    HeadGatewayMemory.model_validate(data)


def test_the_readers_reject_what_deerflow_rejects() -> None:
    with pytest.raises(HeadRejects, match="status"):
        head_normalize_fact({"id": "f", "content": "x", "status": "superseded"}, {})
    with pytest.raises(HeadRejects, match="updatedAt"):
        head_normalize_fact({"id": "f", "content": "x", "updatedAt": None}, {})
    with pytest.raises(HeadRejects, match="confidence"):
        head_normalize_fact({"id": "f", "content": "x", "confidence": None}, {})
    with pytest.raises(ValueError, match="source"):
        StrictGatewayMemory.model_validate({"facts": [{"id": "f", "content": "x", "source": None}]})


# =============================================================================================
# from_deerflow: lenient, one fact at a time
# =============================================================================================


def test_a_fact_without_an_id_gets_a_stable_one() -> None:
    data = {"facts": [{"content": "Drinks green tea."}, {"id": "", "content": "Walks to work."}]}
    first, report = from_deerflow(data, now=NOW)
    again, _ = from_deerflow(copy.deepcopy(data), now=NOW)
    assert [f.id for f in first.facts] == [f.id for f in again.facts]  # same on every read
    assert all(f.id.startswith("fact_") for f in first.facts)
    assert [r.field for r in report.repaired] == ["facts[0].id", "facts[1].id"]
    assert not report.invalid  # DeerFlow gives such a fact an id too
    assert [f.createdAt for f in first.facts] == [NOW, NOW]  # missing: learnt now


def test_nulls_are_repaired_fact_by_fact_and_named() -> None:
    data = {
        "lastUpdated": None,
        "user": {"workContext": {"summary": None, "updatedAt": None}},
        "facts": [
            {"id": "a", "content": "Likes tea", "confidence": None, "category": None},
            {"id": "b", "content": "Uses Go", "confidence": 95},
        ],
    }
    memory, report = from_deerflow(data, where="memory.json")
    a, b = memory.facts
    assert (a.confidence, a.category, b.confidence) == (0.5, "context", 0.95)
    assert memory.lastUpdated == "" and memory.section("workContext").summary == ""
    lines = report.lines()
    assert "memory.json: facts[0].confidence: null is not a confidence; set to 0.5" in lines
    assert "memory.json: facts[0].category: null is not a category; set to 'context'" in lines
    assert report.facts_repaired == 1 and report.facts_dropped == 0 and not report.invalid


def test_bad_facts_are_dropped_one_at_a_time_never_the_document() -> None:
    data = {
        "facts": [
            {"id": "ok", "content": "Has a cat"},
            "not an object",
            {"id": "no_text", "category": "context"},
            {"id": "blank", "content": " \u200b "},
            {"id": "ok", "content": "Has a cat"},  # an equal duplicate: DeerFlow skips it too
            {"id": "ok", "content": "Has a dog"},  # same id, other text: a new id
            {"id": "lots", "content": "Rides a bike", "confidence": "lots"},
        ]
    }
    memory, report = from_deerflow(data)
    assert [f.content for f in memory.facts] == ["Has a cat", "Has a dog", "Rides a bike"]
    assert memory.facts[1].id != "ok" and memory.facts[2].confidence == 0.5
    assert report.facts_read == 7 and report.facts_kept == 3 and report.facts_dropped == 4
    dropped = {r.field: r.reason for r in report.dropped}
    assert set(dropped) == {"facts[1]", "facts[2]", "facts[3]", "facts[4]"}
    assert "no content" in dropped["facts[2]"] and "same id 'ok' and text" in dropped["facts[4]"]
    assert [d["index"] for d in report.dropped_items] == [1, 2, 3, 4]
    assert "facts[5].id" not in {r.field for r in report.invalid}
    assert "facts[6].confidence" in {r.field for r in report.invalid}
    assert report.ids_repaired == 1  # facts[5]: kept under a new id, not refused


def test_facts_as_an_id_map_and_markdown_references() -> None:
    data = {
        "facts": {
            "fact_a": {"content": "Writes Rust", "confidence": 0.9},
            "fact_b": {"id": "fact_b", "content": "Has a cat"},
            "fact_c": {"path": "agents/__default__/facts/aa/fact_c.md"},
        }
    }
    memory, report = from_deerflow(data)
    assert [f.id for f in memory.facts] == ["fact_a", "fact_b"]  # the key is the id
    (dropped,) = report.dropped
    assert dropped.field == "facts['fact_c']" and "Markdown file" in dropped.reason


def test_structured_sources_categories_and_unknown_keys() -> None:
    record = {
        "id": "fact_x",
        "content": "Uses Postgres 16, not MySQL.",
        "category": "other",
        "categoryExtension": "workflow",
        "confidence": 0.9,
        "createdAt": "2026-02-01T00:00:00Z",
        "source": {"type": "conversation", "threadId": "thread-7"},
        "sourceError": "Assumed MySQL.",
        "topics": ["database"],
        "schemaVersion": 2,
        "status": "active",
        "revision": 3,
        "scope": {"userId": "u", "agentName": "__default__"},
        "title": "Uses Postgres 16, not MySQL.",
    }
    memory, report = from_deerflow({"version": "2.0", "revision": 9, "facts": [record]})
    (fact,) = memory.facts
    assert (fact.category, fact.source, fact.status) == ("workflow", "thread-7", "active")
    extra = fact.model_extra or {}
    assert extra == {"sourceError": "Assumed MySQL.", "topics": ["database"]}
    assert memory.version == "1.0" and "revision" not in (memory.model_extra or {})
    assert not report.changed
    manual, _ = from_deerflow({"facts": [{"id": "m", "content": "x", "source": "manual"}]})
    assert manual.facts[0].manual and manual.facts[0].source is None  # a person added it


def test_not_an_object_is_the_only_whole_document_error() -> None:
    with pytest.raises(DocumentFormatError, match="list"):
        from_deerflow([1, 2])  # type: ignore[arg-type]


def test_repair_report_is_a_frozen_dataclass() -> None:
    _, report = from_deerflow({"facts": [{"content": "x"}]})
    assert isinstance(report, RepairReport)
    with pytest.raises(AttributeError):
        report.where = "elsewhere"  # type: ignore[misc]


# =============================================================================================
# to_deerflow: v1.0, nothing null where DeerFlow wants a string
# =============================================================================================


def _native() -> Memory:
    """A document as our storage holds it: manual and extracted facts, lifecycle keys, an
    inactive fact, unknown keys, no lastUpdated."""
    work = {"summary": "Backend engineer.", "updatedAt": "2026-03-01T00:00:00Z"}
    return Memory.model_validate({"user": {"workContext": work}, "facts": _native_facts()})


def _native_facts() -> tuple[Fact, ...]:
    return (
        _fact("fact_go", "Writes Go", manual=True, sourceKind="stated", updatedAt=None),
        _fact("fact_tea", "Likes tea", category="preference", source="thread-1", injections=2),
        _fact("fact_old", "Lives in Paris", status="superseded", supersededBy="fact_lyon"),
        Fact.model_validate(
            {
                "id": "fact_fix",
                "content": "Ships with pnpm",
                "category": "correction",
                "confidence": 0.95,
                "createdAt": "2026-02-01T00:00:00Z",
                "updatedAt": "2026-02-02T00:00:00Z",
                "source": "thread-2",
                "sourceError": "Suggested npm.",
            }
        ),
    )


def test_the_v1_export_is_what_both_deerflow_versions_accept() -> None:
    document = to_deerflow(_native())
    check_v1_export(document)
    facts = {f["id"]: f for f in document["facts"]}
    assert set(facts) == {"fact_go", "fact_tea", "fact_fix"}  # active only
    assert facts["fact_go"]["source"] == "manual"  # never null
    assert facts["fact_fix"]["sourceError"] == "Suggested npm."
    assert facts["fact_fix"]["updatedAt"] == "2026-02-02T00:00:00Z"
    assert "updatedAt" not in facts["fact_go"] and "status" not in facts["fact_tea"]
    assert document["lastUpdated"] == "2026-03-01T00:00:00Z"  # the newest time it knows


def test_our_native_file_is_what_heads_loader_rejects_and_the_export_fixes() -> None:
    native = _native().to_json_dict()
    old = next(f for f in native["facts"] if f["id"] == "fact_old")
    with pytest.raises(HeadRejects, match="status"):
        head_normalize_fact(old, {})
    assert all("source" not in f or f["source"] is not None for f in native["facts"])
    assert all(f.get("updatedAt", "") is not None for f in native["facts"])
    check_v1_export(to_deerflow(_native()))


def test_include_inactive_carries_the_status() -> None:
    document = to_deerflow(_native(), include_inactive=True)
    old = next(f for f in document["facts"] if f["id"] == "fact_old")
    assert old["status"] == "superseded"
    HeadGatewayMemory.model_validate(document)


def test_an_empty_memory_still_has_a_time() -> None:
    document = to_deerflow(Memory())
    assert document["lastUpdated"] and document["facts"] == []
    check_v1_export(document)


# =============================================================================================
# v2.0: Markdown facts and the summary manifest, as HEAD reads them
# =============================================================================================


def test_a_fact_file_is_what_head_reads_back(tmp_path: Path) -> None:
    for fact in _native().facts:
        if fact.status != "active":
            continue
        text = fact_to_markdown(fact, user_id="alice", agent_name="__default__")
        parsed = head_parse_fact_markdown(text)
        normalized = head_normalize_fact(parsed, parsed["scope"])
        assert normalized["content"] == fact.content
        assert parsed["scope"] == {"userId": "alice", "agentName": "__default__"}
        assert fact_from_markdown(text) == parsed  # our reader reads what HEAD's does


def test_categories_outside_heads_core_set_travel_as_an_extension() -> None:
    record = v2_fact_record(
        _fact("f", "Knows Go", category="knowledge"), user_id="u", agent_name="a"
    )
    assert (record["category"], record["categoryExtension"]) == ("other", "knowledge")
    memory, _ = from_deerflow({"facts": [record]})
    assert memory.facts[0].category == "knowledge"


def test_the_manifest_is_heads_clean_v2_shape() -> None:
    manifest = v2_manifest(_native(), revision=1)
    assert set(manifest) == {"version", "revision", "lastUpdated", "user", "history"}
    assert manifest["version"] == "2.0" and manifest["lastUpdated"]
    assert nulls_where_strings_belong(manifest) == []


@pytest.mark.parametrize(
    "path",
    sorted((FIXTURES / "v2-markdown").glob("**/*.md"))
    + [p for layout in pinned("layouts", "head-v2-markdown") for p in layout.glob("**/*.md")],
    ids=lambda p: p.name,
)
def test_every_markdown_fact_reads_and_writes_back_the_same(path: Path) -> None:
    """DeerFlow's own fact files (and ours in its shape): read, then written again, give the
    same front matter and body HEAD reads."""
    text = path.read_text(encoding="utf-8")
    original = head_parse_fact_markdown(text)
    memory, report = from_deerflow({"facts": [fact_from_markdown(text)]})
    assert not report.changed
    scope = original["scope"]
    again = fact_to_markdown(
        memory.facts[0], user_id=scope["userId"], agent_name=scope["agentName"]
    )
    assert head_parse_fact_markdown(again) == original
    assert path.parent.name == fact_shard(path.stem)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_deerflows_sample_round_trips_through_us(sample: Path) -> None:
    data = json.loads(sample.read_text(encoding="utf-8"))
    memory, report = from_deerflow(data)
    assert not report.changed
    assert to_deerflow(memory)["facts"] == data["facts"]


def test_v1_round_trip_keeps_every_fact_and_unknown_key() -> None:
    original = {
        "version": "1.0",
        "lastUpdated": "2026-03-01T00:00:00Z",
        "facts": [
            {
                "id": f"fact_{i}",
                "content": f"Fact number {i}",
                "category": category,
                "confidence": 0.5 + i / 20,
                "createdAt": f"2026-01-0{i + 1}T00:00:00Z",
                "source": source,
                **extra,  # type: ignore[dict-item]
            }
            for i, (category, source, extra) in enumerate(
                [
                    ("preference", "thread-1", {}),
                    ("workflow", "manual", {}),
                    ("correction", "thread-2", {"sourceError": "Was wrong."}),
                    ("knowledge", "unknown", {"topics": ["go"], "custom": {"k": 1}}),
                ]
            )
        ],
    }
    memory, _ = from_deerflow(copy.deepcopy(original))
    again, report = from_deerflow(to_deerflow(memory))
    assert not report.changed
    exported = to_deerflow(again)
    assert exported["facts"] == original["facts"]
    check_v1_export(exported)


def test_sections_we_do_not_model_round_trip_as_read() -> None:
    style = {"summary": "Conclusions first.", "updatedAt": "2026-01-02T00:00:00Z", "scope": "user"}
    plans = {"summary": "Moon.", "updatedAt": "", "weight": [1, 2]}
    data = {
        "version": "1.0",
        "user": {"cognitiveStyle": style},
        "history": {"futurePlans": plans},
        "facts": [],
    }
    memory, _ = from_deerflow(data)
    out = to_deerflow(memory)
    assert list(out["user"]) == ["workContext", "personalContext", "topOfMind", "cognitiveStyle"]
    assert json.dumps(out["user"]["cognitiveStyle"]) == json.dumps(style)
    assert json.dumps(out["history"]["futurePlans"]) == json.dumps(plans)
    assert v2_manifest(memory)["user"]["cognitiveStyle"] == style

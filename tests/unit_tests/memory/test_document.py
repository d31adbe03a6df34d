"""The memory document (DeerFlow v1.0 superset) and the LLM's update model."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import pytest
from pydantic import ValidationError

from deermem_middleware.memory.document import (
    FACT_CATEGORIES,
    MAX_FACT_CHARS,
    Fact,
    Memory,
    Section,
    coerce_confidence,
    new_fact_id,
)
from deermem_middleware.memory.update import MemoryUpdate, NewFact

DEERFLOW_MEMORY: dict[str, Any] = {
    "version": "1.0",
    "lastUpdated": "2026-03-14T09:30:00Z",
    "user": {
        "workContext": {
            "summary": "Senior data engineer at Acme; migrating ETL from Airflow to Dagster.",
            "updatedAt": "2026-03-14T09:30:00Z",
        },
        "personalContext": {
            "summary": "Lives in Berlin, bilingual English/Chinese, has a dog called Biscuit.",
            "updatedAt": "2026-02-01T18:00:00Z",
        },
        "topOfMind": {
            "summary": "Preparing a talk on data contracts for April.",
            "updatedAt": "2026-03-14T09:30:00Z",
        },
    },
    "history": {
        "recentMonths": {
            "summary": "Asked many questions about dbt tests and Dagster sensors.",
            "updatedAt": "2026-03-10T12:00:00Z",
        },
        "earlierContext": {"summary": "", "updatedAt": ""},
        "longTermBackground": {
            "summary": "Studied physics; moved into data work in 2019.",
            "updatedAt": "2025-11-20T08:00:00Z",
        },
    },
    "facts": [
        {
            "id": "fact_1a2b3c4d",
            "content": "Prefers Python type hints and ruff for linting",
            "category": "preference",
            "confidence": 0.9,
            "createdAt": "2026-01-05T10:00:00Z",
            "source": "thread_7f3e",
        },
        {
            "id": "fact_9e8d7c6b",
            "content": "用户喜欢喝茶",
            "category": "preference",
            "confidence": 0.85,
            "createdAt": "2026-02-01T18:00:00Z",
            "source": "thread_a001",
            "pinnedByUser": True,  # unknown key inside a fact
        },
    ],
    "customDashboardLayout": {"columns": 3, "theme": "dark"},  # unknown top-level key
}


def _contains(actual: Any, expected: Any, path: str = "$") -> None:
    """Every key/value of ``expected`` is in ``actual`` (extra keys in ``actual`` are fine)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} was lost"
            _contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{path}: length changed"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _contains(a, e, f"{path}[{index}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


# -- the stored document -----------------------------------------------------------------------


def test_deerflow_memory_loads_as_is() -> None:
    """A DeerFlow v1.0 memory.json validates and its fields are readable by name."""
    memory = Memory.from_json_dict(DEERFLOW_MEMORY)
    assert memory.version == "1.0"
    assert memory.section("workContext").summary.startswith("Senior data engineer")
    assert memory.section("longTermBackground").updatedAt == "2025-11-20T08:00:00Z"
    assert [f.id for f in memory.facts] == ["fact_1a2b3c4d", "fact_9e8d7c6b"]
    assert memory.facts[0].confidence == pytest.approx(0.9)
    assert memory.facts[1].source == "thread_a001"


def test_round_trip_keeps_every_original_key_and_value() -> None:
    """to_json_dict() is a superset of the input: known, unknown top-level and unknown fact keys."""
    original = copy.deepcopy(DEERFLOW_MEMORY)
    dumped = Memory.from_json_dict(DEERFLOW_MEMORY).to_json_dict()
    _contains(dumped, original)
    assert dumped["customDashboardLayout"] == {"columns": 3, "theme": "dark"}
    assert dumped["facts"][1]["pinnedByUser"] is True
    assert original == DEERFLOW_MEMORY, "loading must not mutate the input dict"


def test_round_trip_is_a_fixed_point() -> None:
    """Loading what we dumped gives the same document again."""
    once = Memory.from_json_dict(DEERFLOW_MEMORY).to_json_dict()
    twice = Memory.from_json_dict(once).to_json_dict()
    assert once == twice


def test_empty_document_has_all_sections() -> None:
    """A fresh Memory dumps every DeerFlow key, so DeerFlow could read it back."""
    dumped = Memory().to_json_dict()
    assert dumped["version"] == "1.0"
    assert set(dumped["user"]) >= {"workContext", "personalContext", "topOfMind"}
    assert set(dumped["history"]) >= {"recentMonths", "earlierContext", "longTermBackground"}
    assert dumped["facts"] == []


def test_stored_percentage_confidence_loads_leniently() -> None:
    """An old file with confidence 95 still loads (as 0.95), instead of failing validation."""
    fact = Fact(id="fact_x", content="likes tea", confidence=95)
    assert fact.confidence == pytest.approx(0.95)


def test_stored_models_are_frozen() -> None:
    """Loaded documents can be shared safely: assignment raises, facts are a tuple."""
    memory = Memory.from_json_dict(DEERFLOW_MEMORY)
    with pytest.raises(ValidationError):
        memory.facts[0].content = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        memory.lastUpdated = "now"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        memory.user.workContext.summary = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Section().summary = "x"  # type: ignore[misc]
    assert isinstance(memory.facts, tuple)


# -- fact ids ----------------------------------------------------------------------------------


def test_new_fact_id_has_at_least_64_random_bits() -> None:
    """fact_ + >= 16 lowercase hex characters (DeerFlow's 8 hex = 32 bits can collide)."""
    fact_id = new_fact_id()
    match = re.fullmatch(r"fact_([0-9a-f]+)", fact_id)
    assert match, fact_id
    assert len(match.group(1)) * 4 >= 64


def test_new_fact_ids_are_unique() -> None:
    ids = [new_fact_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)


# -- confidence coercion -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.9, 0.9),
        (0, 0.0),
        (1, 1.0),
        (95, 0.95),
        (150, 1.0),
        (-1, 0.0),
        ("0.8", 0.8),
        (" 0.8 ", 0.8),
        ("high", 0.9),
        ("HIGH", 0.9),
        ("low", 0.4),
        ("85%", 0.85),
        ("85", 0.85),
    ],
)
def test_coerce_confidence(value: Any, expected: float) -> None:
    assert coerce_confidence(value) == pytest.approx(expected)


@pytest.mark.parametrize("value", ["150%", "250%", "101%"])
def test_coerce_confidence_percentage_strings_above_100_clamp_to_one(value: str) -> None:
    """'150%' means "more than sure", like the number 150: it must clamp to 1, not shrink."""
    assert coerce_confidence(value) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, True, False, None, "abc", "", "nan", [0.9], {"v": 1}],
)
def test_coerce_confidence_rejects_garbage(value: Any) -> None:
    with pytest.raises(ValueError):
        coerce_confidence(value)


def test_coerced_confidence_is_always_in_unit_interval() -> None:
    for value in [-1e9, -0.5, 0, 0.3, 1, 1.0001, 42, 99.9, 100, 100.5, 1e12]:
        assert 0.0 <= coerce_confidence(value) <= 1.0


# -- the LLM's update --------------------------------------------------------------------------


def test_new_fact_truncates_overlong_content() -> None:
    """Over-long content is cut (not rejected) to at most MAX_FACT_CHARS, keeping the head."""
    content = "User likes " + "x" * (MAX_FACT_CHARS * 3)
    fact = NewFact(content=content, category="preference", confidence=0.9)
    assert len(fact.content) <= MAX_FACT_CHARS
    assert fact.content.startswith("User likes xxx")


def test_new_fact_content_at_the_limit_is_kept_whole() -> None:
    content = "y" * MAX_FACT_CHARS
    assert NewFact(content=content).content == content


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("preference", "preference"),
        ("Preferences", "preference"),
        (" GOAL ", "goal"),
        ("Skills", "knowledge"),
        ("habit", "behavior"),
        ("behaviour", "behavior"),
        ("corrections", "correction"),
        ("personal", "context"),
        ("something-weird", "context"),
    ],
)
def test_new_fact_maps_odd_categories(raw: str, expected: str) -> None:
    fact = NewFact(content="User rides a bike to work", category=raw)
    assert fact.category == expected
    assert fact.category in FACT_CATEGORIES


@pytest.mark.parametrize("content", ["", "   ", "\n\t "])
def test_new_fact_rejects_blank_content(content: str) -> None:
    with pytest.raises(ValidationError):
        NewFact(content=content, category="context", confidence=0.9)


def test_new_fact_strips_content_and_coerces_confidence() -> None:
    fact = NewFact(content="  Likes tea  ", confidence="90%")
    assert fact.content == "Likes tea"
    assert fact.confidence == pytest.approx(0.9)


def test_new_fact_rejects_nan_confidence() -> None:
    with pytest.raises(ValidationError):
        NewFact(content="Likes tea", confidence=math.nan)


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


def test_memory_update_schema_has_no_confidence_range() -> None:
    """Constrained decoders ignore float ranges and strict SDKs reject them: none in the schema."""
    schema = MemoryUpdate.model_json_schema()
    assert "confidence" in str(schema)
    for node in _walk(schema):
        confidence = node.get("properties", {}).get("confidence")
        if confidence is None:
            continue
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            assert bound not in confidence, f"confidence schema has {bound}: {confidence}"


def test_memory_update_ignores_unknown_keys_and_defaults_sections() -> None:
    update = MemoryUpdate.model_validate(
        {"newFacts": [{"content": "Likes tea", "confidence": 0.9}], "mood": "happy"}
    )
    assert not update.section("workContext").shouldUpdate
    assert [f.content for f in update.newFacts] == ["Likes tea"]
    assert not update.is_empty
    assert MemoryUpdate().is_empty

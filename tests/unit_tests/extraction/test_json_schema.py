"""The update schema: facts first, and caps that fit the model's output limit."""

from __future__ import annotations

import json

import pytest

from deermem_middleware.extraction.json_schema import (
    CHARS_PER_TOKEN,
    COMPACT,
    COMPACT_OUTPUT_TOKENS,
    FULL,
    limits_for_output,
    update_json_schema,
    worst_case_chars,
)
from deermem_middleware.memory.document import (
    MAX_FACT_CHARS,
    MAX_FACTS_PER_UPDATE,
    MAX_SUMMARY_CHARS,
)


def test_facts_come_before_the_summaries() -> None:
    """A model writes in schema order and a cut answer keeps its complete items: facts first."""
    for limits in (FULL, COMPACT):
        schema = update_json_schema(limits=limits)
        assert next(iter(schema["properties"])) == "newFacts"
        assert list(schema["properties"]) == schema["required"]
        assert schema["required"].index("newFacts") < schema["required"].index("user")


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(None, FULL), (4096, FULL), (1500, FULL), (1025, FULL), (1024, COMPACT), (256, COMPACT)],
)
def test_limits_follow_the_output_limit(tokens: int | None, expected: object) -> None:
    assert limits_for_output(tokens) is expected


def test_the_compact_worst_case_fits_its_output_limit() -> None:
    """Every string at its cap and every list full still ends inside 1,024 tokens."""
    assert worst_case_chars(COMPACT) / CHARS_PER_TOKEN <= COMPACT_OUTPUT_TOKENS
    # the full caps would not: that is why a small limit gets the compact ones
    assert worst_case_chars(FULL) / CHARS_PER_TOKEN > 4 * COMPACT_OUTPUT_TOKENS


def test_full_limits_are_what_the_document_allows() -> None:
    assert (FULL.facts, FULL.fact_chars, FULL.summary_chars) == (
        MAX_FACTS_PER_UPDATE,
        MAX_FACT_CHARS,
        MAX_SUMMARY_CHARS,
    )
    assert FULL.compact is False and COMPACT.compact is True


def test_compact_caps_reach_the_schema() -> None:
    schema = update_json_schema(string_caps=True, limits=COMPACT, fact_ids=["fact_a"])
    facts = schema["properties"]["newFacts"]
    item = facts["items"]["properties"]
    assert facts["maxItems"] == COMPACT.facts
    assert item["content"]["maxLength"] == COMPACT.fact_chars
    assert item["entities"]["maxItems"] == COMPACT.entities
    assert item["entities"]["items"]["maxLength"] == COMPACT.entity_chars
    assert item["supersedes"]["maxItems"] == COMPACT.supersedes
    assert schema["properties"]["factsToRemove"]["maxItems"] == COMPACT.removals
    summary = schema["properties"]["user"]["properties"]["workContext"]["properties"]["summary"]
    assert summary["maxLength"] == COMPACT.summary_chars
    # without string caps (OpenAI strict mode) only the list caps stay
    uncapped = json.dumps(update_json_schema(string_caps=False, limits=COMPACT))
    assert "maxLength" not in uncapped and f'"maxItems": {COMPACT.facts}' in uncapped

"""Changes by hand (``memory.manual``): pure functions, the clock and ids passed in."""

from __future__ import annotations

import json

import pytest

from deermem_middleware.formats.deerflow import to_deerflow
from deermem_middleware.memory import manual
from deermem_middleware.memory.document import MAX_FACT_CHARS, Fact, Memory

NOW = "2026-05-07T10:00:00Z"
LATER = "2026-05-08T09:30:00Z"


def _memory(*facts: Fact) -> Memory:
    return Memory(facts=facts)


def _fact(fact_id: str, content: str, **extra: object) -> Fact:
    return Fact.model_validate({"id": fact_id, "content": content, **extra})


def test_add_fact_appends_a_manual_stated_fact() -> None:
    before = _memory(_fact("fact_a", "Writes Go"))
    after = manual.add_fact(
        before,
        "  Prefers   metric units ",
        fact_id="fact_new",
        now=NOW,
        category="preference",
        confidence=0.8,
        event_at="2026-05",
        valid_until="",
    )
    assert [f.id for f in before.facts] == ["fact_a"]  # pure: the input is unchanged
    added = after.facts[-1]
    assert (added.id, added.content, added.category, added.confidence) == (
        "fact_new",
        "Prefers metric units",
        "preference",
        0.8,
    )
    assert added.manual and added.sourceKind == "stated"
    assert (added.createdAt, added.updatedAt, after.lastUpdated) == (NOW, NOW, NOW)
    assert (added.eventAt, added.validUntil) == ("2026-05", None)


def test_a_fact_added_by_hand_never_has_a_null_source() -> None:
    """DeerFlow types ``source`` as a string (v2.0.0's API rejects ``null``): stored without
    the key, written as ``"manual"`` in DeerFlow's format."""
    memory = manual.add_fact(Memory(), "Prefers tea", fact_id="fact_t", now=NOW)
    stored = json.loads(memory.model_dump_json())
    assert "source" not in stored["facts"][0]
    (exported,) = to_deerflow(memory)["facts"]
    assert exported["source"] == "manual"
    edited = manual.edit_fact(memory, "fact_t", now=LATER, confidence=0.9)
    assert to_deerflow(edited)["facts"][0]["source"] == "manual"
    learnt = _memory(_fact("fact_l", "Writes Go", source="thread-1"))
    kept = manual.edit_fact(learnt, "fact_l", now=LATER, content="Writes Rust")
    assert to_deerflow(kept)["facts"][0]["source"] == "thread-1"  # its thread is kept


def test_an_equal_active_fact_is_a_duplicate_carrying_the_clash() -> None:
    memory = _memory(
        _fact("fact_old", "User lives in Lisbon", status="superseded"),
        _fact("fact_live", "User lives in Lisbon"),
    )
    with pytest.raises(manual.DuplicateFactError) as error:
        manual.add_fact(memory, "  user LIVES in lisbon. ", fact_id="fact_x", now=NOW)
    assert error.value.fact.id == "fact_live"
    assert isinstance(error.value, ValueError)
    only_superseded = _memory(_fact("fact_old", "User lives in Lisbon", status="superseded"))
    again = manual.add_fact(only_superseded, "User lives in Lisbon", fact_id="fact_y", now=NOW)
    assert [f.id for f in again.facts] == ["fact_old", "fact_y"]


def test_edit_changes_only_the_given_fields_and_marks_manual() -> None:
    memory = _memory(
        _fact("fact_a", "Drinks green tea", category="preference", confidence=0.6, eventAt="2026"),
        _fact("fact_b", "Cycles to work"),
    )
    edited = manual.edit_fact(memory, "fact_a", now=LATER, confidence=0.95)
    fact, other = edited.facts
    assert (fact.content, fact.category, fact.confidence, fact.eventAt) == (
        "Drinks green tea",
        "preference",
        0.95,
        "2026",
    )
    assert fact.manual and fact.updatedAt == LATER and edited.lastUpdated == LATER
    assert other == memory.facts[1]
    cleared = manual.edit_fact(edited, "fact_a", now=LATER, event_at="", category=" work  ")
    assert (cleared.facts[0].eventAt, cleared.facts[0].category) == (None, "work")


def test_edit_refuses_another_facts_text_unless_told_not_to() -> None:
    memory = _memory(_fact("fact_a", "Lives in Lisbon"), _fact("fact_b", "Cycles to work"))
    with pytest.raises(manual.DuplicateFactError) as error:
        manual.edit_fact(memory, "fact_b", now=NOW, content="lives in lisbon")
    assert error.value.fact.id == "fact_a"
    same = manual.edit_fact(memory, "fact_a", now=NOW, content="Lives in Lisbon.")
    assert same.facts[0].content == "Lives in Lisbon."  # its own text is no clash
    allowed = manual.edit_fact(memory, "fact_b", now=NOW, content="Lives in Lisbon", unique=False)
    assert allowed.facts[1].content == "Lives in Lisbon"


def test_remove_and_find_name_the_missing_id() -> None:
    memory = _memory(_fact("fact_a", "Writes Go"), _fact("fact_b", "Plays chess"))
    after = manual.remove_fact(memory, "fact_a", now=NOW)
    assert [f.id for f in after.facts] == ["fact_b"] and after.lastUpdated == NOW
    assert manual.find_fact(memory, "fact_b").content == "Plays chess"
    for call in (
        lambda: manual.find_fact(after, "fact_a"),
        lambda: manual.remove_fact(after, "fact_a", now=NOW),
        lambda: manual.edit_fact(after, "fact_a", now=NOW, content="x"),
    ):
        with pytest.raises(manual.UnknownFactError) as error:
            call()
        assert error.value.fact_id == "fact_a" and isinstance(error.value, KeyError)
        assert str(error.value) == "no fact 'fact_a'"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "the fact text is blank"),
        ("   ", "the fact text is blank"),
        ("\u200b\u200d", "the fact text is blank"),
        (None, "the fact text is blank"),
        ("x" * (MAX_FACT_CHARS + 1), f"at most {MAX_FACT_CHARS}"),
    ],
)
def test_text_checks(value: object, why: str) -> None:
    with pytest.raises(manual.InvalidFactError) as error:
        manual.checked_text(value)
    assert error.value.field == "content" and why in str(error.value)
    assert manual.checked_text("  a\n b  ") == "a b"


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), float("inf"), True, "0.5", None])
def test_confidence_checks(value: object) -> None:
    with pytest.raises(manual.InvalidFactError) as error:
        manual.checked_confidence(value)
    assert error.value.field == "confidence"
    assert str(error.value) == f"expected a number from 0 to 1, got {value!r}"


def test_confidence_and_category_normalised() -> None:
    assert manual.checked_confidence(1) == 1.0 and manual.checked_confidence(0) == 0.0
    assert manual.checked_category("  ") == manual.DEFAULT_CATEGORY
    assert manual.checked_category(None) == manual.DEFAULT_CATEGORY
    assert manual.checked_category("a  b") == "a b"
    assert len(manual.checked_category("x" * 200)) < 200


def test_gone_contents_and_change_record() -> None:
    before = _memory(_fact("fact_a", "Writes Go"), _fact("fact_b", "Writes Go"))
    after = manual.remove_fact(before, "fact_a", now=NOW)
    assert manual.gone_contents(before, after) == []  # another fact still has the text
    assert manual.gone_contents(before, Memory()) == ["Writes Go"]
    record = manual.ChangeRecord(lambda m: manual.remove_fact(m, "fact_b", now=NOW))
    with pytest.raises(RuntimeError):
        _ = record.before
    record(before)  # a lost race: called again on the newer document
    newer = manual.add_fact(before, "Plays chess", fact_id="fact_c", now=NOW)
    saved = record(newer)
    assert record.before is newer and record.after is saved

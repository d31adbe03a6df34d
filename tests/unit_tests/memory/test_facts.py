"""The pure update core: fact algebra (facts.py), sections (summaries.py), apply.py."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deermem_middleware.memory.apply import apply_sections, apply_update
from deermem_middleware.memory.document import SECTION_FIELDS, Fact, Memory, Watermark, utc_now_iso
from deermem_middleware.memory.facts import apply_facts, normalize_fact_text, trim_facts
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.memory.watermark import MAX_WATERMARKS, advance_watermark

NOW = datetime(2026, 4, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-04-01T12:00:00Z"
EARLIER = "2026-01-01T00:00:00Z"


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"fact_new{next(counter):03d}"


def fact(fact_id: str, content: str, confidence: float = 0.8, **extra: Any) -> Fact:
    return Fact(
        id=fact_id,
        content=content,
        category=extra.pop("category", "preference"),
        confidence=confidence,
        createdAt=extra.pop("createdAt", EARLIER),
        **extra,
    )


def new(content: str, confidence: float = 0.9, category: str = "preference") -> NewFact:
    return NewFact(content=content, confidence=confidence, category=category)


def run(
    facts: list[Fact],
    new_facts: Sequence[NewFact] = (),
    remove: Sequence[str] = (),
    *,
    threshold: float = 0.7,
    max_facts: int = 100,
) -> tuple[list[Fact], Any]:
    return apply_facts(
        facts,
        new_facts,
        remove,
        now=NOW,
        threshold=threshold,
        max_facts=max_facts,
        source="thread-1",
        id_factory=ids(),
    )


def update(
    sections: dict[str, tuple[bool, str]] | None = None,
    facts: list[dict[str, Any]] | None = None,
    remove: list[str] | None = None,
) -> MemoryUpdate:
    data: dict[str, Any] = {"user": {}, "history": {}}
    for name, (should, summary) in (sections or {}).items():
        group = "user" if name in SECTION_FIELDS[:3] else "history"
        data[group][name] = {"shouldUpdate": should, "summary": summary}
    data["newFacts"] = facts or []
    data["factsToRemove"] = remove or []
    return MemoryUpdate.model_validate(data)


# -- adding ------------------------------------------------------------------------------------


def test_new_fact_is_added_with_stamp_source_and_injected_id() -> None:
    result, changes = run([], [new("Drinks green tea every morning", 0.85, "behavior")])
    assert len(result) == 1
    added = result[0]
    assert added.id == "fact_new001"
    assert added.content == "Drinks green tea every morning"
    assert added.category == "behavior"
    assert added.confidence == pytest.approx(0.85)
    assert added.createdAt == STAMP
    assert added.source == "thread-1"
    assert changes.added == ["fact_new001"]
    assert changes.changed


def test_threshold_filters_low_confidence_facts() -> None:
    """Below threshold is dropped and counted; exactly at the threshold is kept."""
    result, changes = run(
        [],
        [new("Maybe likes jazz", 0.69), new("Likes jazz", 0.7), new("Hates jazz", 0.2)],
        threshold=0.7,
    )
    assert [f.content for f in result] == ["Likes jazz"]
    assert changes.below_threshold == 2
    assert changes.added == ["fact_new001"]


# -- duplicates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        "user prefers python",
        "USER PREFERS PYTHON",
        "  User   prefers\tPython  ",
        "User prefers Python.",
        "User prefers Python!!",
        "Ｕｓｅｒ　ｐｒｅｆｅｒｓ　Ｐｙｔｈｏｎ",  # full-width letters and ideographic space
    ],
)
def test_duplicate_after_normalisation_reinforces(variant: str) -> None:
    """No new fact: the known one gets max(confidence) and updatedAt = now, id unchanged."""
    known = fact("fact_py", "User prefers Python", 0.75)
    result, changes = run([known], [new(variant, 0.95)])
    assert len(result) == 1
    assert result[0].id == "fact_py"
    assert result[0].content == "User prefers Python"
    assert result[0].confidence == pytest.approx(0.95)
    assert result[0].updatedAt == STAMP
    assert result[0].createdAt == EARLIER
    assert changes.reinforced == ["fact_py"]
    assert changes.added == []


def test_reinforcement_never_lowers_confidence() -> None:
    known = fact("fact_py", "User prefers Python", 0.92)
    result, changes = run([known], [new("user prefers python.", 0.75)])
    assert result[0].confidence == pytest.approx(0.92)
    assert result[0].updatedAt == STAMP
    assert changes.reinforced == ["fact_py"]


def test_duplicates_within_one_update_collapse() -> None:
    result, changes = run([], [new("Owns a cat", 0.8), new("owns a cat.", 0.9)])
    assert len(result) == 1
    assert result[0].confidence == pytest.approx(0.9)
    assert changes.added == ["fact_new001"]
    assert changes.reinforced == []


def test_a_fact_reinforced_twice_is_reported_once() -> None:
    """FactChanges lists each reinforced fact once (its counts feed the update report)."""
    known = fact("fact_tea", "Likes tea", 0.8)
    result, changes = run([known], [new("likes tea", 0.85), new("Likes tea.", 0.9)])
    assert len(result) == 1
    assert result[0].confidence == pytest.approx(0.9)
    assert changes.reinforced == ["fact_tea"]


def test_normalize_fact_text() -> None:
    assert normalize_fact_text("  Ｈｅｌｌｏ   World. ") == "hello world"
    assert normalize_fact_text("用户喜欢喝茶。") == "用户喜欢喝茶"
    assert normalize_fact_text("...") == "..."  # nothing but punctuation: kept, not emptied


def test_different_facts_are_not_merged() -> None:
    known = fact("fact_py", "User prefers Python", 0.8)
    result, changes = run([known], [new("User prefers Rust", 0.8)])
    assert [f.content for f in result] == ["User prefers Python", "User prefers Rust"]
    assert changes.reinforced == []


# -- removal -----------------------------------------------------------------------------------


def test_remove_by_id_and_report_unknown_ids() -> None:
    facts = [fact("fact_a", "Lives in Paris"), fact("fact_b", "Works at Acme")]
    result, changes = run(facts, [], ["fact_a", "fact_ghost", "fact_zzz"])
    assert [f.id for f in result] == ["fact_b"]
    assert changes.removed == ["fact_a"]
    assert sorted(changes.unknown_removals) == ["fact_ghost", "fact_zzz"]
    assert changes.changed


def test_unknown_removals_only_change_nothing() -> None:
    facts = [fact("fact_a", "Lives in Paris")]
    result, changes = run(facts, [], ["fact_ghost"])
    assert result == facts
    assert changes.unknown_removals == ["fact_ghost"]
    assert not changes.changed


def test_removal_then_re_add_in_same_update() -> None:
    """A correction: remove the old fact, add the new one (removal applies first)."""
    facts = [fact("fact_a", "Lives in Paris")]
    result, _ = run(facts, [new("Lives in Lisbon", 0.9, "correction")], ["fact_a"])
    assert [f.content for f in result] == ["Lives in Lisbon"]


# -- trimming ----------------------------------------------------------------------------------


def test_trim_keeps_most_confident_then_most_recent_in_original_order() -> None:
    facts = [
        fact("f1", "one", 0.70, createdAt="2026-01-01T00:00:00Z"),
        fact("f2", "two", 0.95, createdAt="2026-01-01T00:00:00Z"),
        fact("f3", "three", 0.80, createdAt="2026-01-01T00:00:00Z"),
        fact("f4", "four", 0.80, createdAt="2026-03-01T00:00:00Z"),
        fact("f5", "five", 0.80, createdAt="2025-06-01T00:00:00Z", updatedAt=STAMP),
    ]
    kept, dropped = trim_facts(facts, 3)
    assert [f.id for f in kept] == ["f2", "f4", "f5"]
    assert {f.id for f in dropped} == {"f1", "f3"}


def test_trim_under_the_cap_keeps_everything() -> None:
    facts = [fact("f1", "one"), fact("f2", "two")]
    kept, dropped = trim_facts(facts, 5)
    assert kept == facts
    assert dropped == []


def test_apply_facts_trims_to_max_facts_and_reports() -> None:
    facts = [fact(f"f{i}", f"fact number {i}", 0.71 + i / 100) for i in range(5)]
    result, changes = run(facts, [new("brand new and sure", 0.99)], max_facts=3)
    assert len(result) == 3
    assert [f.id for f in result] == ["f3", "f4", "fact_new001"]
    assert sorted(changes.trimmed) == ["f0", "f1", "f2"]
    assert changes.added == ["fact_new001"]


def test_a_new_fact_trimmed_at_once_is_not_reported_as_added() -> None:
    facts = [fact(f"f{i}", f"fact number {i}", 0.95) for i in range(3)]
    result, changes = run(facts, [new("weak but above threshold", 0.75)], max_facts=3)
    assert [f.id for f in result] == ["f0", "f1", "f2"]
    assert changes.added == []
    assert changes.trimmed == ["fact_new001"]


# -- purity ------------------------------------------------------------------------------------


def test_inputs_are_never_mutated() -> None:
    facts = [fact("fact_a", "Lives in Paris", 0.8), fact("fact_b", "User prefers Python", 0.75)]
    snapshot = [f.model_dump() for f in facts]
    proposals = [new("user prefers python", 0.99), new("Plays chess", 0.9)]
    proposal_snapshot = [p.model_dump() for p in proposals]
    remove = ["fact_a"]
    result, _ = run(facts, proposals, remove, max_facts=1)
    assert [f.model_dump() for f in facts] == snapshot
    assert [p.model_dump() for p in proposals] == proposal_snapshot
    assert remove == ["fact_a"]
    assert result is not facts

    memory = Memory(facts=tuple(facts))
    before = memory.to_json_dict()
    apply_update(
        memory,
        update(sections={"workContext": (True, "New job")}, facts=[{"content": "x y z"}]),
        now=NOW,
        threshold=0.0,
        max_facts=100,
        id_factory=ids(),
    )
    assert memory.to_json_dict() == before


# -- sections ----------------------------------------------------------------------------------


def _memory_with_sections() -> Memory:
    return Memory.from_json_dict(
        {
            "user": {
                "workContext": {"summary": "Data engineer at Acme", "updatedAt": EARLIER},
                "personalContext": {"summary": "Lives in Berlin", "updatedAt": EARLIER},
            },
            "history": {"recentMonths": {"summary": "Asked about dbt", "updatedAt": EARLIER}},
        }
    )


def test_sections_replaced_only_when_should_update_and_non_blank() -> None:
    memory = _memory_with_sections()
    result, changed = apply_sections(
        memory,
        update(
            sections={
                "workContext": (True, "  Staff engineer at Globex  "),
                "personalContext": (True, "   "),  # blank: a slip, not an erase
                "topOfMind": (False, "Ignored because shouldUpdate is false"),
                "recentMonths": (True, "Migrating to Dagster"),
            }
        ),
        now=NOW,
    )
    assert sorted(changed) == ["recentMonths", "workContext"]
    assert result.section("workContext").summary == "Staff engineer at Globex"
    assert result.section("workContext").updatedAt == STAMP
    assert result.section("recentMonths").summary == "Migrating to Dagster"
    assert result.section("recentMonths").updatedAt == STAMP
    assert result.section("personalContext").summary == "Lives in Berlin"
    assert result.section("personalContext").updatedAt == EARLIER
    assert result.section("topOfMind").summary == ""
    assert memory.section("workContext").summary == "Data engineer at Acme"  # input untouched


def test_identical_summary_is_not_a_change() -> None:
    memory = _memory_with_sections()
    result, changed = apply_sections(
        memory, update(sections={"workContext": (True, "Data engineer at Acme")}), now=NOW
    )
    assert changed == []
    assert result.section("workContext").updatedAt == EARLIER


# -- whole update ------------------------------------------------------------------------------


def _apply(memory: Memory, upd: MemoryUpdate) -> tuple[Memory, Any]:
    return apply_update(
        memory, upd, now=NOW, threshold=0.7, max_facts=100, source="t1", id_factory=ids()
    )


def test_apply_update_moves_last_updated_when_something_changed() -> None:
    memory = _memory_with_sections().model_copy(update={"lastUpdated": EARLIER})
    result, report = _apply(memory, update(facts=[{"content": "Plays chess", "confidence": 0.9}]))
    assert report.changed
    assert result.lastUpdated == STAMP
    assert [f.content for f in result.facts] == ["Plays chess"]
    assert report.summary()["added"] == 1


def test_apply_update_section_only_moves_last_updated() -> None:
    memory = _memory_with_sections().model_copy(update={"lastUpdated": EARLIER})
    result, report = _apply(memory, update(sections={"topOfMind": (True, "Talk prep")}))
    assert report.sections == ["topOfMind"]
    assert result.lastUpdated == STAMP


@pytest.mark.parametrize(
    "upd",
    [
        update(),
        update(facts=[{"content": "Maybe likes jazz", "confidence": 0.3}]),
        update(remove=["fact_ghost"]),
        update(sections={"workContext": (True, ""), "topOfMind": (False, "x")}),
    ],
    ids=["empty", "below-threshold", "unknown-removal", "no-effective-section"],
)
def test_apply_update_leaves_last_updated_when_nothing_changed(upd: MemoryUpdate) -> None:
    memory = _memory_with_sections().model_copy(
        update={"lastUpdated": EARLIER, "facts": (fact("fact_a", "Lives in Paris"),)}
    )
    result, report = _apply(memory, upd)
    assert not report.changed
    assert result.lastUpdated == EARLIER
    assert result.to_json_dict() == memory.to_json_dict()


def test_apply_update_reinforcement_counts_as_change() -> None:
    memory = Memory(facts=(fact("fact_a", "Lives in Paris", 0.8),), lastUpdated=EARLIER)
    result, report = _apply(memory, update(facts=[{"content": "lives in paris", "confidence": 1}]))
    assert report.facts.reinforced == ["fact_a"]
    assert result.lastUpdated == STAMP
    assert result.facts[0].confidence == pytest.approx(1.0)


def test_unknown_keys_survive_an_update() -> None:
    """Extra keys written by DeerFlow or a newer version are kept through reinforcement."""
    memory = Memory.from_json_dict(
        {
            "customTopLevel": {"a": 1},
            "facts": [
                {"id": "fact_a", "content": "Likes tea", "confidence": 0.8, "pinned": True},
                {"id": "fact_b", "content": "Owns a cat", "confidence": 0.8, "note": "x"},
            ],
        }
    )
    result, _ = _apply(
        memory,
        update(
            sections={"workContext": (True, "Engineer")},
            facts=[{"content": "likes tea", "confidence": 0.95}],
        ),
    )
    dumped = result.to_json_dict()
    assert dumped["customTopLevel"] == {"a": 1}
    assert dumped["facts"][0]["pinned"] is True
    assert dumped["facts"][0]["confidence"] == pytest.approx(0.95)
    assert dumped["facts"][1]["note"] == "x"


# -- watermarks --------------------------------------------------------------------------------


def test_advance_watermark_records_turn_and_accumulates_count() -> None:
    memory = advance_watermark(Memory(), "thread-1", "id:m4", count=4, now=NOW)
    later = NOW + timedelta(minutes=5)
    memory = advance_watermark(memory, "thread-1", "id:m6", count=2, now=later)
    mark = memory.watermarks["thread-1"]
    assert mark.turn == "id:m6"
    assert mark.count == 6
    assert mark.updatedAt == utc_now_iso(later)


def test_advance_watermark_caps_and_keeps_most_recent() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    order = list(range(MAX_WATERMARKS))
    random.Random(7).shuffle(order)  # insertion order != age order
    marks = {
        f"thread-{i}": Watermark(
            turn=f"fp{i}", count=1, updatedAt=utc_now_iso(base + timedelta(minutes=i))
        )
        for i in order
    }
    memory = Memory(watermarks=marks)
    result = advance_watermark(memory, "thread-new", "fp-new", count=1, now=NOW)
    assert len(result.watermarks) == MAX_WATERMARKS
    assert "thread-new" in result.watermarks
    assert "thread-0" not in result.watermarks  # the oldest is forgotten
    assert "thread-1" in result.watermarks
    assert f"thread-{MAX_WATERMARKS - 1}" in result.watermarks
    assert len(memory.watermarks) == MAX_WATERMARKS  # input untouched
    assert "thread-new" not in memory.watermarks


def test_advance_watermark_existing_thread_at_cap_keeps_all() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    marks = {
        f"thread-{i}": Watermark(
            turn="fp", count=1, updatedAt=utc_now_iso(base + timedelta(minutes=i))
        )
        for i in range(MAX_WATERMARKS)
    }
    result = advance_watermark(Memory(watermarks=marks), "thread-0", "fp2", count=1, now=NOW)
    assert set(result.watermarks) == set(marks)
    assert result.watermarks["thread-0"].turn == "fp2"

"""The memory lifecycle: near-duplicates, confirmations, supersede, decay, archive, manual facts.

Everything here is pure with a frozen clock (``NOW``): each test states one rule.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deermem_middleware.extraction.extractor import (
    parse_update,
    prompt_facts,
    render_extraction_messages,
    update_json_schema,
)
from deermem_middleware.extraction.prompt import load_prompt
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.decay import (
    DEFAULT_ARCHIVE_FLOOR,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_HALF_LIVES,
    archive_decayed,
    effective_confidence,
    half_life_days,
    is_active,
    last_confirmed,
    parse_timestamp,
    recency_weight,
)
from deermem_middleware.memory.document import MAX_SUPERSEDES_PER_FACT, Fact, Memory, utc_now_iso
from deermem_middleware.memory.facts import (
    NEAR_DUPLICATE_THRESHOLD,
    FactChanges,
    apply_facts,
    fact_similarity,
    is_near_duplicate,
    trim_facts,
)
from deermem_middleware.memory.update import MemoryUpdate, NewFact

NOW = datetime(2026, 4, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-04-01T12:00:00Z"
EARLIER = "2026-03-01T00:00:00Z"


def days_ago(days: float) -> str:
    return utc_now_iso(NOW - timedelta(days=days))


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"fact_new{next(counter):03d}"


def fact(fact_id: str, content: str, confidence: float = 0.8, **extra: Any) -> Fact:
    extra.setdefault("category", "preference")
    extra.setdefault("createdAt", EARLIER)
    return Fact(id=fact_id, content=content, confidence=confidence, **extra)


def new(content: str, confidence: float = 0.9, **extra: Any) -> NewFact:
    extra.setdefault("category", "preference")
    return NewFact.model_validate({"content": content, "confidence": confidence, **extra})


def run(
    facts: Sequence[Fact],
    proposals: Sequence[NewFact] = (),
    remove: Sequence[str] = (),
    *,
    max_facts: int = 100,
    archive_floor: float | None = None,
    now: datetime = NOW,
) -> tuple[list[Fact], FactChanges]:
    return apply_facts(
        facts,
        proposals,
        remove,
        now=now,
        threshold=0.7,
        max_facts=max_facts,
        source="thread-2",
        id_factory=ids(),
        archive_floor=archive_floor,
    )


def by_id(facts: Sequence[Fact]) -> dict[str, Fact]:
    return {f.id: f for f in facts}


# -- near-duplicates reinforce -------------------------------------------------------------------

REWORDINGS = [
    ("User prefers dark mode", "The user prefers dark mode."),
    ("User prefers dark mode", "User prefer dark mode"),
    (
        "User drinks green tea every morning before starting work",
        "User drinks green tea every single morning before starting work",
    ),
    (
        "User enjoys hiking in the Swiss Alps with friends during the summer holidays",
        "User enjoys hiking in the Swiss Alps with old friends during the summer holidays",
    ),
]

DIFFERENT = [
    ("User uses MySQL", "User uses PostgreSQL"),
    ("User has 2 kids", "User has 3 kids"),
    ("User prefers dark mode", "User prefers light mode"),
    ("User likes coffee", "User doesn't like coffee"),
    ("User is a senior engineer", "User is a senior engineer now"),
    (
        "User drinks green tea every morning before starting work",
        "User drinks a cup of green tea every morning before starting work",
    ),
    (
        "User uses MySQL for all of the backend services at work",
        "User uses PostgreSQL for all of the backend services at work",
    ),
    ("用户喜欢喝茶", "用户喜欢喝绿茶"),
]


@pytest.mark.parametrize(("known", "restated"), REWORDINGS)
def test_near_duplicate_reinforces_the_known_fact(known: str, restated: str) -> None:
    """Confidence = max, updatedAt = lastConfirmedAt = now, confirmations + 1, text kept."""
    original = fact("fact_a", known, 0.75)
    result, changes = run([original], [new(restated, 0.95)])
    assert len(result) == 1
    [reinforced] = result
    assert reinforced.id == "fact_a"
    assert reinforced.content == known
    assert reinforced.confidence == pytest.approx(0.95)
    assert reinforced.updatedAt == STAMP
    assert reinforced.lastConfirmedAt == STAMP
    assert reinforced.confirmations == 1
    assert reinforced.createdAt == EARLIER
    assert changes.reinforced == ["fact_a"]
    assert changes.added == []


@pytest.mark.parametrize(("known", "other"), DIFFERENT)
def test_different_facts_are_added_not_merged(known: str, other: str) -> None:
    original = fact("fact_a", known)
    result, changes = run([original], [new(other)])
    assert [f.content for f in result] == [known, other]
    assert result[0] == original
    assert changes.reinforced == []
    assert changes.added == ["fact_new001"]


def test_threshold_has_rewordings_above_and_different_facts_below() -> None:
    """The chosen threshold separates the two lists above (margins stated, not assumed)."""
    assert NEAR_DUPLICATE_THRESHOLD == 0.85
    for a, b in REWORDINGS:
        assert fact_similarity(a, b) >= NEAR_DUPLICATE_THRESHOLD, (a, b)
        assert is_near_duplicate(a, b)
    for a, b in DIFFERENT:
        assert not is_near_duplicate(a, b), (a, b)
    assert fact_similarity("User uses MySQL", "User uses PostgreSQL") < 0.4
    # just below: one inserted phrase in a short sentence is new information
    assert 0.8 < fact_similarity(*DIFFERENT[4]) < NEAR_DUPLICATE_THRESHOLD
    assert 0.8 < fact_similarity(*DIFFERENT[5]) < NEAR_DUPLICATE_THRESHOLD


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "User works at Acme as a senior backend engineer since 2021",
            "User works at Acme as a senior backend engineer since 2022",
        ),
        (
            "User prefers Python over Java for all of their backend services",
            "User prefers Java over Python for all of their backend services",
        ),
        (
            "User's daughter Emma is learning to play the piano and the violin at the music school "
            "in Lyon every Tuesday afternoon",
            "User's son Emma is learning to play the piano and the violin at the music school "
            "in Lyon every Tuesday afternoon",
        ),
        (
            "User enjoys hiking in the Swiss Alps with friends during the summer holidays",
            "User does not enjoy hiking in the Swiss Alps with friends during the summer holidays",
        ),
    ],
    ids=["number", "word-order", "word-replaced", "negation"],
)
def test_guards_keep_similar_but_different_facts_apart(a: str, b: str) -> None:
    """Character n-grams cannot see these differences; the guards do."""
    assert fact_similarity(a, b) >= NEAR_DUPLICATE_THRESHOLD
    assert not is_near_duplicate(a, b)
    result, changes = run([fact("fact_a", a)], [new(b)])
    assert len(result) == 2
    assert changes.reinforced == []


def test_exact_match_is_the_special_case_and_counts_a_confirmation() -> None:
    result, changes = run([fact("fact_a", "Likes tea", 0.9)], [new("likes tea.", 0.8)])
    assert result[0].confidence == pytest.approx(0.9)  # max, never lowered
    assert result[0].confirmations == 1
    assert result[0].lastConfirmedAt == STAMP
    assert changes.reinforced == ["fact_a"]


def test_the_most_similar_fact_is_reinforced() -> None:
    facts = [
        fact("fact_far", "User drinks green tea every morning before starting work"),
        fact("fact_near", "User drinks green tea every single morning before starting work"),
    ]
    result, changes = run(
        facts, [new("The user drinks green tea every single morning before starting work.")]
    )
    assert changes.reinforced == ["fact_near"]
    assert by_id(result)["fact_far"] == facts[0]


# -- confirmations -------------------------------------------------------------------------------


def test_confirmations_count_one_per_update() -> None:
    facts = [fact("fact_a", "User prefers dark mode", 0.8)]
    for day in range(1, 4):
        facts, _ = run(facts, [new("The user prefers dark mode")], now=NOW + timedelta(days=day))
    assert facts[0].confirmations == 3
    assert facts[0].lastConfirmedAt == utc_now_iso(NOW + timedelta(days=3))

    # said twice in one conversation: one confirmation, reported once
    result, changes = run(facts, [new("User prefers dark mode"), new("user prefers dark mode.")])
    assert result[0].confirmations == 4
    assert changes.reinforced == ["fact_a"]


def test_a_new_fact_restated_in_the_same_update_is_not_a_confirmation() -> None:
    result, changes = run([], [new("Owns a cat", 0.8), new("The user owns a cat.", 0.9)])
    assert len(result) == 1
    assert result[0].confirmations == 0
    assert result[0].lastConfirmedAt is None
    assert result[0].confidence == pytest.approx(0.9)
    assert changes.added == ["fact_new001"]
    assert changes.reinforced == []


def test_confirmation_moves_decay_clock() -> None:
    """A fact confirmed today no longer counts as old."""
    old = fact("fact_a", "User prefers dark mode", 0.8, createdAt=days_ago(360))
    assert effective_confidence(old, NOW) == pytest.approx(0.2)
    [confirmed], _ = run([old], [new("User prefers dark mode", 0.8)])
    assert effective_confidence(confirmed, NOW) == pytest.approx(0.8)


# -- supersede -----------------------------------------------------------------------------------


def test_supersede_keeps_the_old_fact_for_audit_and_links_it() -> None:
    mysql = fact("fact_mysql", "User uses MySQL", 0.9, category="context")
    other = fact("fact_tea", "Likes tea")
    result, changes = run(
        [mysql, other],
        [new("User uses PostgreSQL", 0.95, category="context", supersedes=["fact_mysql"])],
    )
    facts = by_id(result)
    assert set(facts) == {"fact_mysql", "fact_tea", "fact_new001"}
    old = facts["fact_mysql"]
    assert old.status == "superseded"
    assert old.supersededBy == "fact_new001"
    assert old.updatedAt == STAMP
    assert (old.content, old.confidence, old.createdAt) == ("User uses MySQL", 0.9, EARLIER)
    assert facts["fact_new001"].status == "active"
    assert facts["fact_tea"] == other
    assert changes.superseded == ["fact_mysql"]
    assert changes.added == ["fact_new001"]
    assert changes.changed
    dumped = old.model_dump(mode="json")
    assert dumped["status"] == "superseded" and dumped["supersededBy"] == "fact_new001"


def test_supersede_by_a_restated_fact_links_to_the_known_one() -> None:
    facts = [fact("fact_mysql", "User uses MySQL"), fact("fact_pg", "User uses PostgreSQL")]
    result, changes = run(facts, [new("The user uses PostgreSQL", supersedes=["fact_mysql"])])
    assert by_id(result)["fact_mysql"].supersededBy == "fact_pg"
    assert changes.reinforced == ["fact_pg"]
    assert changes.added == []


@pytest.mark.parametrize("bad_id", ["fact_ghost", "fact_manual"])
def test_supersede_of_unknown_or_manual_id_is_ignored_and_reported(bad_id: str) -> None:
    manual = fact("fact_manual", "User uses MySQL", manual=True)
    result, changes = run([manual], [new("User uses PostgreSQL", supersedes=[bad_id])])
    assert by_id(result)["fact_manual"] == manual
    assert [f.content for f in result] == ["User uses MySQL", "User uses PostgreSQL"]
    assert changes.superseded == []
    if bad_id == "fact_ghost":
        assert changes.unknown_supersedes == ["fact_ghost"]
        assert changes.kept_manual == []
    else:
        assert changes.kept_manual == ["fact_manual"]
        assert changes.unknown_supersedes == []


def test_supersede_ignores_itself_already_superseded_removed_and_dropped_proposals() -> None:
    facts = [
        fact("fact_old", "User uses MySQL", status="superseded", supersededBy="fact_x"),
        fact("fact_gone", "User uses Oracle"),
        fact("fact_keep", "User uses SQLite"),
    ]
    result, changes = run(
        facts,
        [
            new("User uses PostgreSQL", supersedes=["fact_old", "fact_gone", "fact_new001"]),
            new("User might use DuckDB", 0.5, supersedes=["fact_keep"]),  # below threshold
        ],
        remove=["fact_gone"],
    )
    kept = by_id(result)
    assert kept["fact_old"].supersededBy == "fact_x"  # the first link is the history
    assert "fact_gone" not in kept
    assert kept["fact_keep"].status == "active"
    assert changes.superseded == []
    assert changes.unknown_supersedes == []
    assert changes.removed == ["fact_gone"]


def test_superseded_facts_are_history_and_never_reinforced() -> None:
    """The user goes back to MySQL: a new fact, the old record stays as it was."""
    old = fact("fact_old", "User uses MySQL", status="superseded", supersededBy="fact_pg")
    result, changes = run([old], [new("User uses MySQL")])
    assert result[0] == old
    assert result[1].content == "User uses MySQL" and result[1].status == "active"
    assert changes.added == ["fact_new001"]


# -- decay ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("category", "half_life"),
    [("preference", 180), ("knowledge", 365), ("context", 90), ("behavior", 120), ("goal", 60)],
)
def test_confidence_halves_every_half_life(category: str, half_life: float) -> None:
    assert DEFAULT_HALF_LIVES[category] == half_life
    for periods in (0, 1, 2, 0.5):
        old = fact("f", "x", 0.8, category=category, createdAt=days_ago(half_life * periods))
        expected = 0.8 * 0.5**periods
        assert effective_confidence(old, NOW) == pytest.approx(expected)
        assert recency_weight(old, NOW) == pytest.approx(0.5**periods)


def test_correction_never_decays() -> None:
    ancient = fact("f", "Name is spelled Zoë", 0.9, category="correction", createdAt=days_ago(9999))
    assert math.isinf(half_life_days("correction"))
    assert effective_confidence(ancient, NOW) == pytest.approx(0.9)
    assert recency_weight(ancient, NOW) == 1.0


def test_age_counts_from_the_latest_of_confirmed_updated_created() -> None:
    f = fact("f", "x", 0.8, category="goal", createdAt=days_ago(600), updatedAt=days_ago(120))
    assert effective_confidence(f, NOW) == pytest.approx(0.2)  # two goal half-lives
    confirmed = f.model_copy(update={"lastConfirmedAt": days_ago(60)})
    assert effective_confidence(confirmed, NOW) == pytest.approx(0.4)
    assert last_confirmed(confirmed) == NOW - timedelta(days=60)


@pytest.mark.parametrize(
    "dates",
    [
        {"createdAt": ""},
        {"createdAt": "yesterday-ish"},
        {"createdAt": "", "updatedAt": None, "lastConfirmedAt": "not a date"},
        {"createdAt": utc_now_iso(NOW + timedelta(days=30))},  # clock skew: no negative age
    ],
)
def test_unusable_dates_mean_no_decay(dates: dict[str, Any]) -> None:
    f = fact("f", "x", 0.8, category="goal", **dates)
    assert effective_confidence(f, NOW) == pytest.approx(0.8)


def test_a_bad_date_does_not_hide_a_good_one() -> None:
    f = fact("f", "x", 0.8, category="goal", createdAt=days_ago(60), lastConfirmedAt="garbage")
    assert effective_confidence(f, NOW) == pytest.approx(0.4)


def test_half_life_overrides_unknown_categories_and_off_switch() -> None:
    f = fact("f", "x", 0.8, category="preference", createdAt=days_ago(30))
    assert effective_confidence(f, NOW, {"preference": 30}) == pytest.approx(0.4)
    assert effective_confidence(f, NOW, {"goal": 1}) == pytest.approx(0.8 * 0.5 ** (30 / 180))
    for off in (0, -1, math.inf):
        assert effective_confidence(f, NOW, {"preference": off}) == pytest.approx(0.8)
    odd = fact("f", "x", 0.8, category="hobby", createdAt=days_ago(DEFAULT_HALF_LIFE_DAYS))
    assert effective_confidence(odd, NOW) == pytest.approx(0.4)
    assert effective_confidence(odd, NOW, default_half_life_days=0) == pytest.approx(0.8)


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("2026-04-01T12:00:00Z") == NOW
    assert parse_timestamp("2026-04-01T14:00:00+02:00") == NOW
    assert parse_timestamp("2026-04-01T12:00:00") == NOW  # naive: UTC
    assert parse_timestamp("") is None
    assert parse_timestamp(None) is None
    assert parse_timestamp("soon") is None


# -- archive -------------------------------------------------------------------------------------


def test_archive_below_the_floor_only() -> None:
    # goal, confidence 0.8: effective 0.4 after 60 days, 0.2 after 120, floor 0.3
    young = fact("f_young", "Wants to learn Rust", category="goal", createdAt=days_ago(60))
    old = fact("f_old", "Wants to run a marathon", category="goal", createdAt=days_ago(120))
    gone = fact(
        "f_gone", "Wants a cat", category="goal", createdAt=days_ago(400), status="archived"
    )
    result, archived = archive_decayed([young, old, gone], NOW, DEFAULT_ARCHIVE_FLOOR)
    assert archived == ["f_old"]
    assert [f.status for f in result] == ["active", "archived", "archived"]
    assert result[1].updatedAt == old.updatedAt  # dates keep telling the real age
    assert old.status == "active"  # input untouched
    assert not is_active(result[1])


def test_archive_exact_floor_is_kept() -> None:
    at_floor = fact("f", "x", 0.6, category="goal", createdAt=days_ago(60))  # exactly 0.3
    _, archived = archive_decayed([at_floor], NOW, 0.3)
    assert archived == []


def test_archive_never_takes_manual_or_correction_facts() -> None:
    manual = fact("f_manual", "x", category="goal", createdAt=days_ago(900), manual=True)
    correction = fact("f_corr", "y", category="correction", createdAt=days_ago(900))
    result, archived = archive_decayed(
        [manual, correction], NOW, 0.3, {"correction": 10}
    )  # even a configured correction half-life does not archive corrections
    assert archived == []
    assert result == [manual, correction]


def test_apply_update_archives_for_age_only_when_opted_in() -> None:
    stale = fact("fact_stale", "Wants to learn Rust", category="goal", createdAt=days_ago(120))
    fresh = fact("fact_fresh", "Likes tea", createdAt=days_ago(10))
    memory = Memory(facts=(stale, fresh), lastUpdated=EARLIER)
    default, report = apply_update(memory, MemoryUpdate(), now=NOW, threshold=0.7, max_facts=100)
    assert default == memory and not report.changed  # age alone never hides a fact
    result, report = apply_update(
        memory, MemoryUpdate(), now=NOW, threshold=0.7, max_facts=100, archive_floor=0.3
    )
    assert {f.id: f.status for f in result.facts} == {
        "fact_stale": "archived",
        "fact_fresh": "active",
    }
    assert report.facts.archived == ["fact_stale"]
    assert report.changed and result.lastUpdated == STAMP
    summary = report.summary()
    assert summary["archived"] == 1
    for key in ("sections", "added", "reinforced", "removed", "trimmed", "below_threshold"):
        assert summary[key] == 0
    assert {"superseded", "kept_manual", "revived", "overruled"} <= set(summary)

    same, report = apply_update(
        memory, MemoryUpdate(), now=NOW, threshold=0.7, max_facts=100, archive_floor=None
    )
    assert same == memory and not report.changed
    longer, _ = apply_update(
        memory,
        MemoryUpdate(),
        now=NOW,
        threshold=0.7,
        max_facts=100,
        half_lives={"goal": 365},
        archive_floor=0.3,
    )
    assert all(f.status == "active" for f in longer.facts)


def test_facts_added_in_the_update_are_not_archived() -> None:
    """A weak fact that passed the threshold is not stale the moment it is stored."""
    memory = Memory()
    upd = MemoryUpdate(newFacts=[new("Maybe likes jazz", 0.2)])
    result, report = apply_update(
        memory, upd, now=NOW, threshold=0.1, max_facts=100, archive_floor=0.3
    )
    assert result.facts[0].status == "active"
    assert report.facts.archived == []


def test_an_archived_fact_stated_again_is_revived() -> None:
    archived = fact(
        "fact_a", "User prefers dark mode", 0.8, createdAt=days_ago(400), status="archived"
    )
    result, changes = run([archived], [new("The user prefers dark mode.", 0.9)], archive_floor=0.3)
    [revived] = result
    assert revived.status == "active"
    assert revived.confirmations == 1 and revived.lastConfirmedAt == STAMP
    assert changes.revived == ["fact_a"]
    assert changes.reinforced == ["fact_a"]
    assert changes.archived == []


# -- manual facts --------------------------------------------------------------------------------


def test_manual_fact_is_not_removed() -> None:
    manual = fact("fact_m", "Lives in Lyon", manual=True)
    result, changes = run([manual, fact("fact_b", "Likes tea")], remove=["fact_m", "fact_b"])
    assert result == [manual]
    assert changes.removed == ["fact_b"]
    assert changes.kept_manual == ["fact_m"]


def test_manual_fact_is_not_reinforced_by_a_near_duplicate() -> None:
    manual = fact("fact_m", "User prefers dark mode", 0.6, manual=True)
    result, changes = run([manual], [new("The user prefers dark mode.", 0.99, sourceKind="stated")])
    assert result == [manual]
    assert changes.kept_manual == ["fact_m"]
    assert changes.reinforced == [] and changes.added == []
    assert not changes.changed


def test_manual_facts_survive_trimming_even_over_the_cap() -> None:
    facts = [
        fact("m1", "one", 0.1, manual=True),
        fact("a1", "two", 0.99),
        fact("m2", "three", 0.2, manual=True, status="archived"),
        fact("a2", "four", 0.95),
    ]
    kept, dropped = trim_facts(facts, 3)
    assert [f.id for f in kept] == ["m1", "a1", "m2"]
    kept, dropped = trim_facts(facts, 1)
    assert [f.id for f in kept] == ["m1", "m2"]
    assert [f.id for f in dropped] == ["a1", "a2"]


# -- trimming ------------------------------------------------------------------------------------


def test_trim_drops_superseded_then_archived_then_least_valuable() -> None:
    def history(fact_id: str, status: str, age: float) -> Fact:
        return fact(fact_id, fact_id, 0.99, status=status, createdAt=days_ago(age + 10),
                    updatedAt=days_ago(age))  # fmt: skip

    facts = [
        fact("a_weak", "one", 0.71),
        history("s_new", "superseded", 1),
        fact("a_sure", "three", 0.95),
        history("s_old", "superseded", 100),
        history("x_mid", "archived", 50),
        fact("a_mid", "six", 0.80),
    ]
    dropped_at: list[str] = []
    for cap in range(len(facts) - 1, -1, -1):
        kept, dropped = trim_facts(facts, cap)
        assert [f.id for f in kept] == [f.id for f in facts if f.id not in {d.id for d in dropped}]
        [newly] = [f.id for f in dropped if f.id not in dropped_at]
        dropped_at.append(newly)
    assert dropped_at == ["s_old", "s_new", "x_mid", "a_weak", "a_mid", "a_sure"]


def test_apply_facts_trims_superseded_before_active() -> None:
    facts = [fact(f"f{i}", f"fact number {i}", 0.8) for i in range(3)]
    result, changes = run(
        facts, [new("fact number 1 replaced by eleven", supersedes=["f1"])], max_facts=3
    )
    assert [f.id for f in result] == ["f0", "f2", "fact_new001"]
    assert changes.superseded == ["f1"] and changes.trimmed == ["f1"]


# -- sourceKind ----------------------------------------------------------------------------------


def test_source_kind_is_stored_inferred_by_default() -> None:
    result, _ = run(
        [],
        [
            new("Lives in Lyon", sourceKind="stated"),
            new("Probably a morning person"),
            new("Owns a bike", sourceKind="explicit"),  # near-miss spelling
            new("Likes jazz", sourceKind="telepathy"),  # unknown: provenance lost, fact kept
        ],
    )
    assert [f.sourceKind for f in result] == ["stated", "inferred", "stated", "inferred"]
    assert Memory(facts=tuple(result)).to_json_dict()["facts"][0]["sourceKind"] == "stated"


def test_restating_explicitly_upgrades_source_kind_never_downgrades() -> None:
    inferred = fact("f_i", "Lives in Lyon", sourceKind="inferred")
    stated = fact("f_s", "Owns a bike", sourceKind="stated")
    result, _ = run(
        [inferred, stated],
        [new("Lives in Lyon", sourceKind="stated"), new("Owns a bike", sourceKind="inferred")],
    )
    assert [f.sourceKind for f in result] == ["stated", "stated"]


# -- the extraction schema, parsing and prompt ---------------------------------------------------


def _fact_item(schema: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = schema["properties"]["newFacts"]["items"]
    return item


def test_json_schema_accepts_supersedes_and_source_kind_strictly() -> None:
    """Strict-mode shape: every property required, no extra ones; ids constrained like removals."""
    for caps in (True, False):
        item = _fact_item(update_json_schema(string_caps=caps, fact_ids=["fact_a", "fact_b"]))
        assert set(item["required"]) == set(item["properties"])
        assert {"sourceKind", "supersedes"} <= set(item["required"])
        assert item["additionalProperties"] is False
        assert item["properties"]["sourceKind"]["enum"] == ["stated", "inferred"]
        supersedes = item["properties"]["supersedes"]
        assert supersedes["type"] == "array"
        assert supersedes["maxItems"] == MAX_SUPERSEDES_PER_FACT
        assert supersedes["items"] == {"type": "string", "enum": ["fact_a", "fact_b"]}

    nothing_shown = _fact_item(update_json_schema(fact_ids=[]))["properties"]["supersedes"]
    assert nothing_shown["maxItems"] == 0
    free = _fact_item(update_json_schema())["properties"]["supersedes"]
    assert "enum" not in free["items"]
    json.dumps(update_json_schema(fact_ids=["fact_a"]))  # serialisable as sent


def test_parse_update_reads_supersedes_leniently() -> None:
    data = {
        "newFacts": [
            {"content": "Uses PostgreSQL", "confidence": 0.9, "supersedes": ["fact_a", "fact_a"]},
            {"content": "Lives in Lyon", "confidence": 0.9, "supersedes": "fact_b"},
            {"content": "Owns a bike", "confidence": 0.9, "supersedes": [{"id": "fact_c"}, 3, ""]},
            {"content": "Likes jazz", "confidence": 0.9, "supersedes": {"no": "list"}},
            {"content": "Runs", "confidence": 0.9, "supersedes": [f"f{i}" for i in range(50)]},
            {"content": "Reads", "confidence": 0.9, "supersedes": None, "sourceKind": 7},
        ]
    }
    update, rejected = parse_update(data)
    assert rejected == []
    assert [f.supersedes for f in update.newFacts[:4]] == [["fact_a"], ["fact_b"], ["fact_c"], []]
    assert len(update.newFacts[4].supersedes) == MAX_SUPERSEDES_PER_FACT
    assert update.newFacts[5].supersedes == [] and update.newFacts[5].sourceKind is None


def test_prompt_explains_supersede_versus_remove() -> None:
    system = load_prompt("extraction_system")
    assert "supersedes" in system and "factsToRemove" in system
    assert "I moved from MySQL to PostgreSQL" in system
    assert "sourceKind" in system and "stated" in system
    assert '"supersedes"' in load_prompt("extraction_json_fallback")


def test_prompt_shows_only_active_facts_and_their_ids() -> None:
    memory = Memory(
        facts=(
            fact("fact_live", "User uses PostgreSQL"),
            fact("fact_hist", "User uses MySQL", status="superseded", supersededBy="fact_live"),
            fact("fact_arch", "Wants a cat", status="archived"),
            fact("fact_mine", "Lives in Lyon", manual=True),
        )
    )
    turns = [Turn("user", "Which database do I use?", "h:1")]
    assert [f.id for f in prompt_facts(memory, turns, 80)] == ["fact_live", "fact_mine"]
    messages = render_extraction_messages(memory, turns, now=NOW, json_instructions=True)
    human = str(messages[1].content)
    assert "fact_live" in human and "User uses PostgreSQL" in human
    assert "MySQL" not in human and "fact_hist" not in human
    assert "Wants a cat" not in human and "fact_arch" not in human


def test_apply_update_from_parsed_answer_end_to_end() -> None:
    """The model's raw answer, parsed, supersedes by id and stores sourceKind."""
    memory = Memory(facts=(fact("fact_mysql", "User uses MySQL", category="context"),))
    raw = {
        "newFacts": [
            {
                "content": "User uses PostgreSQL",
                "category": "context",
                "confidence": 0.95,
                "sourceKind": "stated",
                "supersedes": ["fact_mysql"],
            }
        ],
        "factsToRemove": [],
    }
    update, _ = parse_update(raw)
    result, report = apply_update(
        memory, update, now=NOW, threshold=0.7, max_facts=100, id_factory=ids()
    )
    facts = by_id(result.facts)
    assert facts["fact_mysql"].status == "superseded"
    assert facts["fact_mysql"].supersededBy == "fact_new001"
    assert facts["fact_new001"].sourceKind == "stated"
    assert report.summary()["superseded"] == 1

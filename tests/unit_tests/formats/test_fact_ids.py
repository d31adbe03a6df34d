"""The one rule for the ids of facts that come from outside documents
(:mod:`deermem_middleware.formats.fact_ids`): per kind of id, what is done and what is said."""

from __future__ import annotations

from typing import Any

import pytest

from deermem_middleware.formats.fact_ids import (
    MAX_FACT_ID_CHARS,
    IdVerdict,
    check_fact_id,
    derived_fact_id,
    fact_preview,
    id_problem,
)
from deermem_middleware.formats.repair import repair_document

CONTENT = "Likes green tea in the morning"


def _check(
    raw: Any, earlier: dict[str, tuple[str, str]] | None = None, key: str = "k"
) -> IdVerdict:
    return check_fact_id(raw, content_key=key, content=CONTENT, earlier=earlier or {})


@pytest.mark.parametrize("raw", ["fact_1", "a-b_c", "事实1", "x" * MAX_FACT_ID_CHARS, "a b"])
def test_a_usable_id_is_kept_as_written(raw: str) -> None:
    verdict = _check(raw)
    assert (verdict.action, verdict.fact_id, verdict.reason) == ("kept", raw, "")
    assert id_problem(raw) is None


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (None, "no id"),
        ("", "empty id"),
        ("  ", "blank id '  '"),
        ("\t\n", "blank id"),
        (7, "id 7 is a number, not a string"),
        (7.5, "id 7.5 is a number"),
        (True, "id True is true/false"),
        (["a"], "is a list"),
        ("f\ud800", "not valid Unicode (a lone surrogate)"),
        ("a\x07b", "control or invisible characters"),
        ("a\u200bb", "control or invisible characters"),
        (" a ", "spaces around it"),
        ("x" * (MAX_FACT_ID_CHARS + 1), f"id of 257 characters (over {MAX_FACT_ID_CHARS})"),
    ],
)
def test_every_other_id_is_repaired_and_the_reason_names_the_fact(raw: Any, says: str) -> None:
    verdict = _check(raw)
    assert verdict.action == "repaired"
    assert verdict.fact_id == derived_fact_id("k")  # stable: the same on every read
    assert says in verdict.reason
    assert f"(fact {fact_preview(CONTENT)})" in verdict.reason
    assert verdict.reason.endswith(f"; given {verdict.fact_id}")
    assert verdict.missing == (raw is None or raw == "")
    verdict.reason.encode("utf-8")  # printable: a lone surrogate is escaped


def test_a_duplicate_id_is_a_copy_dropped_or_another_fact_repaired() -> None:
    earlier = {"a": ("facts[0]", "k")}
    copy = _check("a", earlier)
    assert copy.action == "dropped"
    assert "duplicate of facts[0] (same id 'a' and text)" in copy.reason
    other = _check("a", earlier, key="other")
    assert other.action == "repaired" and other.fact_id == derived_fact_id("a", "other")
    assert "duplicate id 'a' (also facts[0])" in other.reason


def test_a_bad_id_whose_new_id_is_taken_is_still_told_apart() -> None:
    taken = derived_fact_id("k")
    same = _check("  ", {taken: ("facts[0]", "k")})
    assert same.action == "dropped" and "its new id" in same.reason
    other = _check("  ", {taken: ("facts[0]", "other")}, key="k")
    assert other.action == "repaired" and other.fact_id == derived_fact_id(taken, "k")
    assert "blank id '  '" in other.reason


def test_the_preview_is_short_and_one_line() -> None:
    assert fact_preview("a\nb") == "'a b'"
    long = fact_preview("word " * 40)
    assert long.endswith("…'") and len(long) <= 43


def test_the_reader_applies_the_rule_and_counts_new_ids() -> None:
    _, report = repair_document(
        {
            "facts": [
                {"id": "  ", "content": "x"},
                {"id": "ok", "content": "y"},
                {"content": "z"},
                {"id": "ok", "content": "y"},
            ]
        }
    )
    assert report.ids_repaired == 2  # the blank one and the missing one
    assert report.facts_dropped == 1  # the copy
    lines = report.lines()
    assert lines[0].startswith("document: facts[0].id: blank id '  ' (fact 'x'); given fact_")
    assert lines[-1].startswith("document: facts[3]: duplicate of facts[1]")


def test_a_supersededby_naming_a_repaired_id_follows_it() -> None:
    memory, report = repair_document(
        {
            "facts": [
                {"id": " old ", "content": "User lived in Paris", "status": "superseded"},
                {"id": "keep", "content": "User lives in Rome"},
                {"id": "a" * 300, "content": "User lives in Milan"},
                {"id": "dup", "content": "User likes tea"},
                {"id": "dup", "content": "User likes coffee"},
                {"id": "p", "content": "User was in Lyon", "supersededBy": " old "},
                {"id": "q", "content": "User was in Turin", "supersededBy": "a" * 300},
                {"id": "r", "content": "User liked milk", "supersededBy": "dup"},
                {"id": "s", "content": "User liked juice", "supersededBy": "keep"},
                {"id": "t", "content": "User liked soda", "supersededBy": "gone"},
            ]
        }
    )
    by_id = {f.id: f for f in memory.facts}
    new_old, new_long = memory.facts[0].id, memory.facts[2].id
    assert new_old == derived_fact_id("user lived in paris") != " old "
    assert by_id["p"].supersededBy == new_old
    assert by_id["q"].supersededBy == new_long != "a" * 300
    assert by_id["r"].supersededBy == "dup"  # a duplicate id names the first fact, kept as written
    assert by_id["s"].supersededBy == "keep"
    assert by_id["t"].supersededBy == "gone"  # no such fact: left for the store's own checks
    followed = [r for r in report.repairs if r.field.endswith(".supersededBy")]
    assert [r.field for r in followed] == ["facts[5].supersededBy", "facts[6].supersededBy"]
    assert f"pointed at the repaired id ' old ' (facts[0]); now {new_old}" in followed[0].reason
    assert report.ids_repaired == 3  # the spaced id, the long one, the second 'dup'

"""Applying an extraction update (:mod:`deermem_middleware.memory.apply`): what it does not
touch stays as it was read."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from deermem_middleware.extraction.parsing import parse_update
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.document import Memory
from deermem_middleware.testing import update_json

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
STYLE = {"summary": "Conclusions first.", "updatedAt": "2026-01-02T00:00:00Z", "scope": "user"}


def test_an_update_keeps_the_sections_we_do_not_model() -> None:
    memory = Memory.from_json_dict({"user": {"cognitiveStyle": STYLE}})
    answer = update_json(
        sections={"workContext": "Writes Go.", "topOfMind": "Shipping a release."},
        facts=[("User writes Go", "knowledge", 0.9)],
    )
    update, _ = parse_update(json.loads(answer))
    after, _ = apply_update(memory, update, now=NOW, threshold=0.7, max_facts=100)
    assert after.user.workContext.summary == "Writes Go."
    assert [f.content for f in after.facts] == ["User writes Go"]
    stored = after.to_json_dict()["user"]["cognitiveStyle"]
    assert json.dumps(stored) == json.dumps(STYLE)


def test_a_sentence_copied_into_several_sections_is_written_once() -> None:
    """What the bundled 135M model wrote in the demo: one pair of sentences as three sections."""
    copied = (
        "This is just one example of how you can change your work context. "
        "You need to choose the right tool for your role."
    )
    answer = update_json(
        sections={
            "workContext": "Backend engineer in Lyon.",
            "topOfMind": copied + " This is a reminder that you have options.",
            "recentMonths": copied,
            "longTermBackground": copied.upper(),  # same sentences, other case: still repeats
        }
    )
    update, _ = parse_update(json.loads(answer))
    after, report = apply_update(Memory(), update, now=NOW, threshold=0.7, max_facts=100)
    assert after.user.workContext.summary == "Backend engineer in Lyon."
    assert after.user.topOfMind.summary == copied + " This is a reminder that you have options."
    assert after.history.recentMonths.summary == ""  # only repeats: not written
    assert after.history.longTermBackground.summary == ""
    assert report.sections == ["workContext", "topOfMind"]


def test_a_section_keeps_its_own_sentences_beside_a_repeated_one() -> None:
    answer = update_json(
        sections={
            "workContext": "Writes Go at a payments company.",
            "recentMonths": "Writes Go at a payments company. Moved to Lyon in May.",
        }
    )
    update, _ = parse_update(json.loads(answer))
    after, _ = apply_update(Memory(), update, now=NOW, threshold=0.7, max_facts=100)
    assert after.history.recentMonths.summary == "Moved to Lyon in May."


def test_summaries_without_repeats_are_written_exactly_as_given() -> None:
    texts = {"workContext": "用户在杭州工作。用户写Go。", "topOfMind": "Ships v1.2 e.g. this week."}
    update, _ = parse_update(json.loads(update_json(sections=texts)))
    after, _ = apply_update(Memory(), update, now=NOW, threshold=0.7, max_facts=100)
    assert after.user.workContext.summary == texts["workContext"]
    assert after.user.topOfMind.summary == texts["topOfMind"]

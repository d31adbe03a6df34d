"""The grounding gate: a new fact must be supported by what the *user* said."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pytest

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.gates import gate_update
from deermem_middleware.memory.gates.grounding import (
    content_terms,
    lexical_support,
    subject_words,
    support_for,
)
from deermem_middleware.memory.update import MemoryUpdate, NewFact

SUBJECTS = subject_words()


def test_word_forms_meet() -> None:
    """Light stemming: "painting"/"painted"/"paints" meet "paint"; one stem a prefix of the
    other ("counseling"/"counselor") also counts."""
    assert lexical_support("User's painting", ["I painted a lake last week"], SUBJECTS) == 1
    assert lexical_support("Wants a career in counseling", ["I'd love to be a counselor"]) > 0.5
    assert lexical_support("User paints landscapes", ["Painting landscapes relaxes me"]) == 1


def test_cjk_without_spaces_is_supported() -> None:
    assert lexical_support("用户养了一只猫", ["我养的猫叫咪咪"], SUBJECTS) == 1.0
    assert lexical_support("用户喜欢喝茶", ["我每天早上喝咖啡"], SUBJECTS) < 0.3


@pytest.mark.parametrize(
    "fact",
    ["User", "The user", "用户", "The user is the user"],
)
def test_subject_words_alone_are_no_support(fact: str) -> None:
    assert content_terms(fact, SUBJECTS) == {}
    assert lexical_support(fact, ["the user said user things"], SUBJECTS) == 0.0


def test_the_users_own_name_is_a_subject_word() -> None:
    subjects = subject_words(["Caroline"])
    assert "caroline" not in content_terms("Caroline's dog is called Max", subjects)
    # the name alone never supports a fact: stopwords and the name carry nothing
    assert lexical_support("Caroline plays the violin", ["Caroline is here"], subjects) == 0.0
    assert lexical_support("Caroline plays the violin", ["I play violin"], subjects) == 1.0


def test_support_is_local_to_a_few_consecutive_turns() -> None:
    """Words scattered over a long conversation do not add up to support."""
    turns = ["I like mountains.", *["Nothing to say."] * 5, "Bikes are fine.", "Okay."]
    assert lexical_support("Likes mountain bikes", turns, SUBJECTS, window=3) < 0.7
    assert lexical_support("Likes mountain bikes", turns, SUBJECTS, window=100) == 1.0


def test_support_from_assistant_only_is_told_apart() -> None:
    support = support_for(
        "User prefers PostgreSQL for fintech",
        ["This month I'm migrating our payments service."],
        ["As a fintech engineer I specialize in PostgreSQL."],
        subjects=SUBJECTS,
    )
    assert not support.supported
    assert support.assistant_only


def test_embeddings_mix_into_the_score() -> None:
    """A paraphrase with little lexical overlap is carried by a close embedding."""
    vectors = {
        "User is vegetarian": np.array([1.0, 0.0]),
        "I don't eat meat at all": np.array([0.96, 0.28]),  # cosine 0.96
    }

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in texts])

    turns = ["I don't eat meat at all"]
    lexical = support_for("User is vegetarian", turns, subjects=SUBJECTS)
    mixed = support_for("User is vegetarian", turns, subjects=SUBJECTS, embed=embed)
    assert not lexical.supported
    assert mixed.supported
    assert mixed.semantic == pytest.approx(0.96, abs=1e-6)


TURNS = (
    Turn("user", "Hi! I'm Maya, a backend engineer at a fintech startup in Lyon.", "u1"),
    Turn("assistant", "La mise en place d'un éphémère dans le cadre de PostgreSQL.", "a1"),
    Turn("user", "I'm migrating our payments service from MySQL to PostgreSQL.", "u2"),
)


def _update(*facts: tuple[str, float]) -> MemoryUpdate:
    return MemoryUpdate(
        newFacts=[NewFact(content=c, category="context", confidence=v) for c, v in facts]
    )


def test_drop_mode_drops_unsupported_facts_and_logs_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="deermem_middleware.memory.gates")
    update = _update(
        ("User is a backend engineer in Lyon", 0.9),
        ("Prefers la mise en place d'un éphémère", 1.0),
        ("Has three dogs", 0.9),
    )
    gated, report = gate_update(update, TURNS, where="user 'maya'")
    assert [f.content for f in gated.newFacts] == ["User is a backend engineer in Lyon"]
    assert report.grounding_dropped == ["Prefers la mise en place d'un éphémère", "Has three dogs"]
    lines = [r.getMessage() for r in caplog.records]
    assert any("only the assistant's turns" in m and "éphémère" in m for m in lines)
    assert any("supported by no turn" in m and "Has three dogs" in m for m in lines)
    assert all("user support" in m for m in lines)


def test_infer_mode_demotes_with_capped_confidence() -> None:
    update = _update(("Has three dogs", 0.95), ("Works on payments at a fintech", 0.9))
    gated, report = gate_update(update, TURNS, grounding="infer", inferred_confidence_cap=0.6)
    dogs, payments = gated.newFacts
    assert (dogs.confidence, dogs.sourceKind) == (0.6, "inferred")
    assert (payments.confidence, payments.sourceKind) == (0.9, None)
    assert report.grounding_demoted == ["Has three dogs"]
    assert report.summary()["grounding_demoted"] == 1


def test_off_mode_keeps_everything() -> None:
    update = _update(("Has three dogs", 0.95))
    gated, report = gate_update(update, TURNS, grounding="off")
    assert gated is update
    assert report.summary()["grounding_dropped"] == 0


def test_a_name_the_user_said_is_evidence() -> None:
    """The user's name is a subject word — it supports nothing — but where the user said it,
    it is the evidence for "User's name is Maya"."""
    update = _update(("User's name is Maya", 0.9), ("Maya has a cat", 0.9), ("Maya", 0.9))
    gated, _ = gate_update(update, TURNS, names=["maya"])
    assert [f.content for f in gated.newFacts] == ["User's name is Maya", "Maya"]
    elsewhere = (Turn("user", "I have no pets.", "u9"),)
    assert gate_update(update, elsewhere, names=["maya"])[0].newFacts == []


def test_sections_and_removals_pass_unchanged() -> None:
    update = MemoryUpdate.model_validate(
        {
            "user": {"workContext": {"shouldUpdate": True, "summary": "Backend engineer."}},
            "newFacts": [{"content": "Has three dogs", "confidence": 0.9}],
            "factsToRemove": ["fact_1"],
        }
    )
    gated, _ = gate_update(update, TURNS)
    assert gated.newFacts == []
    assert gated.user == update.user
    assert gated.factsToRemove == ["fact_1"]


def test_a_failing_embedder_falls_back_to_lexical(caplog: pytest.LogCaptureFixture) -> None:
    def broken(texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("no model")

    update = _update(("User is a backend engineer", 0.9), ("Has three dogs", 0.9))
    gated, _ = gate_update(update, TURNS, embed=broken)
    assert [f.content for f in gated.newFacts] == ["User is a backend engineer"]
    assert any("semantic support failed" in r.getMessage() for r in caplog.records)


ALICE = (Turn("user", "I'm Alice. I write Go at a payments company.", "alice-1"),)


@pytest.mark.parametrize(
    "fact",
    [
        # what the bundled SmolLM2-135M stored from ALICE, with confidence 1.00, before this gate
        "Alice is a freelance writer and uses PayPal to manage her business operations. She's "
        "also a member of the GoFox team, which helps develop and maintain the GoFox platform.",
        "Alice is a freelance writer.",
        "User writes Go at PayPal.",
        "User is a senior engineer writing Go at a payments company.",
        "User has 3 payments companies.",
    ],
)
def test_what_nobody_said_is_dropped_whatever_words_overlap(fact: str) -> None:
    gated, report = gate_update(_update((fact, 1.0)), ALICE, names=["alice"])
    assert gated.newFacts == []
    assert report.grounding_dropped == [fact]
    # and ``infer`` keeps it only as a capped guess
    inferred, _ = gate_update(_update((fact, 1.0)), ALICE, grounding="infer", names=["alice"])
    assert (inferred.newFacts[0].confidence, inferred.newFacts[0].sourceKind) == (0.7, "inferred")


def test_what_the_user_said_passes_the_specifics_check() -> None:
    update = _update(("User writes Go at a payments company.", 0.9), ("User is Alice", 0.9))
    gated, report = gate_update(update, ALICE, names=["alice"])
    assert [f.content for f in gated.newFacts] == [
        "User writes Go at a payments company.",
        "User is Alice",
    ]
    assert report.grounding_dropped == report.grounding_demoted == []


def test_a_name_only_the_assistant_said_makes_the_fact_inferred(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="deermem_middleware.memory.gates")
    turns = (
        Turn("user", "I'm migrating our payments service from MySQL to PostgreSQL.", "u1"),
        Turn("assistant", "Flyway can run the MySQL to PostgreSQL migration scripts.", "a1"),
        Turn("user", "Great, I'll use that for the payments migration.", "u2"),
    )
    fact = "User uses Flyway for the payments migration from MySQL to PostgreSQL"
    support = support_for(fact, [turns[0].text, turns[2].text], [turns[1].text])
    assert support.supported and support.assistant_said == ("Flyway",)
    gated, report = gate_update(_update((fact, 0.95)), turns)
    [kept] = gated.newFacts
    assert (kept.confidence, kept.sourceKind) == (0.7, "inferred")
    assert report.grounding_demoted == [fact]
    assert any("only the assistant said 'Flyway'" in r.getMessage() for r in caplog.records)


def test_the_log_names_what_nobody_said(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deermem_middleware.memory.gates")
    gate_update(_update(("User writes Go at PayPal.", 1.0)), ALICE)
    assert any("names what nobody said: 'PayPal'" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("fact", "turn"),
    [
        # recorded from the bundled SmolLM2-135M
        ("User is not vegan anymore", "I've been vegan for six years and I cook Ethiopian food."),
        ("User is vegan, has no allergies to peanuts.", "I'm vegetarian and allergic to peanuts."),
        ("User is Lina", "My daughter Lina starts kindergarten next week and I'm nervous."),
    ],
)
def test_a_contradiction_or_a_borrowed_name_is_dropped(fact: str, turn: str) -> None:
    gated, report = gate_update(_update((fact, 0.9)), (Turn("user", turn, "u1"),))
    assert gated.newFacts == [] and report.grounding_dropped == [fact]


def test_a_negation_the_user_made_supports_a_negated_fact() -> None:
    turns = (Turn("user", "I don't eat meat and I never drink coffee.", "u1"),)
    gated, _ = gate_update(_update(("User doesn't eat meat", 0.9), ("User is Maya", 0.9)), turns)
    assert [f.content for f in gated.newFacts] == ["User doesn't eat meat"]

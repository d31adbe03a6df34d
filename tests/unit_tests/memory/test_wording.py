"""How an extracted fact is worded before it is judged and stored."""

from __future__ import annotations

import pytest

from deermem_middleware.memory.update import MemoryUpdate, NewFact, SectionUpdate, UserUpdate
from deermem_middleware.memory.wording import reword_fact, reword_update, third_person, uncut


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        # what the bundled SmolLM2-135M wrote, recorded
        (
            "User [2026-12-07 08:21 UTC]: Hi! I'm Maya, a backend engineer at a fintech startup.",
            "User is Maya, a backend engineer at a fintech startup.",
        ),
        (
            "I am a PhD student in astrophysics at ETH Zurich.",
            "User is a PhD student in astrophysics at ETH Zurich.",
        ),
        ("We use Kubernetes on AWS", "User and their team use Kubernetes on AWS"),
        ("I play bass in a jazz trio on weekends.", "User plays bass in a jazz trio on weekends."),
        ("Thanks, I'm Sam", "User is Sam"),
        ("1. User is a data engineer in Berlin.", "User is a data engineer in Berlin."),
        ("- my sister's birthday is May 3", "User's sister's birthday is May 3"),
        ("Our startup uses Django", "User's startup uses Django"),
        ("我是上海的一名前端工程师", "用户是上海的一名前端工程师"),
        # already right: unchanged
        ("User writes Go at a payments company.", "User writes Go at a payments company."),
        ("Maya lives in Lyon", "Maya lives in Lyon"),
        ("Hi!", "Hi!"),  # nothing but a greeting: left for the value gate to reject
    ],
)
def test_reword_fact(written: str, stored: str) -> None:
    assert reword_fact(written) == stored


def test_third_person_agrees_the_verb() -> None:
    assert third_person("I always code at night") == "User always codes at night"
    assert (
        third_person("I watch films and I study Rust") == "User watches films and User studies Rust"
    )
    assert third_person("I have two cats") == "User has two cats"
    assert third_person("I’m a nurse and we’re on nights") == (
        "User is a nurse and User and their team are on nights"
    )
    assert third_person("Lives in Lyon") == "Lives in Lyon"


def test_uncut_goes_back_to_the_last_full_sentence_or_word() -> None:
    text = "User is Maya, a backend engineer in Lyon. User has been migrating our pay"
    assert uncut(text, len(text)) == "User is Maya, a backend engineer in Lyon."
    words = "User writes backend services in Go and Rust for a payments compa"
    assert uncut(words, len(words)) == "User writes backend services in Go and Rust for a payments"
    assert uncut(text, len(text) + 1) == text  # shorter than the cap: complete
    assert uncut(text, None) == text
    ours = "x" * 39 + "…"  # our own validation already marked the cut
    assert uncut(ours, 40) == ours


def test_reword_update_rewords_facts_and_uncuts_summaries() -> None:
    summary = "I work at a payments company. Writes Go and mainta"
    update = MemoryUpdate(
        user=UserUpdate(workContext=SectionUpdate(shouldUpdate=True, summary=summary)),
        newFacts=[
            NewFact(content="I write Go", confidence=0.9),
            NewFact(content="User: ", confidence=0.9),
            NewFact(content="User likes tea", confidence=0.9),
        ],
    )
    reworded = reword_update(update, fact_cap=140, summary_cap=len(summary))
    # a fact that was only an echoed label is gone
    assert [f.content for f in reworded.newFacts] == ["User writes Go", "User likes tea"]
    assert reworded.user.workContext.summary == "User works at a payments company."
    assert reworded.newFacts[1] is update.newFacts[2]  # untouched facts are the same objects
    assert reword_update(MemoryUpdate()) == MemoryUpdate()

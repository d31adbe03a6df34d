"""The names, counts and occupations a fact asserts."""

from __future__ import annotations

import pytest

from deermem_middleware.memory.gates.grounding import subject_words
from deermem_middleware.memory.gates.specifics import (
    claimed_name,
    introduces,
    negated,
    specific_phrases,
)

SUBJECTS = subject_words(["Alice"])


@pytest.mark.parametrize(
    ("fact", "phrases"),
    [
        (
            "Alice is a freelance writer and uses PayPal to manage her business operations. "
            "She's also a member of the GoFox team.",
            ["PayPal", "GoFox", "freelance writer"],
        ),
        ("User writes Go at a payments company.", ["Go"]),
        ("User is a backend engineer at a fintech startup in Lyon.", ["Lyon", "backend engineer"]),
        ("User runs Kubernetes on AWS and eBay's API", ["Kubernetes", "AWS", "eBay's", "API"]),
        ("User is learning Japanese at about N4 level", ["Japanese", "N4"]),
        ("User has 3 dogs and 12 chapters written", ["3", "12"]),
        ("User works as a nurse on night shifts", ["nurse"]),
        ("User became a senior data scientist in 2024", ["senior data scientist"]),
        # not specific: the subject, a sentence's first word, dates, years, non-occupations
        ("Pepper is the user's beagle", []),
        ("User went hiking last Friday, on 2026-11-29", []),
        ("User's sister's birthday is on May 3rd", []),
        ("User moved to a new flat in 2025", []),
        ("User is a member of a hiking club and a dog owner", []),
        ("User is a fan of jazz", []),
        ("Alice's cat hates the vet", []),
    ],
)
def test_specific_phrases(fact: str, phrases: list[str]) -> None:
    assert specific_phrases(fact, SUBJECTS) == phrases


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User is not vegan anymore", True),
        ("User doesn't eat meat", True),
        ("User no longer uses MySQL", True),
        ("用户不喜欢咖啡", True),
        ("User is vegan", False),
        ("User notes everything in Notion", False),
        ("用户计划未来学习日语", False),
    ],
)
def test_negated(text: str, expected: bool) -> None:
    assert negated(text) is expected


def test_a_name_claim_needs_the_user_to_give_that_name() -> None:
    assert claimed_name("User is Lina") == "Lina"
    assert claimed_name("User's name is Maya, a backend engineer") == "Maya"
    assert claimed_name("User is a nurse") is None
    assert claimed_name("User is Spanish-speaking") is None
    assert claimed_name("Lina starts kindergarten") is None
    assert introduces(["Hi! I'm Maya, a backend engineer."], "Maya")
    assert introduces(["My name is Tomás and I run."], "Tomás")
    assert introduces(["Call me Jo, please"], "Jo")
    assert not introduces(["My daughter Lina starts kindergarten next week."], "Lina")

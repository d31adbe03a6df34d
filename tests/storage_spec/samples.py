"""Documents and scopes the conformance tests store, and the concurrent writers they run."""

from __future__ import annotations

import threading
from collections.abc import Callable

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import (
    Fact,
    History,
    Memory,
    Section,
    UserContext,
    Watermark,
)
from deermem_middleware.storage import MemoryScope, MemoryStorage, RevisionConflict

SCOPE = MemoryScope("alice", "coder")
OTHER = MemoryScope("bob", "coder")
ODD = MemoryScope("a.b/../c d 用户 🚀", "agent.v2")


def fact(i: int, content: str | None = None) -> Fact:
    return Fact(
        id=f"fact_{i:06d}",
        content=content or f"fact number {i}",
        category="knowledge",
        confidence=0.9,
        createdAt="2026-01-01T00:00:00Z",
        source=f"thread-{i % 3}",
    )


def memory(*contents: str) -> Memory:
    return Memory(facts=tuple(fact(i, c) for i, c in enumerate(contents)))


def contents(stored: Memory) -> list[str]:
    return [f.content for f in stored.facts]


def rich_memory() -> Memory:
    section = Section(summary="Data engineer at Acme; 喜欢喝茶; עברית; 🚀", updatedAt="2026-02-01")
    return Memory(
        user=UserContext(workContext=section, personalContext=section),
        history=History(longTermBackground=section),
        facts=(fact(1, "用户喜欢喝茶"), fact(2, "User's RTL name: ‏שלום‏"), fact(3, "emoji 👩‍💻")),
        watermarks={"thread-1": Watermark(turn="fp-9", count=4, updatedAt="2026-02-01")},
    )


def turns(*texts: str) -> tuple[Turn, ...]:
    """A conversation: user and assistant alternating, one fingerprint per turn."""
    roles = ("user", "assistant")
    return tuple(Turn(roles[i % 2], text, f"fp-{i}-{text}") for i, text in enumerate(texts))


ODD_IDS = [  # ids that must neither escape a folder nor collide
    "team/alice",
    "..",
    "../../etc/passwd",
    ".hidden",
    "with spaces ",
    "🦌 deer",
    "用户张三",
    "100%",
    "%2F",
    "%2E",
    "a\\b",
    "a.b",
    "con",
    "x.json",
]


def add_fact_with_retry(storage: MemoryStorage, scope: MemoryScope, new: Fact) -> None:
    """One load/apply/save cycle appending ``new``, retried on a lost compare-and-set."""
    while True:
        stored = storage.load(scope)
        document = stored.memory.model_copy(update={"facts": (*stored.memory.facts, new)})
        try:
            storage.save(scope, document, stored.revision)
            return
        except RevisionConflict:
            continue


def in_threads(work: Callable[[int], None], threads: int = 8) -> None:
    """Run ``work(worker)`` on ``threads`` threads at once; any exception fails the test."""
    errors: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            work(worker)
        except BaseException as exc:  # reported below
            errors.append(exc)

    started = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    assert errors == []

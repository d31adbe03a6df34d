"""What goes into the block and what is recorded about it: guaranteed categories, non-active
facts, the injection ledger and persisted injection counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.injection.render import GUARANTEED_HEADING
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.runtime.ledger import InjectionRecord
from deermem_middleware.storage import InMemoryStorage, MemoryScope
from deermem_middleware.testing import ScriptedChatModel, update_json

SCOPE = MemoryScope("alice", "__default__")


def fact(i: int, content: str, **kw: Any) -> Fact:
    return Fact(
        id=f"f{i}",
        content=content,
        confidence=kw.pop("confidence", 0.9),
        createdAt=kw.pop("createdAt", f"2026-01-{i % 28 + 1:02d}T{i // 28:02d}:00:00Z"),
        **kw,
    )


def middleware(facts: list[Fact], **config: Any) -> MemoryMiddleware:
    storage = InMemoryStorage()
    storage.save(SCOPE, Memory(facts=tuple(facts)), 0)
    values: dict[str, Any] = {"embeddings": "none", "flush_on_exit_seconds": None}
    values.update(config)
    return MemoryMiddleware(
        MemoryConfig(**values),
        model=ScriptedChatModel(answers=[update_json()]),
        storage=storage,
    )


FACTS = [
    fact(0, "User's name is Robert, not Bob", category="correction"),
    fact(1, "User writes Go at a payments company", category="knowledge"),
    fact(2, "User has a dog named Biscuit", category="personal"),
    fact(3, "User prefers dark mode", category="preference"),
    fact(4, "Timezone is CET, not UTC", category="correction"),
]


def test_corrections_are_always_injected_first_and_once() -> None:
    mw = middleware(FACTS, top_k=2)
    rendered = mw.explain_memory([HumanMessage("Tell me about my dog")], user_id="alice")
    lines = rendered.text.splitlines()
    heading = lines.index(GUARANTEED_HEADING)
    assert "Timezone is CET" in lines[heading + 1]  # newest correction first
    assert "Robert" in lines[heading + 2]
    assert [g.fact.id for g in rendered.guaranteed] == ["f4", "f0"]
    assert rendered.facts[0].fact.id == "f2"  # then the relevance pick
    assert len(rendered.facts) == 2  # top_k still counts relevance picks only
    assert rendered.text.count("Robert") == 1  # not repeated by the relevance pick
    mw.close()


def test_guaranteed_budget_and_switching_off() -> None:
    many = [
        fact(100 + i, f"Correction number {i}: " + "x" * 80, category="correction")
        for i in range(20)
    ]
    mw = middleware([*many, FACTS[2]], guaranteed_token_budget=120)
    rendered = mw.explain_memory([HumanMessage("my dog?")], user_id="alice")
    assert 0 < len(rendered.guaranteed) < 20  # within its own budget
    assert rendered.facts and rendered.facts[0].fact.id == "f2"  # relevance still gets room
    mw.close()
    off = middleware(FACTS, guaranteed_categories=[])
    assert off.explain_memory([HumanMessage("my dog?")], user_id="alice").guaranteed == ()
    off.close()


def test_superseded_and_archived_facts_are_not_injected() -> None:
    facts = [
        fact(0, "User uses MySQL", status="superseded", supersededBy="f1"),
        fact(1, "User uses PostgreSQL"),
        fact(2, "User likes MySQL Workbench", status="archived"),
    ]
    mw = middleware(facts)
    block = mw.render_memory([HumanMessage("Which database do I use, MySQL?")], user_id="alice")
    assert "PostgreSQL" in block
    assert "MySQL" not in block.replace("PostgreSQL", "")
    assert len(mw.get_memory("alice").facts) == 3  # kept for audit
    mw.close()


def test_ledger_records_each_injection_and_listeners_see_it(tmp_path: Path) -> None:
    mw = middleware(FACTS, top_k=3)
    seen: list[InjectionRecord] = []
    mw.add_injection_listener(seen.append)
    mw.add_injection_listener(lambda record: 1 / 0)  # a broken listener is contained
    rendered = mw.explain_memory([HumanMessage("what about my dog")], user_id="alice")
    mw.service._record_injection(SCOPE, rendered)
    assert len(seen) == 1 and mw.ledger[-1] is seen[0]
    record = seen[0]
    assert record.user_id == "alice" and record.tokens == rendered.tokens > 0
    ids = [(f.fact_id, f.guaranteed) for f in record.facts]
    assert ("f2", False) in ids and ("f0", True) in ids
    dog = next(f for f in record.facts if f.fact_id == "f2")
    assert dog.relevance > 0 and dog.score >= dog.relevance
    mw.close()


def test_injection_counts_are_saved_with_the_next_update() -> None:
    mw = middleware(FACTS, top_k=1, debounce_seconds=0)
    for _ in range(3):
        rendered = mw.explain_memory([HumanMessage("my dog Biscuit")], user_id="alice")
        mw.service._record_injection(SCOPE, rendered)
    before = {f.id: f.injections for f in mw.get_memory("alice").facts}
    assert before["f2"] == 0  # not written on the model-call path
    mw.capture(
        [HumanMessage("I also have a cat now."), AIMessage("Lovely!")],
        user_id="alice",
        thread_id="t1",
    )
    assert mw.flush(timeout=10)
    after = {f.id: f for f in mw.get_memory("alice").facts}
    assert after["f2"].injections == 3 and after["f2"].lastInjectedAt
    assert after["f0"].injections == 3  # guaranteed facts count too
    assert after["f3"].injections == 0
    mw.close()

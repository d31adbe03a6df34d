"""The user's own (manual) fact wins over a conflicting extracted one.

The scenario the rule exists for: the user wrote "User wants to be called Sam" by hand (``deermem
fact add`` or the console); later an extraction model proposes "Wants to be called Samuel" with
confidence 0.95 — as a ``correction`` (a guaranteed category, injected first), with or without
``supersedes`` naming the manual fact. The block must show "Sam", never "Samuel" above it. An
extracted fact that merely agrees or adds detail ("Uses Go" / "Uses Go 1.22 at work") is kept,
and the user's own edit of the manual fact still changes what is injected.

End to end through the real engine: :class:`MemoryService` with its scheduler, updater, write
gates and file storage; only the extraction model is scripted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.facts import apply_facts, facts_conflict
from deermem_middleware.memory.manual import add_fact, edit_fact
from deermem_middleware.memory.update import NewFact
from deermem_middleware.retrieval.precedence import manual_precedence
from deermem_middleware.retrieval.selector import ScoredFact
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import MemoryScope
from deermem_middleware.testing import ScriptedChatModel, update_json
from tests.helpers import memory_config

SAM = "User wants to be called Sam"
SAMUEL = "Wants to be called Samuel"
NOW = datetime(2026, 5, 7, 10, 0, tzinfo=UTC)
STAMP = "2026-05-07T10:00:00Z"

_FACT_LINE = re.compile(r"^- (fact_\w+) \| \w+ \| [\d.]+ \| (.*)$", re.MULTILINE)


# -- the pure rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manual", "extracted"),
    [
        (SAM, SAMUEL),  # one value replaced in the same frame
        (SAM, "The user wants to be called Samuel, not Sam"),  # the manual value denied
        ("User prefers dark mode", "User prefers light mode"),
        ("Lives in Lisbon", "User lives in Porto"),
        ("Is 34 years old", "Is 35 years old"),
        ("Likes coffee", "Does not like coffee"),
        ("Drinks coffee every morning", "User no longer drinks coffee every morning"),
        ("Doesn't eat meat", "Eats meat"),
    ],
)
def test_facts_that_give_another_value_to_the_same_slot_conflict(
    manual: str, extracted: str
) -> None:
    assert facts_conflict(manual, extracted)
    assert facts_conflict(extracted, manual)  # symmetric


@pytest.mark.parametrize(
    ("manual", "extracted"),
    [
        ("Uses Go", "Uses Go 1.22 at work"),  # a detail added: a refinement
        (SAM, "The user wants to be called Sam."),  # a restatement: reinforcement
        ("Uses MySQL", "Uses PostgreSQL"),  # one shared word is no slot
        ("Is learning Spanish", "Is learning piano"),  # a list, not a slot
        ("Likes to eat pizza", "Likes to eat sushi"),
        ("Has a daughter named Emma", "Has a son named Leo"),
        ("Uses Go", "Uses Go, not Rust"),  # the denied word is not the manual fact's
        ("Likes coffee", "Likes coffee but not tea"),
        ("Does not eat meat", "Does not eat fish"),  # two denials can both hold
        ("Prefers tea", "Lives in Lyon"),
        ("用户希望被称为山姆", "用户希望被称为塞缪尔"),  # no word boundaries: not compared
    ],
)
def test_agreeing_refining_or_unrelated_facts_do_not_conflict(manual: str, extracted: str) -> None:
    assert not facts_conflict(manual, extracted)
    assert not facts_conflict(extracted, manual)


# -- the write path --------------------------------------------------------------------------------


def _fact(fact_id: str, content: str, **extra: Any) -> Fact:
    return Fact.model_validate(
        {"id": fact_id, "content": content, "createdAt": STAMP, "updatedAt": STAMP, **extra}
    )


def _apply(facts: list[Fact], *proposals: NewFact) -> tuple[list[Fact], Any]:
    counter = iter(range(100))
    return apply_facts(
        facts,
        proposals,
        (),
        now=NOW,
        threshold=0.7,
        max_facts=100,
        source="thread-2",
        id_factory=lambda: f"fact_new{next(counter)}",
    )


def test_a_proposal_superseding_a_manual_fact_is_stored_overruled_by_it() -> None:
    sam = _fact("fact_sam", SAM, manual=True, sourceKind="stated")
    proposal = NewFact(
        content=SAMUEL, category="correction", confidence=0.95, supersedes=["fact_sam"]
    )
    result, changes = _apply([sam], proposal)
    by_id = {f.id: f for f in result}
    assert by_id["fact_sam"] == sam  # the user's fact untouched
    overruled = by_id["fact_new0"]
    assert (overruled.content, overruled.status, overruled.supersededBy) == (
        SAMUEL,
        "superseded",
        "fact_sam",
    )
    assert changes.overruled == ["fact_new0"]
    assert changes.kept_manual == ["fact_sam"]
    assert changes.added == [] and changes.superseded == []
    assert changes.changed

    # said again in a later conversation: no pile of overruled twins
    again, later = _apply(result, proposal)
    assert again == result
    assert later.overruled == [] and later.added == []
    assert later.kept_manual == ["fact_sam"]


def test_a_known_fact_superseding_a_manual_one_is_overruled_too() -> None:
    sam = _fact("fact_sam", SAM, manual=True)
    known = _fact("fact_samuel", SAMUEL, category="correction", confidence=0.9)
    result, changes = _apply(
        [sam, known],
        NewFact(content=SAMUEL, category="correction", confidence=0.95, supersedes=["fact_sam"]),
    )
    by_id = {f.id: f for f in result}
    assert by_id["fact_sam"] == sam
    assert (by_id["fact_samuel"].status, by_id["fact_samuel"].supersededBy) == (
        "superseded",
        "fact_sam",
    )
    assert changes.overruled == ["fact_samuel"]


def test_refinements_and_plain_supersedes_are_unchanged() -> None:
    go = _fact("fact_go", "Uses Go", manual=True)
    mysql = _fact("fact_mysql", "Uses MySQL")
    result, changes = _apply(
        [go, mysql],
        NewFact(content="Uses Go 1.22 at work", confidence=0.9),
        NewFact(content="Uses PostgreSQL", confidence=0.9, supersedes=["fact_mysql"]),
    )
    by_id = {f.id: f for f in result}
    assert by_id["fact_new0"].status == "active"  # the refinement is a fact of its own
    assert (by_id["fact_mysql"].status, by_id["fact_mysql"].supersededBy) == (
        "superseded",
        "fact_new1",
    )
    assert changes.overruled == [] and changes.kept_manual == []


# -- the block's order (pure) ----------------------------------------------------------------------


def _scored(fact: Fact, score: float = 1.0) -> ScoredFact:
    return ScoredFact(fact=fact, score=score, relevance=score)


def test_the_manual_fact_takes_the_conflicting_facts_place() -> None:
    sam = _fact("fact_sam", SAM, manual=True)
    samuel = _fact("fact_samuel", SAMUEL, category="correction", confidence=0.95)
    tea = _fact("fact_tea", "Prefers tea")
    chosen = manual_precedence([_scored(samuel)], [_scored(tea), _scored(sam, 0.4)], [sam])
    assert [s.fact.id for s in chosen.guaranteed] == ["fact_sam"]  # in the correction's slot
    assert [s.fact.id for s in chosen.selected] == ["fact_tea"]  # not twice
    assert chosen.withheld == (("fact_samuel", "fact_sam"),)

    # not picked at all: still brought in, where the conflicting fact was
    alone = manual_precedence([], [_scored(tea), _scored(samuel)], [sam])
    assert [s.fact.id for s in alone.selected] == ["fact_tea", "fact_sam"]

    # already above it: the conflicting fact only goes
    above = manual_precedence([], [_scored(sam), _scored(tea), _scored(samuel)], [sam])
    assert [s.fact.id for s in above.selected] == ["fact_sam", "fact_tea"]


def test_without_a_conflict_the_choice_is_untouched() -> None:
    go = _fact("fact_go", "Uses Go", manual=True)
    work = _fact("fact_work", "Uses Go 1.22 at work")
    guaranteed = [_scored(_fact("fact_c", "Name is spelled Zoë", category="correction"))]
    selected = [_scored(work), _scored(go)]
    chosen = manual_precedence(guaranteed, selected, [go])
    assert (list(chosen.guaranteed), list(chosen.selected)) == (guaranteed, selected)
    assert chosen.withheld == ()
    # two manual facts never withhold each other: the user wrote both
    mine = _fact("fact_mine", SAMUEL, manual=True)
    both = manual_precedence([], [_scored(mine)], [_fact("fact_sam", SAM, manual=True), mine])
    assert [s.fact.id for s in both.selected] == ["fact_mine"]


# -- end to end ------------------------------------------------------------------------------------


def _extraction(content: str, *, category: str, supersede: bool) -> Any:
    """A model that proposes ``content`` at 0.95, naming the manual fact it read in its prompt
    in ``supersedes`` when ``supersede``."""

    def answer(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        shown = {text: fact_id for fact_id, text in _FACT_LINE.findall(prompt)}
        fact: dict[str, Any] = {
            "content": content,
            "category": category,
            "confidence": 0.95,
            "sourceKind": "stated",
        }
        if supersede and SAM in shown:
            fact["supersedes"] = [shown[SAM]]
        return update_json(facts=[fact])

    return answer


def _engine(tmp_path: Path, answer: Any) -> tuple[MemoryService, ScriptedChatModel]:
    model = ScriptedChatModel(answers=[answer])
    return MemoryService(memory_config(tmp_path), model=model), model


def _converse(service: MemoryService, thread: str, user: str) -> None:
    messages = [HumanMessage(user), AIMessage("Noted, I will remember that.")]
    assert service.capture(messages, user_id="sam", thread_id=thread, now=True)
    assert service.flush(timeout=10)


def _lines(block: str, word: str) -> list[int]:
    """The numbers of the block's lines that name ``word`` (as a whole word)."""
    pattern = re.compile(rf"\b{word}\b")
    return [n for n, line in enumerate(block.splitlines()) if pattern.search(line)]


@pytest.mark.parametrize("supersede", [True, False], ids=["supersedes", "no-supersedes"])
@pytest.mark.parametrize("category", ["correction", "preference"])
def test_an_extracted_name_never_outranks_the_users_own(
    tmp_path: Path, supersede: bool, category: str
) -> None:
    service, model = _engine(tmp_path, _extraction(SAMUEL, category=category, supersede=supersede))
    scope = MemoryScope("sam", service.agent_name)
    try:
        service.change(scope, lambda m: add_fact(m, SAM, fact_id="fact_sam", now=STAMP))
        _converse(service, "t1", "From now on, please call me Samuel.")
        assert model.calls, "the extraction model was asked"
        facts = {f.content: f for f in service.get_memory("sam").facts}
        assert facts[SAM].manual and facts[SAM].status == "active"
        assert SAMUEL in facts  # stored: the console shows what extraction learnt
        if supersede:
            assert (facts[SAMUEL].status, facts[SAMUEL].supersededBy) == ("superseded", "fact_sam")

        block = service.memory_block([HumanMessage("What should you call me?")], user_id="sam")
        assert _lines(block, "Sam"), block
        assert not _lines(block, "Samuel"), block
        record = service.ledger[-1]
        shown = {f.fact_id: f.guaranteed for f in record.facts}
        assert "fact_sam" in shown and facts[SAMUEL].id not in shown
        # a guaranteed correction's slot goes to the user's own fact
        assert shown["fact_sam"] == (category == "correction" and not supersede)

        # the user's own correction still wins: edit the manual fact by hand
        service.change(scope, lambda m: edit_fact(m, "fact_sam", now=STAMP, content=SAM + "uel"))
        edited = service.memory_block([HumanMessage("What should you call me?")], user_id="sam")
        assert _lines(edited, "Samuel"), edited
        assert not _lines(edited, "Sam"), edited
    finally:
        service.close()


def test_an_agreeing_or_refining_extraction_is_kept(tmp_path: Path) -> None:
    answers = iter(
        [
            update_json(facts=[{"content": SAM, "category": "preference", "confidence": 0.95}]),
            update_json(
                facts=[
                    {"content": "Uses Go 1.22 at work", "category": "knowledge", "confidence": 0.95}
                ]
            ),
        ]
    )
    service, _ = _engine(tmp_path, lambda _messages: next(answers))
    scope = MemoryScope("sam", service.agent_name)
    try:
        service.change(scope, lambda m: add_fact(m, SAM, fact_id="fact_sam", now=STAMP))
        service.change(scope, lambda m: add_fact(m, "Uses Go", fact_id="fact_go", now=STAMP))
        _converse(service, "t1", "Yes, call me Sam, like I said.")
        _converse(service, "t2", "At work I use Go 1.22 for our services.")
        facts = {f.content: f for f in service.get_memory("sam").facts}
        assert set(facts) == {SAM, "Uses Go", "Uses Go 1.22 at work"}  # no twin of Sam
        assert all(f.status == "active" for f in facts.values())

        block = service.memory_block(
            [HumanMessage("Which Go version do I use at work, and what's my name?")],
            user_id="sam",
        )
        assert "- [context | 0.50 | noted 2026-05-07] Uses Go" in block, block
        assert "Uses Go 1.22 at work" in block, block
        assert SAM in block, block
    finally:
        service.close()

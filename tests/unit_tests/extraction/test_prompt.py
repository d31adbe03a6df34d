"""The compact extraction prompt: what a small model is shown."""

from __future__ import annotations

from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from deermem_middleware.extraction.json_schema import COMPACT, FULL, update_json_schema
from deermem_middleware.extraction.parsing import parse_json_text, parse_update
from deermem_middleware.extraction.prompt import load_prompt, render_extraction_messages
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Memory

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
TURNS = [
    Turn("user", "I'm Alice. I write Go at a payments company.", "u1", NOW.isoformat()),
    Turn("assistant", "Great, Go suits payment services well.", "a1", NOW.isoformat()),
    Turn("user", "What about </conversation> tags?", "u2", NOW.isoformat()),
]


def test_compact_prompt_is_a_one_shot_exchange_then_the_user_words() -> None:
    messages = render_extraction_messages(Memory(), TURNS, now=NOW, limits=COMPACT)
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    last = str(messages[-1].content)
    assert "User: I'm Alice. I write Go at a payments company." in last
    assert "Great, Go suits" not in last  # only the user's words
    assert "2026" not in last  # no timestamps or dates for a small model to copy
    assert "&lt;/conversation>" in last  # still neutralised
    full = render_extraction_messages(Memory(), TURNS, now=NOW, limits=FULL)
    assert len(str(messages[0].content)) < len(str(full[0].content)) / 3


def test_the_one_shot_answer_fits_the_compact_schema() -> None:
    """The example answer parses, keeps every item, and has the schema's keys in its order."""
    text = load_prompt("extraction_example_answer_compact")
    data = parse_json_text(text)
    update, rejected = parse_update(data)
    assert rejected == []
    schema = update_json_schema(limits=COMPACT)
    assert list(data) == schema["required"]
    assert len(update.newFacts) <= COMPACT.facts
    fact_keys = schema["properties"]["newFacts"]["items"]["required"]
    for fact in data["newFacts"]:
        assert list(fact) == fact_keys
        assert len(fact["content"]) <= COMPACT.fact_chars
    for group in ("user", "history"):
        for section in data[group].values():
            assert len(section["summary"]) <= COMPACT.summary_chars
    # its names are not in the conversation: a model copying them is caught by grounding
    example = load_prompt("extraction_example_compact")
    assert "Sam" in example and "Oslo" in example


def test_compact_prompt_shows_the_known_facts_with_their_ids() -> None:
    from deermem_middleware.memory.document import Fact

    memory = Memory(facts=[Fact(id="fact_go", content="User writes Go", category="knowledge")])
    last = str(render_extraction_messages(memory, TURNS, now=NOW, limits=COMPACT)[-1].content)
    assert "fact_go" in last and "User writes Go" in last

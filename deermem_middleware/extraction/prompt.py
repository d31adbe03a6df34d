"""The extraction prompt: the memory as compact lines, the new turns (with when they were said) as
data, the templates kept as files.

The templates live in the top-level ``prompts/`` folder of the source tree and are shipped inside
the wheel as ``deermem_middleware/prompts/``; :func:`load_prompt` finds them in either place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from deermem_middleware.extraction.json_schema import FULL, SchemaLimits, update_json_schema
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import (
    HISTORY_FIELDS,
    USER_FIELDS,
    Fact,
    Memory,
)
from deermem_middleware.memory.time import parse_timestamp

__all__ = ["load_prompt", "prompt_facts", "render_extraction_messages", "render_prompt"]


@cache
def load_prompt(name: str) -> str:
    """The text of prompt ``name`` (file ``prompts/<name>.md``)."""
    filename = f"{name}.md"
    packaged = resources.files("deermem_middleware").joinpath("prompts", filename)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    source_tree = Path(__file__).resolve().parents[2] / "prompts" / filename
    if source_tree.is_file():
        return source_tree.read_text(encoding="utf-8")
    raise FileNotFoundError(f"prompt template {filename!r} not found in the package or source tree")


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def render_prompt(name: str, **values: str) -> str:
    """Fill ``{{name}}`` placeholders (JSON braces in templates need no escaping)."""
    template = load_prompt(name)
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise KeyError(f"prompt {name!r} needs values for: {', '.join(sorted(missing))}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


_INVISIBLE = r"[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]*"


def _spelled(word: str) -> str:
    """``word`` in any case, in ASCII or fullwidth letters, with invisible characters anywhere
    inside: a model reads ``</conv\u200bersation>`` or a fullwidth ``＜/ｃｏｎｖ…＞`` as the tag."""
    chars = []
    for char in word:
        variants = {char, char.upper(), chr(ord(char) + 0xFEE0), chr(ord(char.upper()) + 0xFEE0)}
        chars.append("[" + "".join(sorted(re.escape(v) for v in variants)) + "]")
    return _INVISIBLE.join(chars)


_DATA_TAG = re.compile(
    rf"[<＜﹤]{_INVISIBLE}\s*[/／]?{_INVISIBLE}\s*"
    rf"(?:{_spelled('conversation')}|{_spelled('current_memory')})"
)


def _neutralise_tags(text: str) -> str:
    """Conversation text cannot close (or reopen) the data blocks it is placed in."""
    return _DATA_TAG.sub(lambda m: "&lt;" + m.group(0)[1:], text)


def prompt_facts(memory: Memory, turns: Sequence[Turn], max_facts: int) -> list[Fact]:
    """The facts shown to the extractor: the active ones, all of them or the ``max_facts`` most
    related to the new turns (those are the ones it may reinforce, replace or contradict).

    Superseded and archived facts are history: shown, the model would restate or re-add them. An
    archived fact the user states again is revived by the fact algebra without being shown.
    """
    facts = [f for f in memory.facts if f.status == "active"]
    if len(facts) <= max_facts:
        return facts
    from deermem_middleware.retrieval.scoring import (
        FactIndex,
        SelectionParams,
        SelectionQuery,
        rank,
        score_facts,
    )

    index = FactIndex(facts)
    query = SelectionQuery("\n".join(t.text for t in turns))
    scores = score_facts(index, query, SelectionParams()).score
    return [facts[i] for i in rank(index, scores, max_facts)]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _memory_for_prompt(memory: Memory, facts: Sequence[Fact]) -> str:
    """The current memory as compact lines (about half the tokens of indented JSON)."""
    lines = [
        f"{group}.{name}: {_one_line(memory.section(name).summary)}"
        for group, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS))
        for name in names
        if memory.section(name).summary
    ]
    if facts:
        lines.append("facts (id | category | confidence | content):")
        lines.extend(
            f"- {f.id} | {f.category} | {f.confidence:.2f} | {_one_line(f.content)}" for f in facts
        )
    if not lines:
        return "(empty: nothing is known about this user yet)"
    return _neutralise_tags("\n".join(lines))


def _said_at(turn: Turn) -> str:
    """`` [2026-11-30 14:02 UTC]`` when the turn knows when it was said (relative dates in it
    resolve against this), else ""."""
    moment = parse_timestamp(turn.at)
    return f" [{moment.strftime('%Y-%m-%d %H:%M')} UTC]" if moment is not None else ""


def render_extraction_messages(
    memory: Memory,
    turns: Sequence[Turn],
    *,
    now: datetime,
    facts: Sequence[Fact] | None = None,
    max_prompt_facts: int = 80,
    json_instructions: bool = False,
    string_caps: bool = True,
    limits: SchemaLimits = FULL,
) -> list[BaseMessage]:
    """System instructions + a human message holding the memory and the new turns as data.

    ``facts``: the facts to show (default: :func:`prompt_facts`). With ``limits.compact`` (a
    model allowed few output tokens, see :mod:`~deermem_middleware.extraction.json_schema`)
    the prompt is the short one a small model can follow: a one-shot example as a previous
    exchange, then only the user's messages, without times — on 40 varied conversations the
    bundled SmolLM2-135M copied the long prompt's headings, examples and timestamps into its
    facts, and with this one wrote in 2.4 s (median) what it wrote in 5.3 s, none of it cut.
    """
    if facts is None:
        facts = prompt_facts(memory, turns, max_prompt_facts)
    current_memory = _memory_for_prompt(memory, facts)
    if limits.compact:
        human = render_prompt(
            "extraction_input_compact",
            current_memory=current_memory,
            conversation="\n".join(
                f"User: {_neutralise_tags(_one_line(t.text))}" for t in turns if t.role == "user"
            ),
        )
    else:
        human = render_prompt(
            "extraction_input",
            now=now.astimezone(UTC).strftime("%Y-%m-%d"),
            current_memory=current_memory,
            conversation="\n\n".join(
                f"{'User' if t.role == 'user' else 'Assistant'}{_said_at(t)}: "
                f"{_neutralise_tags(t.text)}"
                for t in turns
            ),
        )
    if json_instructions:
        schema = json.dumps(
            update_json_schema(
                string_caps=string_caps, fact_ids=[f.id for f in facts], limits=limits
            ),
            separators=(",", ":"),
        )
        human += render_prompt("extraction_json_fallback", schema=schema)
    if limits.compact:
        return [
            SystemMessage(load_prompt("extraction_system_compact").strip()),
            HumanMessage(load_prompt("extraction_example_compact").strip()),
            AIMessage(load_prompt("extraction_example_answer_compact").strip()),
            HumanMessage(human),
        ]
    return [SystemMessage(load_prompt("extraction_system").strip()), HumanMessage(human)]

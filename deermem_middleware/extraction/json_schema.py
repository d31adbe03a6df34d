"""The JSON schema of a memory update, as sent to the model (strict-mode compatible, bounded).

Small constrained models repeat list items until the token limit unless every list and string is
capped; OpenAI's strict mode rejects string caps (``maxLength``), so they are optional. Fact ids
are constrained to the ids shown in the prompt: a grammar-constrained decoder cannot invent one.

**Facts come first.** A model writes the properties in schema order, and an answer cut at the
output limit keeps only its complete items: with the six summaries first, a small model that
rambles through them never reaches a fact (the bundled SmolLM2-135M, with a 1,024-token limit,
stored no fact in 2 of 2 demo runs). Facts are what later conversations are selected from, so
they are written before the summaries.

**The caps fit the output limit.** The full caps (20 facts of 400 characters, six summaries of
800) can take some 6,000 tokens of JSON; a model allowed 1,024 (llama.cpp servers and small
local models are often run with that) is cut long before the end. :func:`limits_for_output`
picks the :data:`COMPACT` caps for such a model — their worst case, at the 2.7 characters per
token SmolLM2 writes indented JSON at, fits in 1,024 tokens — and the :data:`FULL` caps
otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from deermem_middleware.memory.document import (
    FACT_CATEGORIES,
    HISTORY_FIELDS,
    MAX_DATE_CHARS,
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_FACT_CHARS,
    MAX_FACTS_PER_UPDATE,
    MAX_REMOVALS_PER_UPDATE,
    MAX_SUMMARY_CHARS,
    MAX_SUPERSEDES_PER_FACT,
    USER_FIELDS,
)
from deermem_middleware.memory.sections import SECTIONS

__all__ = [
    "CHARS_PER_TOKEN",
    "COMPACT",
    "COMPACT_OUTPUT_TOKENS",
    "CONFIDENCE_LEVELS",
    "FULL",
    "SchemaLimits",
    "limits_for_output",
    "update_json_schema",
    "worst_case_chars",
]


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """How many items and characters the schema allows (``maxItems`` always, ``maxLength`` only
    with string caps)."""

    facts: int = MAX_FACTS_PER_UPDATE
    fact_chars: int = MAX_FACT_CHARS
    summary_chars: int = MAX_SUMMARY_CHARS
    entities: int = MAX_ENTITIES
    entity_chars: int = MAX_ENTITY_CHARS
    removals: int = MAX_REMOVALS_PER_UPDATE
    supersedes: int = MAX_SUPERSEDES_PER_FACT
    compact: bool = False
    """Ask with the short one-shot prompt (``prompts/extraction_*_compact.md``) that asks for
    what these caps allow."""


FULL: Final = SchemaLimits()
"""What the stored document allows: for models with room to write it."""

COMPACT: Final = SchemaLimits(
    facts=3, fact_chars=140, summary_chars=96, entities=2, entity_chars=20, removals=2,
    supersedes=1, compact=True,
)  # fmt: skip
"""For a model allowed at most :data:`COMPACT_OUTPUT_TOKENS` output tokens: three short facts
and one-sentence summaries (an update of one conversation rarely has more that is durable)."""

COMPACT_OUTPUT_TOKENS: Final = 1024
"""An extraction model whose output limit is at most this gets the :data:`COMPACT` caps."""

CHARS_PER_TOKEN: Final = 2.7
"""Characters of indented JSON per token, as SmolLM2-135M writes it under llama.cpp's grammar
(measured: 2,751 characters in 1,024 tokens); a conservative figure for larger tokenizers."""


def limits_for_output(max_output_tokens: int | None) -> SchemaLimits:
    """The caps for a model allowed ``max_output_tokens`` (None: no limit known)."""
    if max_output_tokens is not None and max_output_tokens <= COMPACT_OUTPUT_TOKENS:
        return COMPACT
    return FULL


_ID_CHARS: Final = 24
"""A fact id as written (``"fact_1a2b3c4d5e6f"``)."""
_SECTION_OVERHEAD: Final = 75
"""Key, ``shouldUpdate``, ``summary`` and indentation of one section."""
_FACT_OVERHEAD: Final = 230
"""Keys, category, confidence, sourceKind, dates and indentation of one fact."""
_ENVELOPE: Final = 120
"""The top-level keys and brackets."""


def worst_case_chars(limits: SchemaLimits) -> int:
    """The longest answer the schema allows, in characters (strings at their caps, lists full,
    dates at their caps), for checking a :class:`SchemaLimits` against an output limit."""
    sections = len(USER_FIELDS) + len(HISTORY_FIELDS)
    fact = (
        _FACT_OVERHEAD
        + limits.fact_chars
        + 2 * MAX_DATE_CHARS
        + limits.entities * (limits.entity_chars + 6)
        + limits.supersedes * (_ID_CHARS + 6)
    )
    return (
        _ENVELOPE
        + sections * (_SECTION_OVERHEAD + limits.summary_chars)
        + limits.facts * fact
        + limits.removals * (_ID_CHARS + 6)
    )


_DESCRIPTIONS = {spec.name: spec.description for spec in SECTIONS}


def _string(max_length: int, description: str, *, caps: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if caps:
        schema["maxLength"] = max_length
    return schema


CONFIDENCE_LEVELS: Final = (0.6, 0.7, 0.8, 0.9, 1.0)
"""What a grammar lets a small model write as a confidence in the compact shape: free, the
bundled SmolLM2-135M wrote "1.25" or "5.38" for a plain statement (read as percentages: 0.0125,
0.0538, so the fact was discarded) in 21 of 119 proposals over 60 conversations."""


def _confidence(limits: SchemaLimits, *, caps: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number", "description": "From 0.0 to 1.0."}
    if caps and limits.compact:
        schema["enum"] = list(CONFIDENCE_LEVELS)
    return schema


def _section_schema(description: str, max_chars: int, *, caps: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": {
            "shouldUpdate": {"type": "boolean"},
            "summary": _string(
                max_chars, "The whole new summary, or empty when not updating.", caps=caps
            ),
        },
        "required": ["shouldUpdate", "summary"],
        "additionalProperties": False,
    }


def update_json_schema(
    *,
    string_caps: bool = True,
    fact_ids: Sequence[str] | None = None,
    limits: SchemaLimits = FULL,
) -> dict[str, Any]:
    """The JSON schema of :class:`MemoryUpdate` as sent to the model.

    Strict-mode compatible (every property required, no additional properties, no numeric ranges).
    ``string_caps`` adds ``maxLength`` to strings: grammar-constrained local servers need it,
    OpenAI's strict mode rejects it (lists keep ``maxItems`` either way). ``fact_ids``: the ids
    shown in the prompt; ``factsToRemove`` and each new fact's ``supersedes`` may then only name
    those (a constrained decoder cannot invent ids, and with no facts shown it cannot remove or
    replace anything). ``limits``: the caps (see :func:`limits_for_output`). ``newFacts`` comes
    first (see the module docstring).
    """
    ids = None if fact_ids is None else list(dict.fromkeys(fact_ids))

    def id_list(max_items: int, description: str) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "string"}
        schema: dict[str, Any] = {
            "type": "array",
            "description": description,
            "maxItems": max_items,
        }
        if ids is not None:
            if ids:
                item["enum"] = ids
            else:
                schema["maxItems"] = 0
        schema["items"] = item
        return schema

    removals = id_list(
        limits.removals, "Ids of facts that were wrong or that the user asked to forget."
    )

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                n: _section_schema(_DESCRIPTIONS[n], limits.summary_chars, caps=string_caps)
                for n in names
            },
            "required": list(names),
            "additionalProperties": False,
        }

    return {
        "title": "MemoryUpdate",
        "description": "An update to the long-term memory about the user.",
        "type": "object",
        "properties": {
            "newFacts": {
                "type": "array",
                "maxItems": limits.facts,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": _string(
                            limits.fact_chars,
                            "One self-contained fact about the user, in the third person.",
                            caps=string_caps,
                        ),
                        "category": {"type": "string", "enum": list(FACT_CATEGORIES)},
                        "confidence": _confidence(limits, caps=string_caps),
                        "sourceKind": {
                            "type": "string",
                            "enum": ["stated", "inferred"],
                            "description": "stated: the user said it explicitly.",
                        },
                        "supersedes": id_list(
                            limits.supersedes,
                            "Ids of facts this one replaces because something changed.",
                        ),
                        "eventAt": _string(
                            MAX_DATE_CHARS,
                            "When the event happened or will happen, as an ISO date "
                            '(2026-05-07, 2026-05 or 2026); "" when not about an event in time.',
                            caps=string_caps,
                        ),
                        "validUntil": _string(
                            MAX_DATE_CHARS,
                            'Last day a short-lived fact holds, as an ISO date; "" otherwise.',
                            caps=string_caps,
                        ),
                        "entities": {
                            "type": "array",
                            "maxItems": limits.entities,
                            "items": _string(limits.entity_chars, "A name.", caps=string_caps),
                            "description": "People, products and places the fact names; "
                            "may be empty.",
                        },
                    },
                    "required": [
                        "content",
                        "category",
                        "confidence",
                        "sourceKind",
                        "supersedes",
                        "eventAt",
                        "validUntil",
                        "entities",
                    ],
                    "additionalProperties": False,
                },
            },
            "factsToRemove": removals,
            "user": group(USER_FIELDS),
            "history": group(HISTORY_FIELDS),
        },
        "required": ["newFacts", "factsToRemove", "user", "history"],
        "additionalProperties": False,
    }

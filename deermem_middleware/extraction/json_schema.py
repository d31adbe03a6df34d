"""The JSON schema of a memory update, as sent to the model (strict-mode compatible, bounded).

Small constrained models repeat list items until the token limit unless every list and string is
capped; OpenAI's strict mode rejects string caps (``maxLength``), so they are optional. Fact ids
are constrained to the ids shown in the prompt: a grammar-constrained decoder cannot invent one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

__all__ = ["update_json_schema"]


_DESCRIPTIONS = {spec.name: spec.description for spec in SECTIONS}


def _string(max_length: int, description: str, *, caps: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if caps:
        schema["maxLength"] = max_length
    return schema


def _section_schema(description: str, *, caps: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": {
            "shouldUpdate": {"type": "boolean"},
            "summary": _string(
                MAX_SUMMARY_CHARS, "The whole new summary, or empty when not updating.", caps=caps
            ),
        },
        "required": ["shouldUpdate", "summary"],
        "additionalProperties": False,
    }


def update_json_schema(
    *, string_caps: bool = True, fact_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON schema of :class:`MemoryUpdate` as sent to the model.

    Strict-mode compatible (every property required, no additional properties, no numeric ranges).
    ``string_caps`` adds ``maxLength`` to strings: grammar-constrained local servers need it,
    OpenAI's strict mode rejects it (lists keep ``maxItems`` either way). ``fact_ids``: the ids
    shown in the prompt; ``factsToRemove`` and each new fact's ``supersedes`` may then only name
    those (a constrained decoder cannot invent ids, and with no facts shown it cannot remove or
    replace anything).
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
        MAX_REMOVALS_PER_UPDATE, "Ids of facts that were wrong or that the user asked to forget."
    )

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {n: _section_schema(_DESCRIPTIONS[n], caps=string_caps) for n in names},
            "required": list(names),
            "additionalProperties": False,
        }

    return {
        "title": "MemoryUpdate",
        "description": "An update to the long-term memory about the user.",
        "type": "object",
        "properties": {
            "user": group(USER_FIELDS),
            "history": group(HISTORY_FIELDS),
            "newFacts": {
                "type": "array",
                "maxItems": MAX_FACTS_PER_UPDATE,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": _string(
                            MAX_FACT_CHARS, "One self-contained fact.", caps=string_caps
                        ),
                        "category": {"type": "string", "enum": list(FACT_CATEGORIES)},
                        "confidence": {"type": "number", "description": "From 0.0 to 1.0."},
                        "sourceKind": {
                            "type": "string",
                            "enum": ["stated", "inferred"],
                            "description": "stated: the user said it explicitly.",
                        },
                        "supersedes": id_list(
                            MAX_SUPERSEDES_PER_FACT,
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
                            "maxItems": MAX_ENTITIES,
                            "items": _string(MAX_ENTITY_CHARS, "A name.", caps=string_caps),
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
        },
        "required": ["user", "history", "newFacts", "factsToRemove"],
        "additionalProperties": False,
    }

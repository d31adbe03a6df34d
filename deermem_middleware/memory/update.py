"""What the extraction LLM returns: the memory update, bounded and lenient, item by item.

``MemoryUpdate`` is what the extraction LLM returns. It is *bounded*: every list and string has a
cap, because small constrained models otherwise repeat list items until the token limit, and a
hostile or broken output must never be able to blow up the stored document. Confidence is clamped
by a validator rather than by ``ge``/``le`` in the JSON schema: grammar-constrained decoders ignore
float ranges, and a strict SDK would then reject the whole answer instead of one field. Odd
spellings (a category ``"skills"``, a ``sourceKind`` ``"explicit"``, an unreadable date) cost the
field, never the fact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from deermem_middleware.memory.document import (
    FACT_CATEGORIES,
    MAX_DATE_CHARS,
    MAX_FACT_CHARS,
    MAX_FACT_ID_CHARS,
    MAX_FACTS_PER_UPDATE,
    MAX_REMOVALS_PER_UPDATE,
    MAX_SUMMARY_CHARS,
    MAX_SUPERSEDES_PER_FACT,
    SECTION_FIELDS,
    USER_FIELDS,
    FactCategory,
    SourceKind,
    coerce_confidence,
    is_invisible,
)
from deermem_middleware.memory.time import normalize_event_date
from deermem_middleware.memory.values import cap_list, clean_text, entity_list, truncating

__all__ = [
    "MAX_DATE_CHARS",
    "MAX_FACTS_PER_UPDATE",
    "MAX_REMOVALS_PER_UPDATE",
    "MAX_SUPERSEDES_PER_FACT",
    "HistoryUpdate",
    "MemoryUpdate",
    "NewFact",
    "SectionUpdate",
    "UserUpdate",
]

_LLM = ConfigDict(extra="ignore")

_CATEGORY_ALIASES: Final = {
    "preferences": "preference",
    "like": "preference",
    "likes": "preference",
    "fact": "knowledge",
    "skill": "knowledge",
    "skills": "knowledge",
    "expertise": "knowledge",
    "background": "context",
    "personal": "context",
    "work": "context",
    "habit": "behavior",
    "behaviour": "behavior",
    "goals": "goal",
    "plan": "goal",
    "corrections": "correction",
}


def _category(value: Any) -> Any:
    """Map near-miss category names onto the fixed set; unknown names become ``context``."""
    if not isinstance(value, str):
        return value
    key = re.sub(r"[^a-z]", "", value.strip().lower())
    if key in FACT_CATEGORIES:
        return key
    return _CATEGORY_ALIASES.get(key, "context")


class SectionUpdate(BaseModel):
    """One summary field in the LLM's answer."""

    model_config = _LLM

    shouldUpdate: bool = False
    summary: Annotated[
        str,
        truncating(MAX_SUMMARY_CHARS),
        BeforeValidator(clean_text),
        Field(max_length=MAX_SUMMARY_CHARS),
    ] = ""

    @field_validator("summary", mode="after")
    @classmethod
    def _blank_if_invisible(cls, value: str) -> str:
        # only zero-width or control characters: nothing to store (the section is then kept)
        return "" if is_invisible(value) else value


_SOURCE_KIND_ALIASES: Final = {
    "stated": "stated",
    "explicit": "stated",
    "said": "stated",
    "user": "stated",
    "inferred": "inferred",
    "implicit": "inferred",
    "implied": "inferred",
    "inference": "inferred",
    "guess": "inferred",
}


def _source_kind(value: Any) -> Any:
    """Near-miss spellings map onto the two kinds; anything else is "not said" (None), so a
    model's odd label costs the fact its provenance, never the fact itself."""
    if value is None or not isinstance(value, str):
        return None
    return _SOURCE_KIND_ALIASES.get(re.sub(r"[^a-z]", "", value.strip().lower()))


def _event_date(value: Any) -> str | None:
    """A model's date as a partial ISO date (``2023``, ``2023-05``, ``2023-W18``,
    ``2023-05-07``); anything unreadable is "unknown" (None), never a reason to drop the fact."""
    return normalize_event_date(value)


def _fact_ids(limit: int) -> BeforeValidator:
    """A lenient list of fact ids: one bare id becomes a list, ``{"id": ...}`` objects are
    unwrapped, blank/over-long/non-string items are dropped, duplicates collapse, the list is
    capped. A bad id must not cost the fact that names it."""

    def clean(value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):
            return []
        ids: list[str] = []
        for item in value:
            if isinstance(item, Mapping):
                item = item.get("id")
            if not isinstance(item, str):
                continue
            item = item.strip()
            if item and len(item) <= MAX_FACT_ID_CHARS and item not in ids:
                ids.append(item)
        return ids[:limit]

    return BeforeValidator(clean)


class NewFact(BaseModel):
    """One fact proposed by the extraction.

    ``supersedes`` names existing facts this one *replaces* (the user changed something: they are
    kept as history, marked ``superseded``), as opposed to ``factsToRemove`` (they were wrong or the
    user asked to forget them: deleted). ``sourceKind`` says whether the user said it explicitly.
    """

    model_config = _LLM

    content: Annotated[
        str,
        truncating(MAX_FACT_CHARS),
        BeforeValidator(clean_text),
        Field(min_length=1, max_length=MAX_FACT_CHARS),
    ]
    category: Annotated[FactCategory, BeforeValidator(_category)] = "context"
    confidence: float = Field(
        default=0.8, description="How sure you are, from 0.0 (guess) to 1.0 (stated explicitly)."
    )
    sourceKind: Annotated[SourceKind | None, BeforeValidator(_source_kind)] = None
    supersedes: Annotated[list[str], _fact_ids(MAX_SUPERSEDES_PER_FACT)] = Field(
        default_factory=list
    )
    eventAt: Annotated[str | None, BeforeValidator(_event_date)] = None
    """When the event happened, as a (partial) ISO date; unreadable dates become None."""
    validUntil: Annotated[str | None, BeforeValidator(_event_date)] = None
    """Last day a transient fact holds; unreadable dates become None."""
    entities: Annotated[tuple[str, ...], BeforeValidator(entity_list)] = ()
    """The people, products and places the fact names (optional; odd items are dropped, never
    the fact)."""

    @field_validator("content", mode="after")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.strip()
        if is_invisible(value):
            raise ValueError("fact content is blank")
        return value

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> float:
        return coerce_confidence(value)


FactId = Annotated[str, Field(min_length=1, max_length=MAX_FACT_ID_CHARS)]


class UserUpdate(BaseModel):
    model_config = _LLM

    workContext: SectionUpdate = Field(default_factory=SectionUpdate)
    personalContext: SectionUpdate = Field(default_factory=SectionUpdate)
    topOfMind: SectionUpdate = Field(default_factory=SectionUpdate)


class HistoryUpdate(BaseModel):
    model_config = _LLM

    recentMonths: SectionUpdate = Field(default_factory=SectionUpdate)
    earlierContext: SectionUpdate = Field(default_factory=SectionUpdate)
    longTermBackground: SectionUpdate = Field(default_factory=SectionUpdate)


class MemoryUpdate(BaseModel):
    """What the extraction LLM returns (its JSON schema is derived from this model).

    Parsing is done item by item in ``extraction.parse_update`` so that one bad fact or section is
    dropped on its own; a missing section means "do not update it".
    """

    model_config = _LLM

    user: UserUpdate = Field(default_factory=UserUpdate)
    history: HistoryUpdate = Field(default_factory=HistoryUpdate)
    newFacts: Annotated[
        list[NewFact], cap_list(MAX_FACTS_PER_UPDATE), Field(max_length=MAX_FACTS_PER_UPDATE)
    ] = Field(default_factory=list)
    factsToRemove: Annotated[
        list[FactId], cap_list(MAX_REMOVALS_PER_UPDATE), Field(max_length=MAX_REMOVALS_PER_UPDATE)
    ] = Field(default_factory=list)

    def section(self, name: str) -> SectionUpdate:
        group: BaseModel = self.user if name in USER_FIELDS else self.history
        if name not in SECTION_FIELDS:
            raise KeyError(name)
        section: SectionUpdate = getattr(group, name)
        return section

    @property
    def is_empty(self) -> bool:
        return (
            not any(self.section(name).shouldUpdate for name in SECTION_FIELDS)
            and not self.newFacts
            and not self.factsToRemove
        )

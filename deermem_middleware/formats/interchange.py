"""Documents that come from outside — an import file, a hand-edited export — held to the same caps
as what the extraction writes (pure).

A memory document that an extraction produces can never hold a 5,000-character fact, a
100,000-character summary or more facts than ``max_facts``: the update is validated and capped
item by item. An import used to bypass all of it ("500 facts added" with ``max_facts: 100``, a fact
of 5,009 characters), and the next update then silently trimmed what the import had added.
:func:`cap_document` applies the caps once, on the way in, and says what it cut so the importer
can tell the person who imported.

Reading such a document leniently before that, one fact at a time (DeerFlow's files, our older
ones), is :mod:`~deermem_middleware.formats.repair`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deermem_middleware.memory.capacity import record_trim
from deermem_middleware.memory.document import (
    MAX_FACT_CHARS,
    MAX_SUMMARY_CHARS,
    SECTION_FIELDS,
    USER_FIELDS,
    Fact,
    Memory,
)
from deermem_middleware.memory.facts import trim_facts
from deermem_middleware.memory.values import MAX_CATEGORY_CHARS, cap_text, invalid_text
from deermem_middleware.memory.watermark import MAX_WATERMARKS, newest_watermarks

__all__ = ["MAX_CATEGORY_CHARS", "CapReport", "cap_document", "cap_text", "invalid_text"]


@dataclass
class CapReport:
    """What :func:`cap_document` changed (counts and names; empty when nothing)."""

    facts_cut: int = 0
    summaries_cut: list[str] = field(default_factory=list)
    categories_cut: int = 0
    text_repaired: int = 0
    facts_over_capacity: list[str] = field(default_factory=list)
    watermarks_dropped: int = 0
    max_facts: int | None = None
    """The capacity the facts were held to (named in the note)."""

    @property
    def changed(self) -> bool:
        return bool(self.notes())

    def notes(self) -> list[str]:
        """One short phrase per kind of change, for the person who imported."""
        notes = []
        if self.facts_cut:
            notes.append(f"{self.facts_cut} fact(s) cut to {MAX_FACT_CHARS} characters")
        if self.summaries_cut:
            notes.append(
                f"{len(self.summaries_cut)} summary(ies) cut to {MAX_SUMMARY_CHARS} characters "
                f"({', '.join(self.summaries_cut)})"
            )
        if self.categories_cut:
            notes.append(f"{self.categories_cut} category name(s) cut")
        if self.text_repaired:
            notes.append(f"{self.text_repaired} text(s) with invalid characters repaired")
        if self.facts_over_capacity:
            limit = f"max_facts is {self.max_facts}; " if self.max_facts is not None else ""
            notes.append(
                f"{len(self.facts_over_capacity)} fact(s) over max_facts not kept ({limit}the "
                "least valuable: superseded and archived first, then the least confident; "
                "raise max_facts and import again to keep them)"
            )
        if self.watermarks_dropped:
            notes.append(f"{self.watermarks_dropped} thread watermark(s) beyond {MAX_WATERMARKS}")
        return notes


def _capped_fact(fact: Fact, report: CapReport) -> Fact:
    update: dict[str, object] = {}
    content = cap_text(fact.content, MAX_FACT_CHARS)
    if content != fact.content:
        if invalid_text(fact.content):
            report.text_repaired += 1
        if len(fact.content) > MAX_FACT_CHARS:
            report.facts_cut += 1
        update["content"] = content
    category = cap_text(fact.category, MAX_CATEGORY_CHARS)
    if category != fact.category:
        report.categories_cut += 1
        update["category"] = category
    return fact.model_copy(update=update) if update else fact


def cap_document(memory: Memory, *, max_facts: int, now: str) -> tuple[Memory, CapReport]:
    """``memory`` within the caps extracted data has: fact and summary lengths, valid text,
    ``max_facts`` (the least valuable facts go, as
    :func:`~deermem_middleware.memory.facts.trim_facts` decides, and are counted at ``now`` in
    the document's ``trimmed``: :mod:`~deermem_middleware.memory.capacity`) and the number of
    thread watermarks. Returns the capped document and what was cut."""
    report = CapReport(max_facts=max_facts)
    facts = [_capped_fact(f, report) for f in memory.facts]
    kept, dropped = trim_facts(facts, max_facts)
    report.facts_over_capacity = [f.id for f in dropped]
    memory = record_trim(memory, len(dropped), now)
    changes: dict[str, object] = {"facts": tuple(kept)}
    user, history = memory.user, memory.history
    for name in SECTION_FIELDS:
        section = memory.section(name)
        summary = cap_text(section.summary, MAX_SUMMARY_CHARS)
        if summary == section.summary:
            continue
        if len(section.summary) > MAX_SUMMARY_CHARS:
            report.summaries_cut.append(name)
        else:
            report.text_repaired += 1
        capped = section.model_copy(update={"summary": summary})
        if name in USER_FIELDS:
            user = user.model_copy(update={name: capped})
        else:
            history = history.model_copy(update={name: capped})
    changes.update(user=user, history=history)
    if len(memory.watermarks) > MAX_WATERMARKS:
        changes["watermarks"] = newest_watermarks(memory.watermarks)
        report.watermarks_dropped = len(memory.watermarks) - MAX_WATERMARKS
    return memory.model_copy(update=changes), report

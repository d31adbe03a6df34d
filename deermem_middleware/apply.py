"""One whole update applied to a memory document (pure).

This is the single place that turns (memory, validated update, where it came from, when) into the
next memory. The updater calls it once, and again after a revision conflict on the freshly loaded
document — so a concurrent writer's work is kept and ours is re-applied on top.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from .facts import FactChanges, apply_facts
from .schema import Memory, MemoryUpdate, Watermark, new_fact_id, utc_now_iso
from .summaries import apply_sections

__all__ = ["MAX_WATERMARKS", "ApplyReport", "advance_watermark", "apply_update"]

MAX_WATERMARKS = 512
"""Threads whose watermark we keep per scope; the least recently updated are forgotten first
(forgetting one only means an old thread, if it ever comes back, is re-read once)."""


@dataclass
class ApplyReport:
    sections: list[str] = field(default_factory=list)
    facts: FactChanges = field(default_factory=FactChanges)

    @property
    def changed(self) -> bool:
        return bool(self.sections) or self.facts.changed

    def summary(self) -> dict[str, int]:
        return {
            "sections": len(self.sections),
            "added": len(self.facts.added),
            "reinforced": len(self.facts.reinforced),
            "removed": len(self.facts.removed),
            "trimmed": len(self.facts.trimmed),
            "below_threshold": self.facts.below_threshold,
        }


def advance_watermark(
    memory: Memory,
    thread_id: str,
    turn: str,
    *,
    count: int,
    now: datetime,
    position: int | None = None,
) -> Memory:
    """Record that ``thread_id`` has been distilled up to the turn fingerprinted ``turn`` (the
    ``position``-th turn of the conversation)."""
    marks = dict(memory.watermarks)
    previous = marks.pop(thread_id, None)
    total = (previous.count if previous else 0) + count
    marks[thread_id] = Watermark(
        turn=turn, count=total, updatedAt=utc_now_iso(now), position=position
    )
    if len(marks) > MAX_WATERMARKS:
        ordered = sorted(marks.items(), key=lambda kv: kv[1].updatedAt)
        marks = dict(ordered[len(marks) - MAX_WATERMARKS :])
    return memory.model_copy(update={"watermarks": marks})


def apply_update(
    memory: Memory,
    update: MemoryUpdate,
    *,
    now: datetime,
    threshold: float,
    max_facts: int,
    source: str | None = None,
    id_factory: Callable[[], str] = new_fact_id,
) -> tuple[Memory, ApplyReport]:
    """Sections first, then facts; ``lastUpdated`` moves only when something changed."""
    report = ApplyReport()
    memory, report.sections = apply_sections(memory, update, now=now)
    facts, report.facts = apply_facts(
        memory.facts,
        update.newFacts,
        update.factsToRemove,
        now=now,
        threshold=threshold,
        max_facts=max_facts,
        source=source,
        id_factory=id_factory,
    )
    changes: dict[str, object] = {"facts": tuple(facts)}
    if report.changed:
        changes["lastUpdated"] = utc_now_iso(now)
    return memory.model_copy(update=changes), report

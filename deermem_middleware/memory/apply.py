"""One whole update applied to a memory document (pure).

This is the single place that turns (memory, validated update, where it came from, when) into the
next memory. The updater calls it once, and again after a revision conflict on the freshly loaded
document — so a concurrent writer's work is kept and ours is re-applied on top.

Transient facts whose ``validUntil`` passed are archived here too, on every update (and, with the
opt-in ``archive_floor``, facts that decayed below it): the document is only rewritten when a
conversation produced an update, so that is when time catches up with it (readers that need decay
between updates use :func:`~deermem_middleware.memory.decay.effective_confidence`).

Facts over ``max_facts`` are deleted here (the least valuable go) and counted in the document's
``trimmed`` counter (:mod:`~deermem_middleware.memory.capacity` says why deleted, not archived);
the updater logs both, with the user, the agent and the count, once the update is saved.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from deermem_middleware.memory.capacity import record_trim
from deermem_middleware.memory.decay import DEFAULT_HALF_LIFE_DAYS
from deermem_middleware.memory.document import (
    SECTION_FIELDS,
    USER_FIELDS,
    Memory,
    Section,
    new_fact_id,
    utc_now_iso,
)
from deermem_middleware.memory.facts import NEAR_DUPLICATE_THRESHOLD, FactChanges, apply_facts
from deermem_middleware.memory.update import MemoryUpdate

__all__ = ["ApplyReport", "apply_sections", "apply_update", "without_repeated_sentences"]

logger = logging.getLogger(__name__)


@dataclass
class ApplyReport:
    sections: list[str] = field(default_factory=list)
    facts: FactChanges = field(default_factory=FactChanges)

    @property
    def changed(self) -> bool:
        return bool(self.sections) or self.facts.changed

    def summary(self) -> dict[str, int]:
        """Counts for the log line (keys are stable; new ones are only ever appended)."""
        return {
            "sections": len(self.sections),
            "added": len(self.facts.added),
            "reinforced": len(self.facts.reinforced),
            "removed": len(self.facts.removed),
            "trimmed": len(self.facts.trimmed),
            "below_threshold": self.facts.below_threshold,
            "superseded": len(self.facts.superseded),
            "archived": len(self.facts.archived),
            "revived": len(self.facts.revived),
            "kept_manual": len(self.facts.kept_manual),
            "overruled": len(self.facts.overruled),
        }


def apply_update(
    memory: Memory,
    update: MemoryUpdate,
    *,
    now: datetime,
    threshold: float,
    max_facts: int,
    source: str | None = None,
    id_factory: Callable[[], str] = new_fact_id,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    archive_floor: float | None = None,
    near_duplicate_threshold: float = NEAR_DUPLICATE_THRESHOLD,
    said_at: datetime | None = None,
) -> tuple[Memory, ApplyReport]:
    """Sections first, then facts; ``lastUpdated`` moves only when something changed.

    ``half_lives`` (days per category, over
    :data:`~deermem_middleware.memory.decay.DEFAULT_HALF_LIVES`), ``default_half_life_days`` and
    ``archive_floor`` drive the opt-in archiving by decay (None or 0, the default: nothing is
    archived for its age); ``near_duplicate_threshold`` when a new fact reinforces a known one (see
    :mod:`deermem_middleware.memory.facts`); ``said_at`` when the user said it (relative dates in
    new facts resolve against it; default ``now``).
    """
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
        near_duplicate_threshold=near_duplicate_threshold,
        archive_floor=archive_floor,
        half_lives=half_lives,
        default_half_life_days=default_half_life_days,
        said_at=said_at,
    )
    changes: dict[str, object] = {"facts": tuple(facts)}
    if report.changed:
        changes["lastUpdated"] = utc_now_iso(now)
    memory = record_trim(memory, len(report.facts.trimmed), utc_now_iso(now))
    return memory.model_copy(update=changes), report


def apply_sections(
    memory: Memory, update: MemoryUpdate, *, now: datetime
) -> tuple[Memory, list[str]]:
    """Return the memory with the sections the update rewrites, and the names of those sections.

    A section is rewritten only when the LLM set ``shouldUpdate`` *and* gave a non-blank summary:
    an empty summary with ``shouldUpdate: true`` is far more often a small model's slip than a
    request to erase what we know, and erasing is what a person does through the CLI, not a side
    effect.

    A sentence the update already wrote into an earlier section is left out of the later ones
    (:func:`without_repeated_sentences`): a small model copies one sentence into three sections
    (the bundled 135M model wrote the same two sentences as ``topOfMind``, ``recentMonths`` and
    ``longTermBackground``), and the block would show it three times.
    """
    stamp = utc_now_iso(now)
    user_changes: dict[str, Section] = {}
    history_changes: dict[str, Section] = {}
    changed: list[str] = []
    written: set[str] = set()
    for name in SECTION_FIELDS:
        proposal = update.section(name)
        if not proposal.shouldUpdate:
            continue
        summary, repeated = without_repeated_sentences(proposal.summary.strip(), written)
        if repeated and not summary:
            logger.info("memory section %s: only repeats an earlier section, kept as is", name)
            continue
        if not summary:
            logger.info("memory section %s: shouldUpdate with an empty summary, kept as is", name)
            continue
        current = memory.section(name)
        if summary == current.summary:
            continue
        section = current.model_copy(update={"summary": summary, "updatedAt": stamp})
        (user_changes if name in USER_FIELDS else history_changes)[name] = section
        changed.append(name)
    if not changed:
        return memory, []
    return (
        memory.model_copy(
            update={
                "user": memory.user.model_copy(update=user_changes),
                "history": memory.history.model_copy(update=history_changes),
            }
        ),
        changed,
    )


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def _sentence_key(sentence: str) -> str:
    return " ".join(sentence.casefold().split()).rstrip(".!?。！？ ")


def without_repeated_sentences(summary: str, written: set[str]) -> tuple[str, bool]:
    """``summary`` without the sentences already in ``written`` (compared casefolded, spaces and
    end punctuation aside), and whether any was left out; ``written`` gains the sentences
    kept. A sentence repeated inside one summary is kept once too. Nothing left out: the
    summary exactly as it was."""
    kept: list[str] = []
    repeated = False
    for sentence in (s.strip() for s in _SENTENCE_END.split(summary)):
        if not sentence:
            continue
        key = _sentence_key(sentence)
        if key in written:
            repeated = True
            continue
        written.add(key)
        kept.append(sentence)
    if not repeated:
        return summary, False
    text = ""
    for sentence in kept:  # no space after a CJK full stop, as the text had none
        text += sentence if not text or text[-1] in "。！？" else " " + sentence
    return text, True

"""The fact algebra: add, reinforce, remove, trim (pure; clock and id factory injected).

Rules:
- a new fact below ``threshold`` confidence is not kept (DeerFlow's ``fact_confidence_threshold``);
- a new fact equal to a known one after normalisation (case, width, whitespace, trailing
  punctuation) *reinforces* it — confidence becomes the max of both, ``updatedAt`` moves — instead
  of piling up duplicates;
- ``factsToRemove`` removes by id; unknown ids are ignored and reported;
- the list is trimmed to ``max_facts`` keeping the most confident, then the most recent.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .schema import Fact, NewFact, new_fact_id, utc_now_iso

__all__ = ["FactChanges", "apply_facts", "normalize_fact_text", "trim_facts"]

logger = logging.getLogger(__name__)

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)


def normalize_fact_text(text: str) -> str:
    """The comparison key of a fact: NFKC, casefolded, single-spaced, no edge punctuation.

    Format characters (zero-width spaces and joiners, direction marks) are dropped too: a model
    echoing a known fact with one of them inside must reinforce it, not add an invisible twin.
    """
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _SPACE.sub(" ", folded).strip()
    stripped = _EDGE_PUNCT.sub("", folded)
    return stripped or folded


@dataclass
class FactChanges:
    """What an application of new facts and removals did, for logs and reports."""

    added: list[str] = field(default_factory=list)
    reinforced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    trimmed: list[str] = field(default_factory=list)
    below_threshold: int = 0
    unknown_removals: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.reinforced or self.removed or self.trimmed)


def _recency(fact: Fact) -> str:
    return fact.updatedAt or fact.createdAt or ""


def trim_facts(facts: Sequence[Fact], max_facts: int) -> tuple[list[Fact], list[Fact]]:
    """Keep the ``max_facts`` most confident facts (ties: most recently updated); keep order.

    Returns (kept, dropped).
    """
    if max_facts < 0 or len(facts) <= max_facts:
        return list(facts), []
    ranked = sorted(
        range(len(facts)),
        key=lambda i: (facts[i].confidence, _recency(facts[i]), i),
        reverse=True,
    )
    keep = set(ranked[:max_facts])
    kept = [f for i, f in enumerate(facts) if i in keep]
    dropped = [f for i, f in enumerate(facts) if i not in keep]
    return kept, dropped


def apply_facts(
    facts: Sequence[Fact],
    new_facts: Iterable[NewFact],
    remove_ids: Iterable[str],
    *,
    now: datetime,
    threshold: float,
    max_facts: int,
    source: str | None = None,
    id_factory: Callable[[], str] = new_fact_id,
) -> tuple[list[Fact], FactChanges]:
    """Apply removals, then additions/reinforcements, then the cap. Never mutates its inputs."""
    stamp = utc_now_iso(now)
    changes = FactChanges()

    removals = set(remove_ids)
    present = {f.id for f in facts}
    changes.unknown_removals = sorted(removals - present)
    for fact_id in changes.unknown_removals:
        logger.info("factsToRemove: unknown fact id %r ignored", fact_id)
    result = [f for f in facts if f.id not in removals]
    changes.removed = [f.id for f in facts if f.id in removals]

    by_key = {normalize_fact_text(f.content): i for i, f in enumerate(result)}
    for proposal in new_facts:
        if proposal.confidence < threshold:
            changes.below_threshold += 1
            logger.debug(
                "new fact below threshold (%.2f < %.2f): %r",
                proposal.confidence,
                threshold,
                proposal.content[:80],
            )
            continue
        key = normalize_fact_text(proposal.content)
        if key in by_key:
            index = by_key[key]
            known = result[index]
            result[index] = known.model_copy(
                update={
                    "confidence": max(known.confidence, proposal.confidence),
                    "updatedAt": stamp,
                }
            )
            if known.id not in changes.added and known.id not in changes.reinforced:
                changes.reinforced.append(known.id)
            continue
        fact = Fact(
            id=id_factory(),
            content=proposal.content,
            category=proposal.category,
            confidence=proposal.confidence,
            createdAt=stamp,
            updatedAt=stamp,
            source=source,
        )
        by_key[key] = len(result)
        result.append(fact)
        changes.added.append(fact.id)

    result, dropped = trim_facts(result, max_facts)
    changes.trimmed = [f.id for f in dropped]
    if changes.trimmed:
        trimmed = set(changes.trimmed)
        changes.added = [i for i in changes.added if i not in trimmed]
    return result, changes

"""The user's own facts first: a manual fact wins over an extracted fact that conflicts with it.

A fact the user added or edited by hand (``manual``: ``deermem fact add|edit``, the console) is
the ground truth until the user changes it. Extraction can still learn a conflicting fact — the
user said "call me Samuel" once, or the model misheard — and without this rule that fact could
outrank the user's own: a ``correction`` is guaranteed a place at the top of the block, and a
confidence of 0.95 outranks a hand-written fact's 0.5. So after selection, before rendering
(:meth:`~deermem_middleware.injection.recall.Recall.explain`), every extracted fact about to be
shown is compared with the active manual facts (:func:`~deermem_middleware.memory.facts
.facts_conflict`: the same slot with another value, or a denial); when one conflicts:

- the extracted fact is **withheld** from the block, not merely placed lower: two lines that
  disagree ("called Sam", "called Samuel") leave the model to guess, and the user already said
  which one holds;
- the manual fact takes its place (in the guaranteed part when the extracted fact was
  guaranteed), unless it is already shown above: it must not depend on being relevant to this
  message when the fact it overrules would have been shown.

This is a *read-time* rule on purpose. The lexical conflict test can be wrong (two values of a
slot that takes several), and here a mistake is undone by itself: the extracted fact stays
stored and active, and returns once the user edits or removes the manual fact. The certain case
— the extraction itself names the manual fact in ``supersedes`` — is settled when the update is
written (:func:`~deermem_middleware.memory.facts.apply_facts` stores the proposal overruled by
the manual fact). Two manual facts never withhold each other: the user wrote both.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.facts import facts_conflict
from deermem_middleware.retrieval.ranking import ScoredFact

__all__ = ["Precedence", "active_manual_facts", "manual_precedence"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Precedence:
    """The block's facts once manual facts have had their precedence."""

    guaranteed: tuple[ScoredFact, ...]
    selected: tuple[ScoredFact, ...]
    withheld: tuple[tuple[str, str], ...] = ()
    """(extracted fact id, the manual fact id it conflicts with), in block order."""


def active_manual_facts(facts: Iterable[Fact]) -> list[Fact]:
    """The facts that can overrule others: manual and active."""
    return [f for f in facts if f.manual and f.status == "active"]


def manual_precedence(
    guaranteed: Sequence[ScoredFact],
    selected: Sequence[ScoredFact],
    manual: Sequence[Fact],
) -> Precedence:
    """``guaranteed`` and ``selected`` (both in block order) with every extracted fact that
    conflicts with one of ``manual`` (active manual facts) replaced by that manual fact, or
    dropped when the manual fact is already shown above it (module docstring). Pure; without a
    conflict the input comes back unchanged, in the same order."""
    manual = active_manual_facts(manual)
    if not manual:
        return Precedence(tuple(guaranteed), tuple(selected))
    offered = {s.fact.id: s for s in (*guaranteed, *selected) if s.fact.manual}
    shown: set[str] = set()
    withheld: list[tuple[str, str]] = []
    parts: tuple[list[ScoredFact], list[ScoredFact]] = ([], [])
    for part, items in zip(parts, (guaranteed, selected), strict=True):
        for scored in items:
            fact = scored.fact
            if fact.manual:
                if fact.id not in shown:
                    part.append(scored)
                    shown.add(fact.id)
                continue
            rivals = [m for m in manual if facts_conflict(m.content, fact.content)]
            if not rivals:
                part.append(scored)
                continue
            for rival in rivals:
                withheld.append((fact.id, rival.id))
                logger.debug(
                    "memory fact %s not injected: it conflicts with the user's own fact %s",
                    fact.id,
                    rival.id,
                )
                if rival.id not in shown:
                    part.append(
                        offered.get(rival.id)
                        or ScoredFact(fact=rival, score=scored.score, relevance=0.0)
                    )
                    shown.add(rival.id)
    if not withheld:
        return Precedence(tuple(guaranteed), tuple(selected))
    return Precedence(tuple(parts[0]), tuple(parts[1]), tuple(withheld))

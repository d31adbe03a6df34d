"""The fact algebra: add, reinforce, supersede, remove, archive, trim (pure; clock, ids injected).

Rules, in the order they apply:

1. ``factsToRemove`` deletes by id (the fact was wrong, or the user asked to forget it); unknown
   ids are ignored and reported.
2. A new fact below ``threshold`` confidence is not kept (DeerFlow's ``fact_confidence_threshold``).
3. A new fact that *near-duplicates* an active fact (:func:`is_near_duplicate`; equality after
   :func:`normalize_fact_text` is the exact special case) *reinforces* it instead of piling up a
   twin: confidence becomes the max of both, ``updatedAt`` and ``lastConfirmedAt`` move to now,
   ``confirmations`` grows by one (once per update). An *archived* fact stated again is revived
   the same way. Superseded facts are history and never matched.
4. ``supersedes`` on a new fact marks the facts it replaces (the user changed something) as
   ``superseded`` with ``supersededBy`` = the new fact's id; they stay in the document as an audit
   trail. Unknown ids are ignored and reported.
5. Transient facts whose ``validUntil`` has passed are archived
   (:mod:`deermem_middleware.memory.decay`); with the opt-in ``archive_floor``, so are facts whose
   decayed confidence fell below it.
6. Over ``max_facts``, the facts of least value are deleted (:func:`trim_facts`): superseded
   first, then archived, then active ones by confidence, never injected before injected, never
   confirmed before confirmed, least recently used first.

Time: a new fact keeps the ``eventAt`` the extraction gave it; without one, a relative date in its
text ("yesterday", "last month", "去年") is resolved against when the user said it
(:func:`~deermem_middleware.memory.time.resolve_relative_date`), so "went hiking last weekend" still
knows its weekend a year later.

Facts written by a person (``manual``) are never changed by extraction: removals and supersedes
naming them are ignored, a near-duplicate of one is dropped instead of reinforcing it, and trimming
never drops one. All of these are reported as ``kept_manual``.

A proposal that names a manual fact in its ``supersedes`` (the extraction says the user changed
what they wrote by hand) is *overruled* by it: the user's own fact is the ground truth until the
user edits it, so the proposal is stored already ``superseded`` with ``supersededBy`` = the manual
fact — kept as evidence (the console and ``deermem inspect`` show what extraction learnt and what
overruled it), never injected, never shown to extraction again — and reported in ``overruled``.
Said again later, it is not stored a second time. Conflicts the extraction did not name
(:func:`facts_conflict`) are settled when the block is built
(:mod:`deermem_middleware.retrieval.precedence`), where a wrong guess undoes itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

import numpy as np

from deermem_middleware.memory.decay import (
    DEFAULT_HALF_LIFE_DAYS,
    archive_decayed,
    expire_transient,
    has_expired,
    last_used,
)
from deermem_middleware.memory.document import MAX_ENTITIES, Fact, new_fact_id, utc_now_iso
from deermem_middleware.memory.similarity import (
    NEAR_DUPLICATE_THRESHOLD,
    fact_shape,
    fact_similarity,
    facts_conflict,
    is_near_duplicate,
    near_duplicate_score,
    normalize_fact_text,
)
from deermem_middleware.memory.time import resolve_relative_date
from deermem_middleware.memory.update import NewFact

__all__ = [
    "NEAR_DUPLICATE_THRESHOLD",
    "FactChanges",
    "apply_facts",
    "fact_similarity",
    "fact_value",
    "facts_conflict",
    "is_near_duplicate",
    "normalize_fact_text",
    "trim_facts",
]

logger = logging.getLogger(__name__)


@dataclass
class FactChanges:
    """What an application of new facts and removals did, for logs and reports (fact ids)."""

    added: list[str] = field(default_factory=list)
    reinforced: list[str] = field(default_factory=list)
    """Known facts a new fact confirmed (each once), revived ones included."""
    removed: list[str] = field(default_factory=list)
    trimmed: list[str] = field(default_factory=list)
    below_threshold: int = 0
    unknown_removals: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    """Facts a new fact replaced (now ``status="superseded"``, kept for audit)."""
    archived: list[str] = field(default_factory=list)
    """Facts archived in this update: expired (``validUntil`` passed) or, with the opt-in
    ``archive_floor``, decayed below it."""
    revived: list[str] = field(default_factory=list)
    """Archived facts a new fact stated again: active again (also listed in ``reinforced``)."""
    kept_manual: list[str] = field(default_factory=list)
    """Manual facts the update tried to remove, supersede or rewrite: left as they are."""
    unknown_supersedes: list[str] = field(default_factory=list)
    overruled: list[str] = field(default_factory=list)
    """Facts that named a manual fact in ``supersedes``: stored ``superseded`` by it instead
    (new ones are not in ``added``)."""

    @property
    def changed(self) -> bool:
        return bool(
            self.added
            or self.reinforced
            or self.removed
            or self.trimmed
            or self.superseded
            or self.archived
            or self.overruled
        )


def _last_used(fact: Fact) -> float:
    moment = last_used(fact)
    return moment.timestamp() if moment is not None else -math.inf


_STATUS_VALUE: Final = {"active": 2, "archived": 1, "superseded": 0}


def fact_value(fact: Fact) -> tuple[bool, int, float, bool, bool, float]:
    """What a fact is worth keeping, as a sort key (higher is kept longer).

    Manual facts first; then by status (active over archived over superseded history); then
    confidence in steps of 0.05 (an extraction's 0.90 and 0.92 are the same certainty); then
    injected at least once, confirmed at least once; then the most recently used.
    """
    active = fact.status == "active"
    return (
        fact.manual,
        _STATUS_VALUE.get(fact.status, 0),
        round(fact.confidence * 20) / 20 if active else 0.0,
        fact.injections > 0,
        fact.confirmations > 0,
        _last_used(fact),
    )


def trim_facts(facts: Sequence[Fact], max_facts: int) -> tuple[list[Fact], list[Fact]]:
    """Keep at most ``max_facts`` facts, in their order; returns (kept, dropped).

    The facts of least :func:`fact_value` go: superseded, then archived, then active ones by
    confidence, injections, confirmations and last use. Manual facts are never dropped, even
    when they alone exceed ``max_facts``.
    """
    if max_facts < 0 or len(facts) <= max_facts:
        return list(facts), []
    ranked = sorted(range(len(facts)), key=lambda i: (fact_value(facts[i]), i), reverse=True)
    manual = sum(1 for f in facts if f.manual)
    keep = set(ranked[: max(max_facts, manual)])
    kept = [f for i, f in enumerate(facts) if i in keep]
    dropped = [f for i, f in enumerate(facts) if i not in keep]
    return kept, dropped


def _note(ids: list[str], fact_id: str) -> None:
    if fact_id not in ids:
        ids.append(fact_id)


class _Matcher:
    """Finds the fact a proposal restates: exact normalised text first, then the most similar
    near-duplicate. Candidates are active and archived facts (superseded ones are history).

    Built once per update: exact texts are a dict lookup, and only facts whose 3-gram count is
    within the Jaccard bound of the proposal's are compared (20 proposals against 5,000 facts:
    a few milliseconds instead of half a second)."""

    def __init__(self, facts: list[Fact], threshold: float) -> None:
        self._facts = facts  # the list being built: appended to as facts are added
        self._threshold = threshold
        self._exact: dict[str, list[int]] = {}
        self._sizes: list[int] = []
        for index in range(len(facts)):
            self.added(index)

    def added(self, index: int) -> None:
        """Register ``facts[index]`` (call after appending a fact)."""
        content = self._facts[index].content
        self._exact.setdefault(normalize_fact_text(content), []).append(index)
        self._sizes.append(len(fact_shape(content).grams))

    def find(self, content: str) -> int | None:
        shape = fact_shape(content)
        size = len(shape.grams)
        best: tuple[int, float, int] | None = None  # (exact, score, -index) of the best so far
        best_index: int | None = None
        exact = set(self._exact.get(normalize_fact_text(content), ()))
        sizes = np.asarray(self._sizes)
        low, high = size * self._threshold, size / self._threshold if self._threshold else np.inf
        near = np.flatnonzero((sizes >= low) & (sizes <= high)).tolist()
        for index in sorted(exact.union(near)):
            fact = self._facts[index]
            if fact.status == "superseded":
                continue
            if index in exact:
                rank = (2 if fact.status == "active" else 1, 1.0, -index)
            else:
                score = near_duplicate_score(shape, fact_shape(fact.content), self._threshold)
                if score is None:
                    continue
                rank = (0, score + (0.5 if fact.status == "active" else 0.0), -index)
            if best is None or rank > best:
                best, best_index = rank, index
        return best_index


def _overruled_twin(facts: Sequence[Fact], proposal: NewFact) -> Fact | None:
    """A fact stored overruled by one of the active manual facts ``proposal`` supersedes, that
    ``proposal`` restates: the extraction says the same thing again."""
    manual = {
        f.id for f in facts if f.id in proposal.supersedes and f.manual and f.status == "active"
    }
    if not manual:
        return None
    for fact in facts:
        overruled = fact.status == "superseded" and fact.supersededBy in manual
        if overruled and is_near_duplicate(fact.content, proposal.content):
            return fact
    return None


def _overrule(
    result: list[Fact], position: int, manual_id: str, stamp: str, changes: FactChanges
) -> None:
    """Store ``result[position]`` superseded by the manual fact ``manual_id`` it tried to
    replace (module docstring); a manual or already superseded fact is left alone."""
    fact = result[position]
    if fact.manual or fact.status == "superseded":
        return
    logger.info(
        "new fact %s (%r) conflicts with manual fact %s: stored overruled by it",
        fact.id,
        fact.content[:80],
        manual_id,
    )
    result[position] = fact.model_copy(
        update={"status": "superseded", "supersededBy": manual_id, "updatedAt": stamp}
    )
    _note(changes.overruled, fact.id)
    if fact.id in changes.added:
        changes.added.remove(fact.id)


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
    near_duplicate_threshold: float = NEAR_DUPLICATE_THRESHOLD,
    archive_floor: float | None = None,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    said_at: datetime | None = None,
) -> tuple[list[Fact], FactChanges]:
    """Removals, additions/reinforcements, supersedes, expiry, then the cap (module docstring).

    ``archive_floor`` None (the default) archives nothing for its age. ``said_at``: when the
    user said what the update comes from (relative dates resolve against it; default ``now``).
    Never mutates its inputs.
    """
    stamp = utc_now_iso(now)
    changes = FactChanges()

    # 1. removals (manual facts are protected)
    by_id = {f.id: f for f in facts}
    removals = list(dict.fromkeys(remove_ids))
    changes.unknown_removals = sorted(i for i in removals if i not in by_id)
    for fact_id in changes.unknown_removals:
        logger.info("factsToRemove: unknown fact id %r ignored", fact_id)
    drop: set[str] = set()
    for fact_id in removals:
        if fact_id not in by_id:
            continue
        if by_id[fact_id].manual:
            logger.info("factsToRemove: manual fact %r kept (extraction never removes it)", fact_id)
            _note(changes.kept_manual, fact_id)
        else:
            drop.add(fact_id)
    result = [f for f in facts if f.id not in drop]
    changes.removed = [f.id for f in facts if f.id in drop]

    # 2. additions and reinforcements
    matcher = _Matcher(result, near_duplicate_threshold)
    touched: set[str] = set()  # added or confirmed by this update: not stale, confirmed once
    replacements: list[tuple[str, list[str]]] = []
    for proposal in new_facts:
        if proposal.confidence < threshold:
            changes.below_threshold += 1
            logger.debug(
                "new fact below threshold (%.2f < %.2f): %r%s",
                proposal.confidence,
                threshold,
                proposal.content[:80],
                f"; its supersedes {proposal.supersedes} ignored" if proposal.supersedes else "",
            )
            continue
        index = matcher.find(proposal.content)
        event_at = proposal.eventAt or resolve_relative_date(proposal.content, said_at or now)
        if index is None and (twin := _overruled_twin(result, proposal)) is not None:
            logger.info(
                "new fact %r was overruled by manual fact %s before: not stored again",
                proposal.content[:80],
                twin.supersededBy,
            )
            _note(changes.kept_manual, twin.supersededBy or "")
            continue
        if index is None:
            fact = Fact(
                id=id_factory(),
                content=proposal.content,
                category=proposal.category,
                confidence=proposal.confidence,
                createdAt=stamp,
                updatedAt=stamp,
                source=source,
                sourceKind=proposal.sourceKind or "inferred",
                eventAt=event_at,
                validUntil=proposal.validUntil,
                entities=proposal.entities,
            )
            result.append(fact)
            matcher.added(len(result) - 1)
            changes.added.append(fact.id)
            touched.add(fact.id)
            target = fact.id
        else:
            known = result[index]
            target = known.id
            if known.manual:
                logger.info(
                    "new fact %r restates manual fact %s: kept as written",
                    proposal.content[:80],
                    known.id,
                )
                _note(changes.kept_manual, known.id)
            else:
                update: dict[str, object] = {
                    "confidence": max(known.confidence, proposal.confidence),
                    "updatedAt": stamp,
                }
                if proposal.sourceKind == "stated":
                    update["sourceKind"] = "stated"  # said outright now: never downgraded
                if event_at and not known.eventAt:
                    update["eventAt"] = event_at
                if proposal.entities and set(proposal.entities) - set(known.entities):
                    merged = dict.fromkeys((*known.entities, *proposal.entities))
                    update["entities"] = tuple(merged)[:MAX_ENTITIES]
                if proposal.validUntil:  # the newest statement of a transient fact wins
                    update["validUntil"] = proposal.validUntil
                elif has_expired(known, now):  # said again after it expired: it holds again
                    update["validUntil"] = None
                if known.id not in touched:  # one conversation confirms a fact once
                    update["lastConfirmedAt"] = stamp
                    update["confirmations"] = known.confirmations + 1
                    if known.status == "archived":
                        update["status"] = "active"
                        changes.revived.append(known.id)
                    changes.reinforced.append(known.id)
                    touched.add(known.id)
                result[index] = known.model_copy(update=update)
        if proposal.supersedes:
            replacements.append((target, proposal.supersedes))

    # 3. supersedes
    positions = {f.id: i for i, f in enumerate(result)}
    for replacement, old_ids in replacements:
        for old_id in old_ids:
            if old_id == replacement or old_id in drop:
                continue
            position = positions.get(old_id)
            if position is None:
                logger.info("supersedes: unknown fact id %r ignored", old_id)
                _note(changes.unknown_supersedes, old_id)
                continue
            old = result[position]
            if old.manual:
                logger.info(
                    "supersedes: manual fact %r kept (extraction never replaces it)", old_id
                )
                _note(changes.kept_manual, old_id)
                if old.status == "active":
                    _overrule(result, positions[replacement], old_id, stamp, changes)
                continue
            if old.status == "superseded":
                logger.debug(
                    "supersedes: fact %r already superseded by %r", old_id, old.supersededBy
                )
                continue
            result[position] = old.model_copy(
                update={"status": "superseded", "supersededBy": replacement, "updatedAt": stamp}
            )
            changes.superseded.append(old_id)

    # 4. expiry, and the opt-in archiving by decay
    result, changes.archived = expire_transient(result, now, keep=touched)
    if archive_floor is not None and archive_floor > 0:
        result, decayed = archive_decayed(
            result, now, archive_floor, half_lives, default_half_life_days, keep=touched
        )
        changes.archived.extend(decayed)

    # 5. the cap
    result, dropped = trim_facts(result, max_facts)
    changes.trimmed = [f.id for f in dropped]
    if changes.trimmed:
        trimmed = set(changes.trimmed)
        changes.added = [i for i in changes.added if i not in trimmed]
    return result, changes

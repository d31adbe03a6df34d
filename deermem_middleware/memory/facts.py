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
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
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

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)


@lru_cache(maxsize=16384)
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


# -- near-duplicates ----------------------------------------------------------------------------

NEAR_DUPLICATE_THRESHOLD: Final = 0.85
"""Character 3-gram Jaccard similarity (of the texts without articles, pronouns, the word "user"
and plural/third-person ``s``) from which two facts are the same fact.

Chosen from pairs an extraction model actually produces: rewordings of one fact sit above it
("User prefers dark mode" / "The user prefers dark mode." = 1.0; "every single morning" or "with
old friends" for "every morning", "with friends" in a ten-word sentence ≈ 0.86–0.90); different
facts sharing most of their words sit below ("User uses MySQL" / "User uses PostgreSQL" ≈ 0.28,
"daughter"/"son" in a ten-word sentence ≈ 0.71, "User is a senior engineer" / "… now" ≈ 0.82,
"a cup of" inserted ≈ 0.84). Character n-grams alone cannot see that "since 2021" and "since 2022"
(0.92) or "Python over Java" and "Java over Python" (0.92) differ, so :func:`is_near_duplicate`
also requires the same numbers, the same negations, no word *replaced* by another, and the same
word order. A missed merge costs a near-twin line that decay and trimming clean up; a wrong merge
silently loses a new fact — hence the precision-first choice."""

_STOP_WORDS: Final = frozenset(
    {"a", "an", "the", "user", "s", "their", "his", "her", "its", "they", "he", "she", "them"}
)
"""Words that do not change which fact is meant ("The user's …" / "User's …")."""
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(
    r"\b(?:not|no|never|nor|neither|none|nothing|nobody|without|cannot)\b|n['’]t\b"
    r"|[不没沒无無别別]"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _stem(word: str) -> str:
    """Plural / third-person ``s`` only ("prefers" = "prefer"); tense and aspect ("learned",
    "learning") are kept apart on purpose: they can be different facts."""
    if len(word) > 3 and not word.endswith(("ss", "us", "is")):
        if word.endswith("ies") and len(word) > 4:
            return word[:-3] + "y"
        if word.endswith("s"):
            return word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class _Shape:
    """What near-duplicate detection compares of one text."""

    words: tuple[str, ...]
    grams: frozenset[str]
    numbers: tuple[str, ...]
    negations: int


@lru_cache(maxsize=8192)
def _shape(text: str) -> _Shape:
    normalized = normalize_fact_text(text)
    words = tuple(_stem(w) for w in _WORD.findall(normalized) if w not in _STOP_WORDS)
    key = " ".join(words) or normalized
    padded = f" {key} "
    grams = frozenset(padded[i : i + 3] for i in range(max(1, len(padded) - 2)))
    return _Shape(
        words=words,
        grams=grams,
        numbers=tuple(sorted(_NUMBER.findall(normalized))),
        negations=len(_NEGATION.findall(normalized)),
    )


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def fact_similarity(a: str, b: str) -> float:
    """Character 3-gram Jaccard similarity of two fact texts in [0, 1] (see
    :data:`NEAR_DUPLICATE_THRESHOLD` for what is compared)."""
    return _jaccard(_shape(a).grams, _shape(b).grams)


def _near_duplicate(x: _Shape, y: _Shape, threshold: float) -> float | None:
    """The similarity when ``x`` and ``y`` are the same fact, else None."""
    small, large = sorted((len(x.grams), len(y.grams)))
    if large and small / large < threshold:  # Jaccard ≤ |small| / |large|: skip the set work
        return None
    score = _jaccard(x.grams, y.grams)
    if score < threshold:
        return None
    if score < 1.0:
        if x.numbers != y.numbers or x.negations != y.negations:
            return None  # "since 2021" / "since 2022", "likes" / "does not like"
        only_x = {w for w in set(x.words) - set(y.words) if not _CJK.search(w)}
        only_y = {w for w in set(y.words) - set(x.words) if not _CJK.search(w)}
        if only_x and only_y:
            return None  # a word replaced by another: "daughter" / "son"
        if Counter(x.words) == Counter(y.words) and x.words != y.words:
            return None  # same words, another order: "Python over Java" / "Java over Python"
    return score


def is_near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE_THRESHOLD) -> bool:
    """Do ``a`` and ``b`` state the same fact (exactly, after normalisation, or near enough)?"""
    if normalize_fact_text(a) == normalize_fact_text(b):
        return True
    return _near_duplicate(_shape(a), _shape(b), threshold) is not None


# -- conflicts ----------------------------------------------------------------------------------

CONFLICT_FRAME_SHARE: Final = 0.6
"""The share of the longer text's words two facts must share, around one replaced value, to be
two values of the same slot (see :func:`facts_conflict`)."""
MAX_VALUE_WORDS: Final = 3
"""The longest replaced value (in words) that still reads as one slot's value."""

_NEGATIONS: Final = frozenset(
    {"not", "no", "never", "nor", "neither", "none", "nothing", "nobody", "cannot"}
)
_AUXILIARIES: Final = frozenset(
    {"do", "doe", "did", "is", "am", "are", "was", "were", "be", "been", "longer", "anymore",
     "any", "ever", "really", "to", "can", "will", "would", "should"}
)  # fmt: skip
"""Words between a negation and what it denies ("does *not* like", "*no longer* drinks")."""
_MULTI_VALUED: Final = frozenset(
    {"like", "love", "enjoy", "learn", "learning", "has", "have", "had", "play", "playing",
     "speak", "know", "visit", "visited", "own", "read", "reading", "watch", "watching", "use",
     "using", "eat", "drink", "listen", "collect", "study", "studying", "follow"}
)  # fmt: skip
"""Predicates that take many values at once: "is learning Spanish" and "is learning piano" are
two facts, not two values of one slot."""
_CONTRACTED_NOT = re.compile(r"n['’]t\b")


@lru_cache(maxsize=8192)
def _conflict_words(text: str) -> tuple[str, ...]:
    """The words :func:`facts_conflict` compares: :func:`normalize_fact_text`, "n't" spelt
    "not", without articles, pronouns and "user", plural/third-person ``s`` dropped."""
    normalized = _CONTRACTED_NOT.sub(" not", normalize_fact_text(text))
    return tuple(_stem(w) for w in _WORD.findall(normalized) if w not in _STOP_WORDS)


def _denied(words: tuple[str, ...]) -> set[str]:
    """What a text denies: the first word after each negation that is no auxiliary."""
    denied: set[str] = set()
    for i, word in enumerate(words):
        if word in _NEGATIONS:
            rest = [w for w in words[i + 1 :] if w not in _AUXILIARIES and w not in _NEGATIONS]
            if rest:
                denied.add(rest[0])
            else:  # only auxiliaries follow ("… is not anymore"): the first of them
                after = [w for w in words[i + 1 :] if w not in _NEGATIONS]
                denied.update(after[:1])
    return denied


def _denies(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    """Does ``y`` deny what ``x`` asserts, the rest of the sentence shared?"""
    if not any(w in _NEGATIONS for w in y):
        return False
    denied_x = _denied(x)
    asserted = {w for w in x if w not in _NEGATIONS and w not in denied_x}
    hit = _denied(y) & asserted
    shared = (set(x) & set(y)) - _NEGATIONS
    return bool(hit) and len(shared) >= 2


def _replaces(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    """Is ``y`` ``x`` with one short value replaced, in a shared frame (no negation in either)?"""
    if any(w in _NEGATIONS for w in (*x, *y)):
        return False  # "does not eat meat" / "does not eat fish": two denials can both hold
    prefix = 0
    while prefix < min(len(x), len(y)) and x[prefix] == y[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(x), len(y)) - prefix and x[len(x) - 1 - suffix] == y[len(y) - 1 - suffix]
    ):
        suffix += 1
    value_x, value_y = x[prefix : len(x) - suffix], y[prefix : len(y) - suffix]
    if not value_x or not value_y:
        return False  # a detail added ("Uses Go" / "Uses Go 1.22 at work"): a refinement
    if len(value_x) > MAX_VALUE_WORDS or len(value_y) > MAX_VALUE_WORDS:
        return False
    frame = prefix + suffix
    if frame < 2 or frame < CONFLICT_FRAME_SHARE * max(len(x), len(y)):
        return False  # "Uses MySQL" / "Uses PostgreSQL": one shared word is no slot
    predicate = x[prefix - 1] if prefix else x[len(x) - suffix]
    return predicate not in _MULTI_VALUED


@lru_cache(maxsize=16384)
def facts_conflict(a: str, b: str) -> bool:
    """Do ``a`` and ``b`` give the same slot different values (pure, symmetric)?

    Two shapes count, both within one sentence frame: a *replaced value* — the same words
    around one short span that differs ("wants to be called Sam" / "… Samuel", "prefers dark
    mode" / "… light mode", "is 34" / "is 35"), at least two shared words making up
    :data:`CONFLICT_FRAME_SHARE` of the longer text, and not after a predicate that takes many
    values ("is learning Spanish" / "… piano", :data:`_MULTI_VALUED`); and a *denial* — one text
    negates a word the other asserts, sharing two words or more ("likes coffee" / "does not like
    coffee", "… Samuel, not Sam").

    Never a conflict: a restatement (:func:`is_near_duplicate`: reinforcement), an added
    detail ("Uses Go" / "Uses Go 1.22 at work": a refinement), a negated word the other text
    does not assert ("Uses Go, not Rust"), two denials, texts in scripts without spaces (no
    word frame to compare: only an extraction's explicit ``supersedes`` links them).

    Precision first, like near-duplicates: what this decides is that the user's own fact is
    shown *instead of* an extracted one (:mod:`deermem_middleware.retrieval.precedence`). A
    missed conflict leaves both lines in the block, the manual one not necessarily first; a
    false one hides an extracted fact from the block while the user's own is shown — it stays
    stored and active, and comes back once the manual fact is edited or removed.
    """
    x, y = _conflict_words(a), _conflict_words(b)
    if len(set(x) & set(y)) < 2:
        return False  # both shapes share two words or more: most pairs end here, cheaply
    if not (_denies(x, y) or _denies(y, x) or _replaces(x, y) or _replaces(y, x)):
        return False
    # the near-duplicate test last: it is the costly one (character 3-grams), and most pairs
    # sharing two words have neither shape (every selected fact meets every manual one)
    return not is_near_duplicate(a, b)


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
        self._sizes.append(len(_shape(content).grams))

    def find(self, content: str) -> int | None:
        shape = _shape(content)
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
                score = _near_duplicate(shape, _shape(fact.content), self._threshold)
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

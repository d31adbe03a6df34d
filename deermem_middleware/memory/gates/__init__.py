"""The write-decision gates between extraction and storage: one pure pass over an update.

An extracted :class:`~deermem_middleware.memory.update.MemoryUpdate` is gated *once*, right after
the model answered, and the gated update is what is applied — again, unchanged, after a
compare-and-set conflict or a failed save (the gates are deterministic, but the update must not
depend on when it was saved). In order, for each proposed fact:

1. **remembered**: a fact grounded in a user's explicit "remember …" (see
   :mod:`~deermem_middleware.memory.gates.value`) is stored as ``sourceKind: stated`` with
   confidence at least :data:`~deermem_middleware.memory.gates.value.REMEMBER_CONFIDENCE`,
   whatever the other gates would say;
2. **value**: transient tasks, small talk and one-off instructions are rejected;
3. **grounding**: a fact the user's turns do not support (see
   :mod:`~deermem_middleware.memory.gates.grounding`) is dropped, or kept as ``inferred`` with its
   confidence capped (``grounding: infer``).

Then every "remember …" the model proposed no fact for becomes a fact of its own. Only the
extraction path is gated: facts a person adds (CLI, console, import) are stored as given.

One unit: :func:`gate_update` is the only entry point (the updater calls it), :class:`GateReport`
the only report, and each gate's rules live in a module of this package (``value``, ``grounding``).
A new gate is a module here plus its step in :func:`gate_update` and its count in
:class:`GateReport`; nothing outside this package changes but the config field that turns it on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.gates.grounding import (
    DEFAULT_INFERRED_CONFIDENCE_CAP,
    DEFAULT_MIN_SUPPORT,
    Embedder,
    GroundingMode,
    Support,
    content_terms,
    lexical_support,
    subject_words,
    support_for,
)
from deermem_middleware.memory.gates.value import (
    REMEMBER_CONFIDENCE,
    Remembered,
    remembered_clauses,
    value_rejection,
)
from deermem_middleware.memory.update import MemoryUpdate, NewFact

__all__ = ["GateReport", "gate_update"]

logger = logging.getLogger(__name__)

_LOG_CHARS = 80


def _short(text: str) -> str:
    return text if len(text) <= _LOG_CHARS else text[: _LOG_CHARS - 1] + "…"


@dataclass
class GateReport:
    """What the gates did to one update's proposed facts (contents, for logs and callers)."""

    proposed: int = 0
    grounding_dropped: list[str] = field(default_factory=list)
    grounding_demoted: list[str] = field(default_factory=list)
    value_rejected: list[str] = field(default_factory=list)
    remembered_boosted: list[str] = field(default_factory=list)
    remembered_added: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """Facts handed on to be stored (demoted and remembered ones included)."""
        return (
            self.proposed
            - len(self.grounding_dropped)
            - len(self.value_rejected)
            + len(self.remembered_added)
        )

    def summary(self) -> dict[str, int]:
        """Counts for the log line (keys are stable; new ones are only ever appended)."""
        return {
            "proposed": self.proposed,
            "grounding_dropped": len(self.grounding_dropped),
            "grounding_demoted": len(self.grounding_demoted),
            "value_rejected": len(self.value_rejected),
            "remembered_boosted": len(self.remembered_boosted),
            "remembered_added": len(self.remembered_added),
        }


_NAME_TERMS = frozenset({"name", "nam", "call", "nick", "nicknam", "\x01名", "\x01字", "\x01叫"})


def _said_names(names: Iterable[str], user_texts: Sequence[str]) -> list[str]:
    """The user's names that the user said in these turns ("I'm Maya")."""
    said: set[str] = set()
    for text in user_texts:
        said.update(content_terms(text))
    return [n for n in names if (terms := set(content_terms(n))) and terms <= said]


def _is_their_name(fact: str, said: Sequence[str], subjects: Sequence[str]) -> bool:
    """Whether ``fact`` only states the user's name, which the user said ("I'm Maya"): a name is
    a subject word everywhere (it supports nothing else), but it is the evidence for itself."""
    if not said:
        return False
    terms = set(content_terms(fact))
    return any(set(content_terms(n)) <= terms for n in said) and not (
        set(content_terms(fact, subjects)) - _NAME_TERMS
    )


def _remembered_by(
    fact: NewFact, remembered: Sequence[Remembered], subjects: Sequence[str], min_support: float
) -> int | None:
    """Index of the "remember …" clause that supports ``fact``, if any."""
    best, best_score = None, max(min_support, 0.5)
    for index, item in enumerate(remembered):
        score = max(
            lexical_support(fact.content, [item.clause], subjects),
            lexical_support(fact.content, [item.content], subjects),
        )
        if score >= best_score:
            best, best_score = index, score
    return best


def _reason(support: Support, min_support: float) -> str:
    if support.unsaid:
        return "names what nobody said: " + ", ".join(repr(p) for p in support.unsaid)
    if support.assistant_only:
        where = "supported by only the assistant's turns"
    else:
        where = (
            "too little support in the user's turns" if support.user > 0 else "supported by no turn"
        )
    semantic = (
        f", cosine {support.semantic:.2f}, score {support.score:.2f}"
        if support.semantic is not None
        else ""
    )
    return (
        f"{where} (user support {support.user:.2f}, assistant {support.assistant:.2f}{semantic})"
        f" < {min_support:.2f}"
    )


def gate_update(
    update: MemoryUpdate,
    turns: Sequence[Turn],
    *,
    grounding: GroundingMode = "drop",
    min_support: float = DEFAULT_MIN_SUPPORT,
    inferred_confidence_cap: float = DEFAULT_INFERRED_CONFIDENCE_CAP,
    names: Iterable[str] = (),
    embed: Embedder | None = None,
    value_gate: bool = True,
    remember_confidence: float = REMEMBER_CONFIDENCE,
    where: str = "",
) -> tuple[MemoryUpdate, GateReport]:
    """``update`` with its new facts gated against ``turns`` (see the module docstring), and
    what was done. Sections and ``factsToRemove`` pass unchanged. ``names``: the user's own
    names (subject words, not support); ``value_gate`` False turns off both the value rules and
    "remember …"; ``where`` prefixes the log lines (e.g. the user)."""
    report = GateReport(proposed=len(update.newFacts))
    user_texts = [t.text for t in turns if t.role == "user"]
    assistant_texts = [t.text for t in turns if t.role == "assistant"]
    names = [n for n in names if n.strip()]
    subjects = subject_words(names)
    said = _said_names(names, user_texts)
    remembered = remembered_clauses(user_texts) if value_gate else []
    covered: set[int] = set()
    prefix = f"memory {where}: " if where else "memory: "
    kept: list[NewFact] = []
    for fact in update.newFacts:
        index = _remembered_by(fact, remembered, subjects, min_support) if remembered else None
        if index is not None:
            covered.add(index)
            boosted = fact.model_copy(
                update={
                    "confidence": max(fact.confidence, remember_confidence),
                    "sourceKind": "stated",
                }
            )
            report.remembered_boosted.append(fact.content)
            logger.info("%sfact %r: the user asked to remember it", prefix, _short(fact.content))
            kept.append(boosted)
            continue
        if value_gate:
            reason = value_rejection(fact.content)
            if reason is not None:
                report.value_rejected.append(fact.content)
                logger.info("%sfact %r not stored: %s", prefix, _short(fact.content), reason)
                continue
        if grounding != "off" and not _is_their_name(fact.content, said, subjects):
            check = functools.partial(
                support_for,
                fact.content,
                user_texts,
                assistant_texts,
                subjects=subjects,
                min_support=min_support,
            )
            try:
                support = check(embed=embed)
            except Exception:
                if embed is None:
                    raise
                logger.warning(
                    "%ssemantic support failed; grounding is lexical for this update",
                    prefix,
                    exc_info=True,
                )
                embed = None
                support = check()
            if not support.supported and grounding == "drop":
                report.grounding_dropped.append(fact.content)
                logger.info(
                    "%sfact %r not stored: %s",
                    prefix,
                    _short(fact.content),
                    _reason(support, min_support),
                )
                continue
            if not support.supported or support.assistant_said:
                why = (
                    _reason(support, min_support)
                    if not support.supported
                    else "only the assistant said " + ", ".join(map(repr, support.assistant_said))
                )
                capped = min(fact.confidence, inferred_confidence_cap)
                report.grounding_demoted.append(fact.content)
                logger.info(
                    "%sfact %r kept as inferred, confidence %.2f -> %.2f: %s",
                    prefix,
                    _short(fact.content),
                    fact.confidence,
                    capped,
                    why,
                )
                fact = fact.model_copy(update={"confidence": capped, "sourceKind": "inferred"})
        kept.append(fact)
    for index, item in enumerate(remembered):
        if index in covered:
            continue
        if any(item.content == f.content for f in kept):
            continue
        kept.append(
            NewFact(
                content=item.content,
                category=item.category,
                confidence=remember_confidence,
                sourceKind="stated",
            )
        )
        report.remembered_added.append(item.content)
        logger.info(
            "%sfact %r added: the user asked to remember it (%s)",
            prefix,
            _short(item.content),
            item.category,
        )
    if kept == list(update.newFacts):
        return update, report
    return update.model_copy(update={"newFacts": kept}), report

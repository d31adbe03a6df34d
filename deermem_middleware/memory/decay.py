"""How facts age: decay, expiry and (opt-in) archiving (pure; the clock is always passed in).

Age alone never hides a fact. Measured by replaying LoCoMo conversations through the real update
path (``benchmarks/locomo_lifecycle.py``), archiving facts whose decayed confidence fell under a
floor cost more than a third of the facts later questions needed: people ask about old things
("when did I start running?") as often as about new ones. So time works on *rank*, not on
membership:

- **decay** lowers a fact's *effective* confidence with a per-category half-life, counted from
  the last time the fact was *used* — confirmed by a conversation, or injected into one::

      effective = confidence × 0.5 ** (age_days / half_life_days)

  Selection uses it as a small part of the score, so an old fact loses ties against a fresh one
  but still wins on relevance (a fact that keeps being injected is not stale);
- **expiry** archives only facts that are transient by nature: a fact whose ``validUntil`` (the
  extraction sets it for "this week"-like facts) has passed;
- **archiving by decay** (``archive_floor``) is opt-in: off by default;
- **capacity** (``max_facts``) is enforced by :func:`~deermem_middleware.memory.facts.trim_facts`,
  by value, not by age.

Half-lives by category (days), chosen from how fast each kind of fact goes stale:

- ``goal`` 60: goals are reached or dropped within weeks to months;
- ``context`` 90: situations (projects, tools, location) change on a scale of months;
- ``behavior`` 120: habits are steadier than situations, but still drift;
- ``preference`` 180: tastes change slowly;
- ``knowledge`` 365: skills are rarely lost;
- ``correction``: never decays — the user corrected the assistant; forgetting that would bring
  the mistake back.

Facts written by a person (``manual``) never decay out of the opt-in archive; they expire only on
a ``validUntil`` a person gave them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Container, Iterable, Mapping
from datetime import UTC, datetime
from typing import Final

import numpy as np

from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.time import event_date_range, parse_timestamp

__all__ = [
    "DEFAULT_ARCHIVE_FLOOR",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_HALF_LIVES",
    "archive_decayed",
    "effective_confidence",
    "effective_confidences",
    "expire_transient",
    "half_life_days",
    "has_expired",
    "is_active",
    "last_confirmed",
    "last_used",
    "parse_timestamp",
    "recency_weight",
]

logger = logging.getLogger(__name__)

DEFAULT_HALF_LIVES: Final[Mapping[str, float]] = {
    "preference": 180.0,
    "knowledge": 365.0,
    "context": 90.0,
    "behavior": 120.0,
    "goal": 60.0,
    "correction": math.inf,
}
"""Days after which an unconfirmed fact's effective confidence has halved (see module doc)."""

DEFAULT_HALF_LIFE_DAYS: Final = 120.0
"""For categories not in the table (a DeerFlow file or a newer version may use others)."""

DEFAULT_ARCHIVE_FLOOR: Final = 0.3
"""The floor :func:`archive_decayed` is usually given when archiving by decay is turned on
(``archive_floor: 0.3``): well under the default extraction threshold (0.7), so only facts that
lost more than half their weight to age would go. Off by default (see the module docstring)."""

_SECONDS_PER_DAY: Final = 86_400.0


def last_confirmed(fact: Fact) -> datetime | None:
    """The last sign of life of a fact: the latest parseable of ``lastConfirmedAt``,
    ``updatedAt`` and ``createdAt`` (None when none parses).

    The latest rather than the first non-empty: a garbled ``lastConfirmedAt`` in a hand-edited
    file must not make a fact with a valid ``createdAt`` immortal, nor an old one young.
    """
    moments = [
        moment
        for moment in map(parse_timestamp, (fact.lastConfirmedAt, fact.updatedAt, fact.createdAt))
        if moment is not None
    ]
    return max(moments) if moments else None


def last_used(fact: Fact) -> datetime | None:
    """The last time a fact was of use: :func:`last_confirmed`, or its last injection into a
    conversation, whichever is later. Decay counts from here: what keeps being used is not
    stale."""
    moments = [m for m in (last_confirmed(fact), parse_timestamp(fact.lastInjectedAt)) if m]
    return max(moments) if moments else None


def half_life_days(
    category: str,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    """The half-life of ``category`` in days; ``math.inf`` means "never decays".

    ``half_lives`` overrides :data:`DEFAULT_HALF_LIVES` per category (the others keep their
    defaults). A half-life that is 0, negative, NaN or infinite means "never decays" (0 is the
    natural "off" in a YAML file).
    """
    table = dict(DEFAULT_HALF_LIVES)
    if half_lives:
        table.update(half_lives)
    days = table.get(category, default_half_life_days)
    if days is None or math.isnan(days) or days <= 0:
        return math.inf
    return float(days)


def recency_weight(
    fact: Fact,
    now: datetime,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    """``0.5 ** (age_days / half_life)`` in (0, 1]: how much of its weight a fact keeps at ``now``.

    Age counts from :func:`last_used`. 1.0 when the fact has no usable date, when its category
    never decays, or when its date lies in the future (clock skew).
    """
    half_life = half_life_days(fact.category, half_lives, default_half_life_days)
    if math.isinf(half_life):
        return 1.0
    moment = last_used(fact)
    if moment is None:
        return 1.0
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    age_days = max(0.0, (now - moment).total_seconds() / _SECONDS_PER_DAY)
    return float(0.5 ** (age_days / half_life))


def effective_confidence(
    fact: Fact,
    now: datetime,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    """The fact's confidence decayed by age: ``confidence × recency_weight(fact, now)``."""
    return fact.confidence * recency_weight(fact, now, half_lives, default_half_life_days)


def effective_confidences(
    confidences: np.ndarray,
    used_at: np.ndarray,
    half_life: np.ndarray,
    now: datetime,
) -> np.ndarray:
    """:func:`effective_confidence` of many facts at once, from their confidences, the epoch
    seconds of their :func:`last_used` (NaN: none) and their half-lives in days (inf: never
    decays): what a cold read computes from a stored snapshot instead of parsing every fact's
    dates (6.5 ms at 1,000 facts, one by one)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    age = np.maximum(0.0, now.timestamp() - used_at) / _SECONDS_PER_DAY
    with np.errstate(invalid="ignore"):
        weight = np.power(0.5, age / half_life)
    weight = np.where(np.isnan(used_at) | np.isinf(half_life), 1.0, weight)
    return np.asarray(confidences, dtype=np.float64) * weight


def is_active(fact: Fact) -> bool:
    """Only active facts are injected and shown to the extraction model."""
    return fact.status == "active"


def archive_decayed(
    facts: Iterable[Fact],
    now: datetime,
    floor: float = DEFAULT_ARCHIVE_FLOOR,
    half_lives: Mapping[str, float] | None = None,
    default_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    *,
    keep: Container[str] = (),
) -> tuple[list[Fact], list[str]]:
    """Mark active facts whose effective confidence is below ``floor`` as ``archived`` (opt-in:
    ``archive_floor``; by default nothing is archived for its age).

    Never archived: manual facts, ``correction`` facts (whatever half-life is configured: the
    assistant must not repeat a mistake it was corrected on), and ids in ``keep`` (facts added or
    confirmed in the update being applied — just stated, they cannot be stale). Only ``status``
    changes: the dates keep saying how old the fact really is. Returns (facts, archived ids);
    the input is not mutated.
    """
    result: list[Fact] = []
    archived: list[str] = []
    for fact in facts:
        if (
            fact.status == "active"
            and not fact.manual
            and fact.category != "correction"
            and fact.id not in keep
        ):
            value = effective_confidence(fact, now, half_lives, default_half_life_days)
            if value < floor:
                logger.debug(
                    "fact %s archived: effective confidence %.3f < %.2f", fact.id, value, floor
                )
                fact = fact.model_copy(update={"status": "archived"})
                archived.append(fact.id)
        result.append(fact)
    return result, archived


def has_expired(fact: Fact, now: datetime) -> bool:
    """True when the fact's ``validUntil`` period is over at ``now`` (the whole day, week, month
    or year it names has passed). Unreadable or missing dates never expire."""
    period = event_date_range(fact.validUntil)
    if period is None:
        return False
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now >= period[1]


def expire_transient(
    facts: Iterable[Fact], now: datetime, *, keep: Container[str] = ()
) -> tuple[list[Fact], list[str]]:
    """Archive active facts whose ``validUntil`` has passed: transient by nature ("is in Berlin
    this week"), they would now mislead. Manual facts too: on them only a person can have set
    the date. Not ids in ``keep`` (stated in the update being applied). Returns (facts, expired
    ids); the input is not mutated."""
    result: list[Fact] = []
    expired: list[str] = []
    for fact in facts:
        if fact.status == "active" and fact.id not in keep and has_expired(fact, now):
            logger.debug("fact %s expired: valid until %s", fact.id, fact.validUntil)
            fact = fact.model_copy(update={"status": "archived"})
            expired.append(fact.id)
        result.append(fact)
    return result, expired

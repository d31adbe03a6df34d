"""How facts age: decay, archiving and recency (pure; the clock is always passed in).

A fact the user mentioned once, a year ago, should not weigh as much as one they confirmed last
week: preferences drift, goals are reached, situations change. Instead of deleting old facts we
let their *effective* confidence decay with a per-category half-life, counted from the last time
a conversation confirmed them::

    effective = confidence × 0.5 ** (age_days / half_life_days)

and archive those that fall below a floor. Archived facts stay in the document (a person can see
and restore them; a later conversation that states the fact again revives it) but are no longer
injected or shown to the extraction model.

Half-lives by category (days), chosen from how fast each kind of fact goes stale:

- ``goal`` 60: goals are reached or dropped within weeks to months;
- ``context`` 90: situations (projects, tools, location) change on a scale of months;
- ``behavior`` 120: habits are steadier than situations, but still drift;
- ``preference`` 180: tastes change slowly;
- ``knowledge`` 365: skills are rarely lost;
- ``correction``: never decays — the user corrected the assistant; forgetting that would bring
  the mistake back.

With the default floor 0.3, a fact stored at confidence 0.9 and never confirmed again is archived
after log2(3) ≈ 1.58 half-lives: a goal after ~95 days, a preference after ~285 days.
Facts written by a person (``manual``) never decay out and are never archived.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Container, Iterable, Mapping
from datetime import UTC, datetime
from typing import Final

from .schema import Fact

__all__ = [
    "DEFAULT_ARCHIVE_FLOOR",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_HALF_LIVES",
    "archive_decayed",
    "effective_confidence",
    "half_life_days",
    "is_active",
    "last_confirmed",
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
"""Below this effective confidence an active fact is archived. Well under the default extraction
threshold (0.7), so only facts that have lost more than half their weight to age go."""

_SECONDS_PER_DAY: Final = 86_400.0


def parse_timestamp(text: str | None) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime; ``None`` for empty or unparseable text.

    Accepts the ``Z`` suffix DeerFlow writes and naive times (read as UTC).
    """
    if not text or not isinstance(text, str):
        return None
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


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

    Age counts from :func:`last_confirmed`. 1.0 when the fact has no usable date, when its
    category never decays, or when its date lies in the future (clock skew).
    """
    half_life = half_life_days(fact.category, half_lives, default_half_life_days)
    if math.isinf(half_life):
        return 1.0
    moment = last_confirmed(fact)
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
    """Mark active facts whose effective confidence is below ``floor`` as ``archived``.

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

"""Field values of the memory document: limits, and the lenient coercions its validators apply.

Kept apart from the models in :mod:`~deermem_middleware.memory.document` because the LLM's update
(:mod:`~deermem_middleware.memory.update`), the import caps
(:mod:`~deermem_middleware.formats.interchange`) and the manual edits apply the very same rules:
an over-long text is cut (head kept), a lone surrogate replaced, a counter clamped, a confidence
coerced, entities normalised — one definition each, never a reason to reject a whole document.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any, Final

from pydantic import BeforeValidator

__all__ = [
    "COUNT",
    "MAX_CATEGORY_CHARS",
    "MAX_COUNT",
    "MAX_ENTITIES",
    "MAX_ENTITY_CHARS",
    "MAX_SEEN_TURNS",
    "cap_list",
    "cap_text",
    "clamp_count",
    "clean_text",
    "coerce_confidence",
    "entity_list",
    "invalid_text",
    "is_invisible",
    "truncating",
]

MAX_CATEGORY_CHARS: Final = 40
"""Categories are short words (DeerFlow's own include ``workflow`` and ``project``)."""

_PERCENT_WORDS: Final = {
    "very high": 0.95,
    "high": 0.9,
    "medium": 0.7,
    "moderate": 0.7,
    "low": 0.4,
    "very low": 0.2,
}


def coerce_confidence(value: Any) -> float:
    """Turn whatever an LLM or an old file wrote into a confidence in [0, 1].

    - numbers in [0, 1] pass through;
    - numbers in (1, 100] are read as percentages (``95`` -> ``0.95``);
    - larger numbers clamp to 1, negative numbers to 0;
    - numeric strings are parsed, and the words high/medium/low are mapped;
    - booleans, NaN, infinities and anything else raise ``ValueError`` (the item is rejected,
      not guessed).
    """
    if type(value) is float and 0.0 <= value <= 1.0:  # what every stored document holds
        return value
    if isinstance(value, bool):
        raise ValueError(f"confidence must be a number, got boolean {value!r}")
    if isinstance(value, str):
        text = value.strip().lower().rstrip("%")
        if text in _PERCENT_WORDS:
            return _PERCENT_WORDS[text]
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"confidence must be a number, got {value!r}") from None
        if value.strip().endswith("%"):
            if math.isnan(number) or math.isinf(number):
                raise ValueError(f"confidence must be finite, got {value!r}")
            return min(1.0, max(0.0, number / 100.0))  # an explicit percentage, clamped once
    elif isinstance(value, int) and abs(value) > 100:
        return 0.0 if value < 0 else 1.0  # clamped before float(): 10**400 overflows a float
    elif isinstance(value, int | float):
        number = float(value)
    else:
        raise ValueError(f"confidence must be a number, got {type(value).__name__}")
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"confidence must be finite, got {value!r}")
    if number > 1.0:
        number = number / 100.0 if number <= 100.0 else 1.0
    return min(1.0, max(0.0, number))


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def is_invisible(text: str) -> bool:
    """True when nothing in ``text`` would show: whitespace, control and format characters only
    (zero-width spaces and joiners, direction marks). Such a fact or summary is blank."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text)


def clean_text(value: Any) -> Any:
    """Replace lone surrogates (JSON ``"\\ud800"`` decodes to one) with U+FFFD: they cannot be
    encoded as UTF-8, so one of them would make saving the whole update fail."""
    if isinstance(value, str) and _LONE_SURROGATE.search(value):
        return _LONE_SURROGATE.sub("\ufffd", value)
    return value


def truncating(limit: int) -> BeforeValidator:
    """Cut over-long strings instead of rejecting them (keeps the useful head).

    A head with nothing visible becomes "" rather than a lone "…", so ten thousand spaces or
    zero-width characters are treated as blank, not stored as a fact.
    """

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            head = value[: limit - 1].rstrip()
            return "" if is_invisible(head) else head + "…"
        return value

    return BeforeValidator(cut)


def cap_list(limit: int) -> BeforeValidator:
    def cap(value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) > limit:
            return list(value)[:limit]
        return value

    return BeforeValidator(cap)


MAX_SEEN_TURNS: Final = 512
"""Turn fingerprints a thread-less conversation key remembers (oldest forgotten first: a turn
that old, sent again, is only extracted again, which reinforces what it said)."""
MAX_COUNT: Final = 10**9
"""Counters (confirmations, injections, watermark positions) are clamped to [0, 10**9]: a
hand-edited or hostile document with a 4,000-digit count would otherwise load, then fail every
later ``str()`` or save on Python's int-string limit."""


def clamp_count(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return min(max(value, 0), MAX_COUNT)
    return value


COUNT = BeforeValidator(clamp_count)

MAX_ENTITIES: Final = 12
MAX_ENTITY_CHARS: Final = 60


def entity_list(value: Any) -> Any:
    """Entities as a model or a hand-edited file wrote them, made usable, never a reason to
    reject the fact: one string becomes a list, non-strings and blanks are dropped, each is
    case-folded and cut to :data:`MAX_ENTITY_CHARS`, duplicates collapse, the list is capped at
    :data:`MAX_ENTITIES`."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return ()
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            continue
        name = " ".join(clean_text(item).split()).casefold()[:MAX_ENTITY_CHARS].strip()
        if name and not is_invisible(name) and name not in names:
            names.append(name)
    return tuple(names[:MAX_ENTITIES])


def invalid_text(text: str) -> bool:
    """True when ``text`` cannot be stored as UTF-8: it holds a lone surrogate (JSON ``"\\ud800"``
    decodes to one), which would make every save of the document fail."""
    return bool(_LONE_SURROGATE.search(text))


def cap_text(text: str, limit: int) -> str:
    """``text`` with lone surrogates replaced (U+FFFD) and cut to ``limit`` characters (the
    head kept, ``…`` marking the cut), as the extraction's own validation does."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"

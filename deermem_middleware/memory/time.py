"""Dates of events: normalising them, resolving relative ones, reading time in questions (pure).

A fact has two times: when it was *learnt* (the conversation, which recency and decay use) and
when the *event* it describes happened ("moved to Berlin in May 2023"), possibly years earlier.
Questions such as "when did I move?" or "what did I do last weekend?" need the second, so:

- :func:`normalize_event_date` turns what an extraction model (or a hand-edited file) wrote into
  one canonical *partial ISO date*, ``YYYY``, ``YYYY-MM``, ``YYYY-Www`` (ISO week) or
  ``YYYY-MM-DD``, and :func:`event_date_range` maps it to the UTC range ``[start, end)`` it covers;
- extraction models often copy relative dates ("yesterday", "上个月") unresolved, or resolve them
  against the wrong "today": :func:`resolve_relative_date` does it deterministically against the
  moment the user spoke, and says ``None`` rather than guess;
- selection needs to know whether a question is about time at all: asks *when*, asks about the
  *present* state, or names a *period*; :func:`query_time_intent` says which.

Nothing reads the clock. Calendar dates are the reference's own wall date (in its timezone, the
user's "yesterday"; naive is read as UTC); ranges run between UTC midnights, since event dates
are timezone-less calendar dates.

Rules decided here:

- several *different* relative expressions, or a vague one ("a few days ago", "几天前", a weekday
  without last/next such as "on Monday" or "this Friday"), leave a fact's date unresolved;
- "last weekend" is the Saturday and Sunday of the previous ISO week, "this weekend" those of the
  reference's ISO week; as a fact's date a weekend is written as its Saturday;
- "last <weekday>"/"next <weekday>" is the nearest such day strictly before/after the reference
  day; "last <month>"/"next <month>" the nearest such month strictly before/after its month;
- a month name without a year ("in May", "this May", "五月") is the most recent such month on or
  before the reference month, or the first on or after it when the text reads as future
  ("will", "'ll", "going to", "plans to", "next", 打算, 计划, 准备, 将要…). "this may" is never a
  month ("this may be…"), and only full English names (and "Sept") count without a year, since
  abbreviations such as "Jan" are also names;
- "in N days/weeks/months/years" is a future offset, unless the text has a past-tense marker
  ("was", "did", "took", "learned", …): then it is a duration ("learned Spanish in 6 months");
- an absolute date in a fact's text (a year 1900..2100, an ISO date, "May 7", "5月7日") means the
  model saw a real date: resolve_relative_date returns ``None`` and the caller keeps it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Final, Literal, TypeAlias

__all__ = [
    "MAX_YEAR",
    "MIN_YEAR",
    "TimeIntent",
    "epoch_seconds",
    "event_date_range",
    "normalize_event_date",
    "parse_timestamp",
    "query_time_intent",
    "resolve_relative_date",
]

logger = logging.getLogger(__name__)

_Precision: TypeAlias = Literal["year", "month", "week", "weekend", "day"]
_Partial: TypeAlias = tuple[_Precision, date]  # precision, first day (Monday, Saturday…)

MIN_YEAR: Final = 1000
MAX_YEAR: Final = 2999
"""Event dates outside these years are rejected as model noise."""

_MONTH_NAMES: Final = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTHS: Final = (
    {name: i for i, name in enumerate(_MONTH_NAMES, 1)}
    | {name[:3]: i for i, name in enumerate(_MONTH_NAMES, 1)}
    | {"sept": 9}
)
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS: Final = {
    **{w: i for i, w in enumerate(("one", "two", "three", "four", "five", "six", "seven",
                                   "eight", "nine", "ten", "eleven", "twelve"), 1)},
    "a": 1, "an": 1, "a couple": 2, "a couple of": 2, "couple of": 2,
}  # fmt: skip
_CN_DIGITS: Final = dict(zip("一二三四五六七八九", range(1, 10), strict=True)) | {"两": 2}
_CN_NUM: Final = "[一二两三四五六七八九十]{1,3}"


def _words(*alternatives: str) -> str:
    """A regex alternation, longest first, with spaces matching any whitespace."""
    ordered = sorted(alternatives, key=len, reverse=True)
    return "|".join(r"\s+".join(map(re.escape, a.split())) for a in ordered)


_MON_ANY: Final = rf"(?P<mon>{_words(*_MONTHS)})\b\.?"
_MON_FULL: Final = rf"(?P<mon>{_words(*_MONTH_NAMES, 'sept')})\b"
_WD: Final = rf"(?P<wd>{_words(*_WEEKDAYS)})\b"
_ORD: Final = r"(?:st|nd|rd|th)?"
_N: Final = (
    rf"(?P<n>\d{{1,3}}|{_words(*_NUMBER_WORDS, 'a few', 'several', 'some', 'a handful of')})"
)
_UNIT: Final = r"(?P<unit>day|week|month|year)s?"
_I: Final = re.IGNORECASE

# Absolute dates, most specific first (each also serves normalize_event_date as a full match).
_ISO_DAY: Final = re.compile(
    r"(?<!\d)(?P<y>\d{4})(?P<s>[-/])(?P<m>\d{1,2})(?P=s)(?P<d>\d{1,2})(?!\d)"
)
_ISO_WEEK: Final = re.compile(r"(?<!\d)(?P<y>\d{4})-?W(?P<w>\d{1,2})(?!\d)", _I)
_ISO_MONTH: Final = re.compile(r"(?<!\d)(?P<y>\d{4})[-/](?P<m>\d{1,2})(?![\d/-])")
_EN_DMY: Final = re.compile(
    rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON_ANY},?\s+(?P<y>\d{{4}})\b", _I
)
_EN_MDY: Final = re.compile(rf"\b{_MON_ANY}\s+(?P<d>\d{{1,2}}){_ORD},?\s+(?P<y>\d{{4}})\b", _I)
_EN_MY: Final = re.compile(rf"\b{_MON_ANY},?\s+(?P<y>\d{{4}})\b", _I)
_ZH_YMD: Final = re.compile(
    r"(?<!\d)(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*[日号]"
)
_ZH_YM: Final = re.compile(r"(?<!\d)(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月")
_ZH_Y: Final = re.compile(r"(?<!\d)(?P<y>\d{4})\s*年")
_PLAIN_YEAR: Final = re.compile(r"(?P<y>\d{4})")
_ISO_DATETIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}.*")
_NORMALIZE: Final = (_ISO_DAY, _ISO_WEEK, _ISO_MONTH, _EN_DMY, _EN_MDY, _EN_MY, _ZH_YMD, _ZH_YM,
                     _ZH_Y, _PLAIN_YEAR)  # fmt: skip
# In running text: the above, then month-and-day without a year, then a bare year.
_EN_MD: Final = re.compile(rf"\b{_MON_ANY}\s+(?P<d>\d{{1,2}}){_ORD}\b", _I)
_EN_DM: Final = re.compile(rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON_ANY}", _I)
_ZH_MD: Final = re.compile(
    rf"(?<![\d一二两三四五六七八九十])(?P<m>\d{{1,2}}|{_CN_NUM})\s*月\s*(?P<d>\d{{1,2}}|{_CN_NUM})\s*[日号]"
)
_TEXT_YEAR: Final = re.compile(r"(?<!\d)(?P<y>19\d\d|20\d\d|2100)(?!\d)")
_ABSOLUTE: Final = (*_NORMALIZE[:-1], _EN_MD, _EN_DM, _ZH_MD, _TEXT_YEAR)

# Relative expressions.
_FIXED_PHRASES: Final[dict[tuple[_Precision, int], str]] = {
    ("day", -3): "大前天",
    ("day", -2): "day before yesterday|前天",
    ("day", -1): "yesterday|last night|昨天|昨晚|昨日",
    ("day", 0): "today|tonight|this morning|this afternoon|this evening|今天|今晚|今早|今日",
    ("day", 1): "tomorrow|明天|明晚",
    ("day", 2): "day after tomorrow|后天",
    ("day", 3): "大后天",
    ("weekend", -1): "last weekend|上周末|上个周末",
    ("weekend", 0): "this weekend|这周末|本周末|这个周末",
    ("weekend", 1): "next weekend|下周末|下个周末",
    ("week", -1): "last week|previous week|上周|上星期|上个星期|上礼拜|上个礼拜",
    ("week", 0): "this week|本周|这周|这星期|这个星期|本星期",
    ("week", 1): "next week|下周|下星期|下个星期|下礼拜|下个礼拜",
    ("month", -1): "last month|previous month|上个月|上月",
    ("month", 0): "this month|这个月|本月",
    ("month", 1): "next month|下个月|下月",
    ("year", -2): "前年",
    ("year", -1): "last year|previous year|去年",
    ("year", 0): "this year|今年",
    ("year", 1): "next year|明年",
    ("year", 2): "后年",
}
_FIXED: Final = {p: key for key, phrases in _FIXED_PHRASES.items() for p in phrases.split("|")}
_ZH_GUARDED: Final = ("前天", "前年", "后天", "后年")  # not inside 之前天气 / 以前天天 / 然后天…
_FIXED_RE: Final = re.compile(
    "|".join(
        rf"\b{_words(p)}\b" if p.isascii() else ("(?<![之以然])" if p in _ZH_GUARDED else "") + p
        for p in sorted(_FIXED, key=len, reverse=True)
    ),
    _I,
)
_AGO: Final = re.compile(rf"\b{_N}\s+{_UNIT}\s+ago\b", _I)
_IN_N: Final = re.compile(rf"\bin\s+{_N}\s+{_UNIT}\b", _I)
_ZH_AGO: Final = re.compile(
    rf"(?P<n>\d{{1,3}}|{_CN_NUM}|好几|几)\s*(?P<unit>天|周|个?星期|个?礼拜|个月|年)(?:以前|之前|前)"
)
_WEEKDAY_DIR: Final = re.compile(rf"\b(?P<dir>last|next)\s+{_WD}", _I)
_WEEKDAY: Final = re.compile(rf"\b{_WD}", _I)
_MONTH_DIR: Final = re.compile(rf"\b(?P<dir>last|next)\s+{_MON_FULL}", _I)
_MONTH_IN: Final = re.compile(rf"\b(?:in|during|this(?!\s+may\b))\s+{_MON_FULL}", _I)
_ZH_MONTH: Final = re.compile(
    r"(?<![\d一二两三四五六七八九十年])(?P<m>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月"
)
_ZH_UNITS: Final = {"天": "day", "周": "week", "星期": "week", "礼拜": "week",
                    "月": "month", "年": "year"}  # fmt: skip
_FUTURE: Final = re.compile(
    r"\b(?:will|going\s+to|gonna|plan(?:s|ning)?\s+to|intend(?:s|ing)?\s+to|next|upcoming)\b"
    r"|['’]ll\b|打算|计划|准备|将要|将会|即将",
    _I,
)
_PAST: Final = re.compile(
    r"\b(?:was|were|did|had|took|spent|learn(?:ed|t)|finished|completed|managed)\b", _I
)

# Question cues.
_ASKS_WHEN: Final = re.compile(
    r"\b(?:when|what\s+(?:time|date|day|year|month)s?|which\s+(?:day|date|year|month)s?"
    r"|how\s+long\s+(?:ago|have|has))\b"
    r"|什么时候|什么时间|何时|哪一?年|哪个月|几月|哪一?天|几号|多久以前|多久了",
    _I,
)
_CURRENT: Final = re.compile(
    r"\b(?:now|currently|current|at\s+the\s+moment|these\s+days|nowadays|lately|recently"
    r"|latest|most\s+recent|still|any\s*more|at\s+present)\b"
    r"|现在|目前|当前|最近|如今|这些天|近来|还在|仍然",
    _I,
)


def parse_timestamp(text: str | None) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime; ``None`` for empty or unparseable text.

    Accepts the ``Z``/``z`` suffix DeerFlow writes and naive times (read as UTC).
    """
    if not text or not isinstance(text, str):
        return None
    return _parse_iso(text)


@lru_cache(maxsize=65536)
def _parse_iso(text: str) -> datetime | None:
    """:func:`parse_timestamp` of a string, cached: every index build of a memory revision reads
    the same few thousand timestamps again (datetimes are immutable, so sharing them is safe)."""
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


def epoch_seconds(text: str | None) -> float | None:
    """Seconds since the Unix epoch of an ISO-8601 timestamp (see :func:`parse_timestamp`)."""
    moment = parse_timestamp(text)
    return None if moment is None else moment.timestamp()


def normalize_event_date(value: object) -> str | None:
    """The date of an event as a partial ISO date (``YYYY``, ``YYYY-MM``, ``YYYY-Www``,
    ``YYYY-MM-DD``), or ``None``.

    Accepts those forms (also unpadded, and with ``/``), full ISO datetimes (converted to UTC
    first), English ("May 2023", "7th May 2023", "May 7, 2023", "Sept. 2023"), Chinese
    ("2023年5月7日", "2023年5月", "2023年") and a plain ``int`` year. Years outside 1000..2999,
    impossible dates, bools, placeholders ("unknown", "null") and relative or free text give
    ``None``. Relative text is :func:`resolve_relative_date`'s job.
    """
    partial = _normalize(value)
    return None if partial is None else _format(partial)


def event_date_range(value: str | None) -> tuple[datetime, datetime] | None:
    """The UTC range ``[start, end)`` a partial date covers: its year, month, ISO week (Monday to
    Monday) or day. ``None`` for anything :func:`normalize_event_date` rejects."""
    partial = _normalize(value)
    return None if partial is None else _range(partial)


def resolve_relative_date(text: str, reference: datetime) -> str | None:
    """The date a fact's text refers to, resolved against ``reference`` (when the user said
    it), as a partial ISO date; weeks are ISO weeks, a weekend is its Saturday.

    ``None`` when the text has no relative expression, a vague one, several that differ, or an
    absolute date (the caller keeps what the model wrote). The rules are in the module docstring.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    ref = reference.date()
    scanned = _Scan(text)
    if _absolute(scanned, ref, future=False):
        return None
    hits = _relative(scanned, ref, future=bool(_FUTURE.search(text)), past=bool(_PAST.search(text)))
    values = {None if hit is None else _format(hit) for hit in hits}
    if len(values) != 1 or None in values:
        if hits:
            logger.debug("relative date left unresolved (vague or ambiguous): %r", values)
        return None
    return values.pop()


@dataclass(frozen=True, slots=True)
class TimeIntent:
    """What a question says about time (see :func:`query_time_intent`)."""

    asks_when: bool = False
    """The question asks for a date or time ("when…", "what year…", "什么时候")."""
    current: bool = False
    """The question is about the present state ("now", "currently", "still", "现在")."""
    period: tuple[datetime, datetime] | None = None
    """The period the question names, ``[start, end)`` in UTC (the hull of several)."""

    @property
    def any(self) -> bool:
        """Whether the question says anything about time at all."""
        return self.asks_when or self.current or self.period is not None


def query_time_intent(text: str, now: datetime) -> TimeIntent:
    """What a question says about time: does it ask *when*, ask about the *present*, name a
    *period*? Relative expressions resolve against ``now`` as in :func:`resolve_relative_date`
    (vague ones name nothing); absolute ones are read too (years 1900..2100, "May 2023", ISO
    dates, "2023年5月"; "May 7"/"5月7日" get the month rule's year). Several periods give their
    hull. "today" is a period, not *current*.
    """
    if not isinstance(text, str) or not text.strip():
        return TimeIntent()
    ref = now.date()
    future = bool(_FUTURE.search(text))
    scanned = _Scan(text)
    found = _absolute(scanned, ref, future=future)
    past = bool(_PAST.search(text))
    found += [p for p in _relative(scanned, ref, future=future, past=past) if p is not None]
    ranges = [_range(p) for p in found]
    period = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
    return TimeIntent(
        asks_when=bool(_ASKS_WHEN.search(text)),
        current=bool(_CURRENT.search(text)),
        period=period,
    )


class _Scan:
    """Text being scanned. Each match is blanked out so that later, looser patterns skip it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def take(self, pattern: re.Pattern[str]) -> list[re.Match[str]]:
        found = list(pattern.finditer(self.text))
        for m in found:
            self.text = self.text[: m.start()] + "\0" * (m.end() - m.start()) + self.text[m.end() :]
        return found


def _absolute(scanned: _Scan, ref: date, *, future: bool) -> list[_Partial]:
    found: list[_Partial] = []
    for pattern in _ABSOLUTE:
        for m in scanned.take(pattern):
            partial = _from_match(m, ref, future=future)
            if partial is not None:
                found.append(partial)
    return found


def _relative(scanned: _Scan, ref: date, *, future: bool, past: bool) -> list[_Partial | None]:
    """Every relative expression in the text, resolved; ``None`` marks a vague one."""
    hits: list[_Partial | None] = []
    for m in scanned.take(_AGO):
        hits.append(_counted(m["n"], m["unit"].lower(), -1, ref))
    for m in scanned.take(_ZH_AGO):
        hits.append(_counted(m["n"], _ZH_UNITS[m["unit"].lstrip("个")], -1, ref))
    for m in scanned.take(_IN_N):
        if not past:  # with a past-tense marker "in 6 months" is a duration, not a date
            hits.append(_counted(m["n"], m["unit"].lower(), 1, ref))
    for m in scanned.take(_FIXED_RE):
        unit, n = _FIXED[" ".join(m.group().lower().split())]
        hits.append(_shift(ref, unit, n))
    for m in scanned.take(_WEEKDAY_DIR):
        sign = -1 if m["dir"].lower() == "last" else 1
        gap = sign * (_WEEKDAYS.index(m["wd"].lower()) - ref.weekday()) % 7 or 7
        hits.append(("day", ref + timedelta(days=sign * gap)))
    hits.extend(None for _ in scanned.take(_WEEKDAY))  # "on Monday": which one?
    for m in scanned.take(_MONTH_DIR):
        sign = -1 if m["dir"].lower() == "last" else 1
        gap = sign * (_MONTHS[m["mon"].lower()] - ref.month) % 12 or 12
        hits.append(_shift(ref, "month", sign * gap))
    for m in scanned.take(_MONTH_IN):
        hits.append(_occurrence(ref, _MONTHS[m["mon"].lower()], future=future))
    for m in scanned.take(_ZH_MONTH):
        number = _cn_int(m["m"])
        hits.append(None if number is None else _occurrence(ref, number, future=future))
    return hits


def _normalize(value: object) -> _Partial | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _make(value)
    if not isinstance(value, str) or not (text := value.strip()):
        return None
    if _ISO_DATETIME.fullmatch(text):
        moment = parse_timestamp(text)
        return None if moment is None else _make(moment.year, moment.month, moment.day)
    for pattern in _NORMALIZE:
        if m := pattern.fullmatch(text):
            return _from_match(m, None, future=False)
    return None


def _from_match(m: re.Match[str], ref: date | None, *, future: bool) -> _Partial | None:
    """The partial date that an absolute-date match names. A month without a year gets its
    year from :func:`_occurrence`."""
    groups = m.groupdict()
    if groups.get("w"):
        iso_year = int(groups["y"])
        try:
            monday = date.fromisocalendar(iso_year, int(groups["w"]), 1)
        except ValueError:
            return None
        return ("week", monday) if MIN_YEAR <= iso_year <= MAX_YEAR else None
    month = _MONTHS[groups["mon"].lower()] if groups.get("mon") else _cn_int(groups.get("m"))
    day = _cn_int(groups.get("d"))
    if groups.get("y"):
        year: int | None = int(groups["y"])
    elif month is not None and ref is not None and 1 <= month <= 12:
        occurrence = _occurrence(ref, month, future=future)
        year = None if occurrence is None else occurrence[1].year
    else:
        year = None
    if year is None or (groups.get("m") and month is None) or (groups.get("d") and day is None):
        return None
    return _make(year, month, day)


def _make(year: int, month: int | None = None, day: int | None = None) -> _Partial | None:
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        if month is None:
            return ("year", date(year, 1, 1))
        if day is None:
            return ("month", date(year, month, 1))
        return ("day", date(year, month, day))
    except ValueError:  # 2023-02-30, month 13
        return None


def _cn_int(text: str | None) -> int | None:
    """A number written in digits or small Chinese numerals (一 … 九十九)."""
    if not text:
        return None
    if text.isdigit():
        return int(text)
    head, ten, tail = text.partition("十")
    if not ten:
        return _CN_DIGITS.get(text)
    tens = _CN_DIGITS.get(head) if head else 1
    ones = _CN_DIGITS.get(tail) if tail else 0
    return None if tens is None or ones is None else tens * 10 + ones


def _counted(word: str, unit: str, sign: int, ref: date) -> _Partial | None:
    words = " ".join(word.lower().split())
    n = int(words) if words.isdigit() else _NUMBER_WORDS.get(words) or _cn_int(words)
    return None if n is None else _shift(ref, unit, sign * n)  # "a few", "几": vague


def _shift(ref: date, unit: str, n: int) -> _Partial | None:
    """``ref`` moved by ``n`` units, at that unit's precision; ``None`` outside the year range."""
    try:
        partial: _Partial
        if unit == "day":
            partial = ("day", ref + timedelta(days=n))
        elif unit in ("week", "weekend"):
            moved = ref + timedelta(weeks=n)
            monday = moved - timedelta(days=moved.weekday())
            partial = ("week", monday) if unit == "week" else ("weekend", monday + timedelta(5))
        elif unit == "month":
            year, month0 = divmod(ref.year * 12 + ref.month - 1 + n, 12)
            partial = ("month", date(year, month0 + 1, 1))
        else:
            partial = ("year", date(ref.year + n, 1, 1))
    except (OverflowError, ValueError):
        return None
    return partial if MIN_YEAR <= partial[1].year <= MAX_YEAR else None


def _occurrence(ref: date, month: int, *, future: bool) -> _Partial | None:
    """The month named without a year: the most recent on or before ``ref``'s month, or the
    first on or after it when the text reads as future."""
    delta = (month - ref.month) % 12 if future else -((ref.month - month) % 12)
    return _shift(ref, "month", delta)


def _format(partial: _Partial) -> str:
    precision, first = partial
    if precision == "year":
        return f"{first.year:04d}"
    if precision == "month":
        return f"{first.year:04d}-{first.month:02d}"
    if precision == "week":
        iso = first.isocalendar()
        return f"{iso.year:04d}-W{iso.week:02d}"
    return first.isoformat()  # a day; a weekend as its Saturday


def _range(partial: _Partial) -> tuple[datetime, datetime]:
    precision, first = partial
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    if precision == "year":
        return start, start.replace(year=first.year + 1)
    if precision == "month":
        carry, month0 = divmod(first.month, 12)
        return start, start.replace(year=first.year + carry, month=month0 + 1)
    days = {"week": 7, "weekend": 2, "day": 1}[precision]
    return start, start + timedelta(days=days)

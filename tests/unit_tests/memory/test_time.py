"""Event dates (dates.py): normalising them, resolving relative ones, time in questions.

Pure and offline: every test passes its own frozen clock. ``REF`` is a Wednesday in ISO week
2026-W14; other clocks sit on month, year, ISO-week and leap-day boundaries.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from deermem_middleware.memory import decay as lifecycle
from deermem_middleware.memory.time import (
    TimeIntent,
    epoch_seconds,
    event_date_range,
    normalize_event_date,
    parse_timestamp,
    query_time_intent,
    resolve_relative_date,
)

REF = datetime(2026, 4, 1, 12, tzinfo=UTC)  # Wednesday, 2026-W14
DEC_1 = datetime(2026, 12, 1, 9, tzinfo=UTC)  # Tuesday, 2026-W49
MAR_10 = datetime(2026, 3, 10, 9, tzinfo=UTC)
JAN_15 = datetime(2026, 1, 15, 9, tzinfo=UTC)
MON_2023 = datetime(2023, 1, 2, 9, tzinfo=UTC)  # Monday, 2023-W01
SUN_2023 = datetime(2023, 1, 1, 9, tzinfo=UTC)  # Sunday, still 2022-W52
NEW_YEARS_EVE = datetime(2026, 12, 31, 9, tzinfo=UTC)  # Thursday, 2026-W53
LEAP = datetime(2024, 3, 1, 9, tzinfo=UTC)
DAYS_2024 = [date(2024, 1, 1) + timedelta(days=i) for i in range(366)]
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")  # fmt: skip
PARTIAL_ISO = re.compile(r"\d{4}(-\d{2}(-\d{2})?|-W\d{2})?")


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def period(text: str, now: datetime = REF) -> tuple[datetime, datetime] | None:
    return query_time_intent(text, now).period


# --- timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-04-01T12:00:00Z", REF),
        ("2026-04-01T12:00:00z", REF),
        ("2026-04-01T12:00:00", REF),
        ("2026-04-01T14:00:00+02:00", REF),
        ("2026-04-01T07:00:00-05:00", REF),
        ("  2026-04-01T12:00:00Z  ", REF),
        ("2026-04-01", utc(2026, 4, 1)),
    ],
)
def test_parse_timestamp_reads_iso_as_aware_utc(text: str, expected: datetime) -> None:
    moment = parse_timestamp(text)
    assert moment == expected
    assert moment is not None and moment.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text", [None, "", "   ", "yesterday", "2026-13-01", "2026-04-01T25:00", 42, ["2026"]]
)
def test_parse_timestamp_rejects_junk(text: Any) -> None:
    assert parse_timestamp(text) is None
    assert epoch_seconds(text) is None


@pytest.mark.parametrize(
    "text",
    ["2026-04-01T12:00:00Z", "2026-04-01T12:00:00", "2026-04-01T14:00:00+02:00", "", "junk", None],
)
def test_parse_timestamp_matches_lifecycle(text: str | None) -> None:
    assert parse_timestamp(text) == lifecycle.parse_timestamp(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01T01:00:00+01:00", 0.0),
        ("1970-01-02T00:00:00", 86_400.0),
        ("2026-04-01T12:00:00Z", REF.timestamp()),
    ],
)
def test_epoch_seconds(text: str, expected: float) -> None:
    assert epoch_seconds(text) == expected


# --- normalize_event_date / event_date_range ------------------------------------------------

NORMALIZED = [
    ("2023", "2023"),
    ("2023-05", "2023-05"),
    ("2023-5", "2023-05"),
    ("2023/05", "2023-05"),
    ("2023-W18", "2023-W18"),
    ("2023-w8", "2023-W08"),
    ("2023W18", "2023-W18"),
    ("2020-W53", "2020-W53"),
    ("2023-05-07", "2023-05-07"),
    ("2023-5-7", "2023-05-07"),
    ("2023/05/07", "2023-05-07"),
    ("2024-02-29", "2024-02-29"),
    ("2023-05-07T14:00:00Z", "2023-05-07"),
    ("2023-05-07 10:00", "2023-05-07"),
    ("2023-05-07T23:30:00-02:00", "2023-05-08"),
    ("2023-05-08T01:00:00+05:00", "2023-05-07"),
    ("May 2023", "2023-05"),
    ("may, 2023", "2023-05"),
    ("Jan 2023", "2023-01"),
    ("Sept. 2023", "2023-09"),
    ("7 May 2023", "2023-05-07"),
    ("7th May 2023", "2023-05-07"),
    ("22nd of June 2023", "2023-06-22"),
    ("May 7, 2023", "2023-05-07"),
    ("May 7 2023", "2023-05-07"),
    ("December 31st, 1999", "1999-12-31"),
    ("sept 5, 2023", "2023-09-05"),
    ("2023年5月7日", "2023-05-07"),
    ("2023年5月7号", "2023-05-07"),
    ("2023 年 5 月", "2023-05"),
    ("2023年", "2023"),
    ("  2023-05  ", "2023-05"),
    ("1000", "1000"),
    ("2999-12-31", "2999-12-31"),
]


@pytest.mark.parametrize(("value", "expected"), NORMALIZED)
def test_normalize_event_date_accepts(value: str, expected: str) -> None:
    assert normalize_event_date(value) == expected


@pytest.mark.parametrize(("value", "expected"), NORMALIZED)
def test_normalize_event_date_is_idempotent_and_canonical(value: str, expected: str) -> None:
    normalized = normalize_event_date(value)
    assert normalized is not None and PARTIAL_ISO.fullmatch(normalized)
    assert normalize_event_date(normalized) == normalized


@pytest.mark.parametrize(("value", "expected"), [(2023, "2023"), (1000, "1000"), (2999, "2999")])
def test_normalize_event_date_accepts_int_year(value: int, expected: str) -> None:
    assert normalize_event_date(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 2023.0, 999, 3000, -2023, 20230507, [2023], {"year": 2023},
        "", "   ", "null", "None", "unknown", "n/a", "N/A", "TBD", "last week", "yesterday",
        "in May", "May", "May 7", "5月", "sometime in 2023", "2023-02-30", "2023-13",
        "2023-00", "2023-04-31", "2021-W53", "2023-W00", "0999", "3000", "3000-01-01",
        "3000-W01", "0999-W10", "2023-05-07T25:00:00", "07/05/2023", "2023-05-07-08", "12023",
    ],
)  # fmt: skip
def test_normalize_event_date_rejects(value: Any) -> None:
    assert normalize_event_date(value) is None
    if value is None or isinstance(value, str):
        assert event_date_range(value) is None


@pytest.mark.parametrize(
    ("value", "start", "end"),
    [
        ("2023", utc(2023, 1, 1), utc(2024, 1, 1)),
        ("2023-05", utc(2023, 5, 1), utc(2023, 6, 1)),
        ("2023-12", utc(2023, 12, 1), utc(2024, 1, 1)),
        ("2024-02", utc(2024, 2, 1), utc(2024, 3, 1)),
        ("2023-W18", utc(2023, 5, 1), utc(2023, 5, 8)),
        ("2023-W01", utc(2023, 1, 2), utc(2023, 1, 9)),
        ("2020-W53", utc(2020, 12, 28), utc(2021, 1, 4)),
        ("2023-05-07", utc(2023, 5, 7), utc(2023, 5, 8)),
        ("2023-12-31", utc(2023, 12, 31), utc(2024, 1, 1)),
        ("May 2023", utc(2023, 5, 1), utc(2023, 6, 1)),
    ],
)
def test_event_date_range(value: str, start: datetime, end: datetime) -> None:
    assert event_date_range(value) == (start, end)


def test_event_date_ranges_nest_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        day_range = event_date_range(day.isoformat())
        month_range = event_date_range(f"{day.year}-{day.month:02d}")
        iso = day.isocalendar()
        week_range = event_date_range(f"{iso.year}-W{iso.week:02d}")
        year_range = event_date_range(str(day.year))
        assert day_range and month_range and week_range and year_range
        assert day_range == (utc(day.year, day.month, day.day), noon(day) + timedelta(hours=12))
        assert month_range[0] <= day_range[0] < day_range[1] <= month_range[1]
        assert year_range[0] <= month_range[0] < month_range[1] <= year_range[1]
        assert week_range[0] <= day_range[0] < day_range[1] <= week_range[1]
        assert week_range[0].weekday() == 0 and week_range[1] - week_range[0] == timedelta(7)


# --- resolve_relative_date ------------------------------------------------------------------

RESOLVED_AT_REF = [
    ("Yesterday I went hiking.", "2026-03-31"),
    ("YESTERDAY", "2026-03-31"),
    ("I moved today", "2026-04-01"),
    ("dinner tonight", "2026-04-01"),
    ("this morning I ran 5k", "2026-04-01"),
    ("this afternoon", "2026-04-01"),
    ("this evening", "2026-04-01"),
    ("earlier today I called mum", "2026-04-01"),
    ("last night I saw a film", "2026-03-31"),
    ("the day before yesterday", "2026-03-30"),
    ("tomorrow I fly to Rome", "2026-04-02"),
    ("the day after tomorrow", "2026-04-03"),
    ("last week I started a new job", "2026-W13"),
    ("the previous week", "2026-W13"),
    ("this week", "2026-W14"),
    ("Next Week", "2026-W15"),
    ("last weekend I went camping", "2026-03-28"),
    ("this weekend", "2026-04-04"),
    ("next weekend", "2026-04-11"),
    ("last month I adopted a cat", "2026-03"),
    ("the previous month", "2026-03"),
    ("this month", "2026-04"),
    ("next month", "2026-05"),
    ("last year I lived in Paris", "2025"),
    ("the previous year", "2025"),
    ("this year", "2026"),
    ("next year", "2027"),
    ("3 days ago", "2026-03-29"),
    ("three days ago", "2026-03-29"),
    ("a day ago", "2026-03-31"),
    ("a couple of days ago", "2026-03-30"),
    ("twelve days ago", "2026-03-20"),
    ("0 days ago", "2026-04-01"),
    ("2 weeks ago", "2026-W12"),
    ("a week ago", "2026-W13"),
    ("2 months ago", "2026-02"),
    ("five months ago", "2025-11"),
    ("a year ago", "2025"),
    ("10 years ago I graduated", "2016"),
    ("my exam is in 3 days", "2026-04-04"),
    ("in two weeks", "2026-W16"),
    ("in a month", "2026-05"),
    ("in 2 years", "2028"),
    ("last Monday", "2026-03-30"),
    ("last Wednesday", "2026-03-25"),  # REF is a Wednesday: a week before
    ("last Thursday", "2026-03-26"),
    ("next Wednesday", "2026-04-08"),
    ("next Friday", "2026-04-03"),
    ("next Tuesday", "2026-04-07"),
    ("last May", "2025-05"),
    ("last March", "2026-03"),
    ("last April", "2025-04"),  # strictly before April 2026
    ("next May", "2026-05"),
    ("next April", "2027-04"),
    ("I went to Lisbon in May", "2025-05"),
    ("in April", "2026-04"),
    ("this March I ran a marathon", "2026-03"),
    ("during September", "2025-09"),
    ("I will visit Paris in May", "2026-05"),
    ("I'm going to Rome in March", "2027-03"),
    ("She plans to marry in May", "2026-05"),
    ("I'll start in June", "2026-06"),
    ("yesterday, well, last night really", "2026-03-31"),
    ("On Mondays I swim; yesterday I skipped", "2026-03-31"),
    ("This may be odd, but yesterday I quit", "2026-03-31"),
    ("昨天我去爬山了", "2026-03-31"),
    ("昨晚", "2026-03-31"),
    ("前天", "2026-03-30"),
    ("大前天", "2026-03-29"),
    ("今天", "2026-04-01"),
    ("今晚", "2026-04-01"),
    ("今早", "2026-04-01"),
    ("今天早上我跑步了", "2026-04-01"),
    ("明天", "2026-04-02"),
    ("后天", "2026-04-03"),
    ("上周", "2026-W13"),
    ("上星期", "2026-W13"),
    ("上个星期我换了工作", "2026-W13"),
    ("本周", "2026-W14"),
    ("这周", "2026-W14"),
    ("这个星期", "2026-W14"),
    ("下周", "2026-W15"),
    ("下星期", "2026-W15"),
    ("上周末", "2026-03-28"),
    ("上个月我养了一只猫", "2026-03"),
    ("上月", "2026-03"),
    ("这个月", "2026-04"),
    ("本月", "2026-04"),
    ("下个月", "2026-05"),
    ("下月", "2026-05"),
    ("去年我住在巴黎", "2025"),
    ("前年", "2024"),
    ("今年", "2026"),
    ("明年", "2027"),
    ("3天前", "2026-03-29"),
    ("三天前", "2026-03-29"),
    ("十天前", "2026-03-22"),
    ("两个月前", "2026-02"),
    ("5年前", "2021"),
    ("十二年前", "2014"),
    ("2周前", "2026-W12"),
    ("三个星期前", "2026-W11"),
    ("我五月去了北京", "2025-05"),
    ("我打算五月去北京", "2026-05"),
    ("我4月搬家了", "2026-04"),
]


@pytest.mark.parametrize(("text", "expected"), RESOLVED_AT_REF)
def test_resolve_relative_date(text: str, expected: str) -> None:
    assert resolve_relative_date(text, REF) == expected


@pytest.mark.parametrize(("text", "expected"), RESOLVED_AT_REF)
def test_resolved_dates_are_normalized_partial_dates(text: str, expected: str) -> None:
    assert normalize_event_date(resolve_relative_date(text, REF)) == expected


@pytest.mark.parametrize(
    ("text", "reference", "expected"),
    [
        ("last month", JAN_15, "2025-12"),
        ("上个月", JAN_15, "2025-12"),
        ("2 months ago", JAN_15, "2025-11"),
        ("last year", JAN_15, "2025"),
        ("last December", JAN_15, "2025-12"),
        ("in January", JAN_15, "2026-01"),
        ("in December", JAN_15, "2025-12"),
        ("last week", MON_2023, "2022-W52"),
        ("this week", MON_2023, "2023-W01"),
        ("last weekend", MON_2023, "2022-12-31"),
        ("last Monday", MON_2023, "2022-12-26"),
        ("this week", SUN_2023, "2022-W52"),
        ("this weekend", SUN_2023, "2022-12-31"),
        ("yesterday", SUN_2023, "2022-12-31"),
        ("tomorrow", NEW_YEARS_EVE, "2027-01-01"),
        ("next month", NEW_YEARS_EVE, "2027-01"),
        ("in 2 months", NEW_YEARS_EVE, "2027-02"),
        ("this week", NEW_YEARS_EVE, "2026-W53"),
        ("next week", NEW_YEARS_EVE, "2027-W01"),
        ("下周", NEW_YEARS_EVE, "2027-W01"),
        ("next Sunday", NEW_YEARS_EVE, "2027-01-03"),
        ("yesterday", LEAP, "2024-02-29"),
        ("昨天", LEAP, "2024-02-29"),
        ("last month", LEAP, "2024-02"),
        ("in 3 days", datetime(2024, 2, 27, tzinfo=UTC), "2024-03-01"),
        ("What a day. Yesterday I quit.", datetime(2026, 4, 1, 1, 0), "2026-03-31"),
    ],
)
def test_resolve_relative_date_across_boundaries(
    text: str, reference: datetime, expected: str
) -> None:
    assert resolve_relative_date(text, reference) == expected


def test_resolve_uses_the_references_own_calendar_day() -> None:
    # 01:00 in UTC+8 is still the previous day in UTC; the user's "yesterday" is local.
    local = datetime(2026, 4, 1, 1, tzinfo=timezone(timedelta(hours=8)))
    assert resolve_relative_date("yesterday", local) == "2026-03-31"
    assert resolve_relative_date("yesterday", local.astimezone(UTC)) == "2026-03-30"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "I like pizza",
        "I prefer dark mode",
        "I live in Berlin",
        "todayish vibes",  # word boundaries
        "my yesterdays were better",
        "lastweek",
        # vague
        "a few days ago",
        "several weeks ago",
        "some years ago",
        "几天前",
        "好几年前",
        "on Monday I went to the gym",
        "Monday",
        "this Friday",
        "I swim on Mondays",
        # ambiguous: different expressions
        "yesterday and last week",
        "today, and tomorrow too",
        "昨天和上周",
        "yesterday, a few days ago",
        "昨天或者几天前",
        "Yesterday and on Monday I ran",
        # absolute date already there
        "In 2022, last year, I moved",
        "Yesterday was 2026-03-31",
        "In May 2023 I started",
        "On May 7 yesterday",
        "昨天是2026年3月31日",
        "去年是2025年",
        "3月31日昨天",
        "I paid 2000 euros yesterday",
        # not a date
        "I may go out",
        "This may be true",
        "I learned Spanish in 6 months",
        "I finished the course in 3 weeks",
        "之前天气很好",
        "我以前天天跑步",
        "in 999 years",
    ],
)
def test_resolve_relative_date_returns_none(text: str) -> None:
    assert resolve_relative_date(text, REF) is None


def test_resolve_logs_when_it_leaves_an_ambiguous_date(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="deermem_middleware.memory.time")
    assert resolve_relative_date("yesterday or last week", REF) is None
    assert any("unresolved" in record.getMessage() for record in caplog.records)


def test_day_expressions_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        ref = noon(day)
        assert resolve_relative_date("yesterday", ref) == (day - timedelta(1)).isoformat()
        assert resolve_relative_date("昨天", ref) == (day - timedelta(1)).isoformat()
        assert resolve_relative_date("today", ref) == day.isoformat()
        assert resolve_relative_date("tomorrow", ref) == (day + timedelta(1)).isoformat()
        assert (
            resolve_relative_date("the day before yesterday", ref)
            == (day - timedelta(2)).isoformat()
        )
        for n in (0, 1, 7, 40, 365):
            assert resolve_relative_date(f"{n} days ago", ref) == (day - timedelta(n)).isoformat()


def test_month_and_year_expressions_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        ref = noon(day)
        month_start = utc(day.year, day.month, 1)
        last = event_date_range(resolve_relative_date("last month", ref))
        assert last is not None and last[1] == month_start
        assert timedelta(28) <= last[1] - last[0] <= timedelta(31)
        this = event_date_range(resolve_relative_date("this month", ref))
        nxt = event_date_range(resolve_relative_date("next month", ref))
        assert this is not None and nxt is not None
        assert this[0] == month_start and nxt[0] == this[1]
        assert resolve_relative_date("上个月", ref) == resolve_relative_date("last month", ref)
        assert resolve_relative_date("last year", ref) == "2023"
        assert resolve_relative_date("去年", ref) == "2023"


def test_week_expressions_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        ref = noon(day)
        this = event_date_range(resolve_relative_date("this week", ref))
        last = event_date_range(resolve_relative_date("last week", ref))
        nxt = event_date_range(resolve_relative_date("next week", ref))
        assert this is not None and last is not None and nxt is not None
        assert this[0] <= utc(day.year, day.month, day.day) < this[1]
        assert this[0].weekday() == 0
        assert last[1] == this[0] and nxt[0] == this[1]
        saturday = date.fromisoformat(resolve_relative_date("last weekend", ref) or "")
        assert saturday.weekday() == 5
        assert this[0] - timedelta(7) <= utc(saturday.year, saturday.month, saturday.day) < this[0]


def test_weekday_expressions_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        ref = noon(day)
        for index, name in enumerate(WEEKDAYS):
            last = date.fromisoformat(resolve_relative_date(f"last {name}", ref) or "")
            nxt = date.fromisoformat(resolve_relative_date(f"next {name}", ref) or "")
            assert last.weekday() == index and 1 <= (day - last).days <= 7
            assert nxt.weekday() == index and 1 <= (nxt - day).days <= 7


def test_month_name_expressions_for_every_first_of_month() -> None:
    for ref_month in range(1, 13):
        ref = utc(2024, ref_month, 1)
        for index, name in enumerate(MONTHS, 1):
            months_back = (ref_month - index) % 12
            back_year, back_month0 = divmod(2024 * 12 + ref_month - 1 - months_back, 12)
            expected_past = f"{back_year}-{back_month0 + 1:02d}"
            assert resolve_relative_date(f"in {name}", ref) == expected_past
            last_back = months_back or 12
            last_year, last_month0 = divmod(2024 * 12 + ref_month - 1 - last_back, 12)
            expected_last = f"{last_year}-{last_month0 + 1:02d}"
            assert resolve_relative_date(f"last {name}", ref) == expected_last
            future = resolve_relative_date(f"I will go there in {name}", ref)
            assert future is not None
            assert utc(2024, ref_month, 1) <= datetime.fromisoformat(f"{future}-01T00:00+00:00")
            assert future.endswith(f"-{index:02d}")


# --- query_time_intent ----------------------------------------------------------------------


def test_query_examples_from_the_design() -> None:
    assert query_time_intent("When did I move to Berlin?", REF) == TimeIntent(asks_when=True)
    assert query_time_intent("Where do I live now?", REF) == TimeIntent(current=True)
    assert query_time_intent("What did I do last weekend?", DEC_1) == TimeIntent(
        period=(utc(2026, 11, 28), utc(2026, 11, 30))
    )
    assert period("What did I read in May?", DEC_1) == (utc(2026, 5, 1), utc(2026, 6, 1))
    assert period("What did I read in May?", MAR_10) == (utc(2025, 5, 1), utc(2025, 6, 1))
    assert not query_time_intent("What languages do I know?", REF).any
    assert query_time_intent("我现在住在哪里？", REF) == TimeIntent(current=True)
    assert query_time_intent("我什么时候搬家的？", REF) == TimeIntent(asks_when=True)
    assert query_time_intent("我上个月做了什么？", REF) == TimeIntent(
        period=(utc(2026, 3, 1), utc(2026, 4, 1))
    )
    assert query_time_intent("How long ago did I start running?", REF) == TimeIntent(asks_when=True)


@pytest.mark.parametrize(
    "text",
    [
        "When did I start?",
        "since when have I been vegan?",
        "What time is my flight?",
        "what date is the wedding",
        "What day did I arrive?",
        "Which day is the meeting?",
        "What year did I graduate?",
        "Which year did I move?",
        "What month was the trip?",
        "which month did we meet",
        "How long ago did I quit?",
        "How long have I been running?",
        "How long has she worked there?",
        "我什么时候开始跑步的？",
        "我何时毕业？",
        "我哪一年毕业的？",
        "我哪年去的日本？",
        "我几月去的？",
        "哪个月搬家的？",
        "哪天到的？",
        "哪一天开始的？",
        "几号出发？",
        "多久以前开始的？",
        "学了多久了？",
    ],
)
def test_query_asks_when(text: str) -> None:
    intent = query_time_intent(text, REF)
    assert intent.asks_when and intent.any


@pytest.mark.parametrize(
    "text",
    [
        "How old was I in school?",
        "What age did I start school?",
        "Whenever I cook, what do I use?",
        "What do I like?",
        "How long is the river?",
        "我喜欢什么？",
        "我学了几个月？",
    ],
)
def test_query_does_not_ask_when(text: str) -> None:
    assert not query_time_intent(text, REF).asks_when


@pytest.mark.parametrize(
    "text",
    [
        "Where do I work now?",
        "What am I reading right now?",
        "Where do I currently live?",
        "What is my current job?",
        "What am I doing at the moment?",
        "What do I eat these days?",
        "What do I do nowadays?",
        "What have I been up to lately?",
        "What did I buy recently?",
        "What is my latest project?",
        "What's my most recent hobby?",
        "Do I still play chess?",
        "Don't I smoke anymore?",
        "Do I not drink any more?",
        "Who is my manager at present?",
        "NOW what?",
        "我现在在哪工作？",
        "我目前住在哪里？",
        "当前的项目是什么？",
        "我最近在读什么？",
        "如今我做什么？",
        "这些天我吃什么？",
        "近来怎样？",
        "我还在学钢琴吗？",
        "我仍然住在北京吗？",
    ],
)
def test_query_is_about_the_present(text: str) -> None:
    intent = query_time_intent(text, REF)
    assert intent.current and intent.any


@pytest.mark.parametrize(
    "text",
    [
        "What languages do I know?",
        "Do I like snow?",
        "What knowledge do I have?",
        "Do I own a snowboard?",
        "What happened today?",
        "Tell me about my kids",
        "我喜欢吃什么？",
    ],
)
def test_query_is_not_about_the_present(text: str) -> None:
    assert not query_time_intent(text, REF).current


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did I do yesterday?", utc(2026, 3, 31), utc(2026, 4, 1)),
        ("What happened today?", utc(2026, 4, 1), utc(2026, 4, 2)),
        ("What did I eat last night?", utc(2026, 3, 31), utc(2026, 4, 1)),
        ("What am I doing tomorrow?", utc(2026, 4, 2), utc(2026, 4, 3)),
        ("What do I have this week?", utc(2026, 3, 30), utc(2026, 4, 6)),
        ("What did I do last week?", utc(2026, 3, 23), utc(2026, 3, 30)),
        ("Plans for next week?", utc(2026, 4, 6), utc(2026, 4, 13)),
        ("What did I do last weekend?", utc(2026, 3, 28), utc(2026, 3, 30)),
        ("What did I do last month?", utc(2026, 3, 1), utc(2026, 4, 1)),
        ("What happened last year?", utc(2025, 1, 1), utc(2026, 1, 1)),
        ("What did I do 3 days ago?", utc(2026, 3, 29), utc(2026, 3, 30)),
        ("What did I do two weeks ago?", utc(2026, 3, 16), utc(2026, 3, 23)),
        ("What did I do 2 months ago?", utc(2026, 2, 1), utc(2026, 3, 1)),
        ("What am I doing in 2 weeks?", utc(2026, 4, 13), utc(2026, 4, 20)),
        ("What did I do last Monday?", utc(2026, 3, 30), utc(2026, 3, 31)),
        ("What did I do in 2023?", utc(2023, 1, 1), utc(2024, 1, 1)),
        ("2019?", utc(2019, 1, 1), utc(2020, 1, 1)),
        ("What did I do in May 2023?", utc(2023, 5, 1), utc(2023, 6, 1)),
        ("Sept. 2023 trips", utc(2023, 9, 1), utc(2023, 10, 1)),
        ("What happened on 7 May 2023?", utc(2023, 5, 7), utc(2023, 5, 8)),
        ("What happened on May 7, 2023?", utc(2023, 5, 7), utc(2023, 5, 8)),
        ("What happened on 2023-05-07?", utc(2023, 5, 7), utc(2023, 5, 8)),
        ("What happened in 2023-W18?", utc(2023, 5, 1), utc(2023, 5, 8)),
        ("What happened on May 7?", utc(2025, 5, 7), utc(2025, 5, 8)),
        ("What did I read in March?", utc(2026, 3, 1), utc(2026, 4, 1)),
        ("What did I read in April?", utc(2026, 4, 1), utc(2026, 5, 1)),
        ("What will I do in May?", utc(2026, 5, 1), utc(2026, 6, 1)),
        ("Between 2021 and 2023, where did I live?", utc(2021, 1, 1), utc(2024, 1, 1)),
        ("last week or yesterday?", utc(2026, 3, 23), utc(2026, 4, 1)),
        ("yesterday or last week?", utc(2026, 3, 23), utc(2026, 4, 1)),
        ("In 2023 or in 2021?", utc(2021, 1, 1), utc(2024, 1, 1)),
        ("May 2023, or 7 May 2021?", utc(2021, 5, 7), utc(2023, 6, 1)),
        ("我昨天做了什么？", utc(2026, 3, 31), utc(2026, 4, 1)),
        ("我上周做了什么？", utc(2026, 3, 23), utc(2026, 3, 30)),
        ("我去年在哪？", utc(2025, 1, 1), utc(2026, 1, 1)),
        ("三天前呢？", utc(2026, 3, 29), utc(2026, 3, 30)),
        ("2023年我在哪？", utc(2023, 1, 1), utc(2024, 1, 1)),
        ("2023年5月我在哪？", utc(2023, 5, 1), utc(2023, 6, 1)),
        ("2023年5月7日发生了什么？", utc(2023, 5, 7), utc(2023, 5, 8)),
        ("我5月读了什么？", utc(2025, 5, 1), utc(2025, 6, 1)),
        ("我五月读了什么？", utc(2025, 5, 1), utc(2025, 6, 1)),
        ("我十二月读了什么？", utc(2025, 12, 1), utc(2026, 1, 1)),
        ("我三月读了什么？", utc(2026, 3, 1), utc(2026, 4, 1)),
        ("5月7日发生了什么？", utc(2025, 5, 7), utc(2025, 5, 8)),
    ],
)
def test_query_period(text: str, start: datetime, end: datetime) -> None:
    intent = query_time_intent(text, REF)
    assert intent.period == (start, end)
    assert intent.any


@pytest.mark.parametrize(
    "text",
    [
        "What do I like?",
        "May I ask you something?",
        "What is 1234 + 5?",
        "What is 1899 + 5?",
        "What did I do on Monday?",
        "What did I do a few days ago?",
        "Did I finish it in 3 days?",
        "This may be a silly question",
        "二十二月",  # 22 is no month
        "",
    ],
)
def test_query_without_period(text: str) -> None:
    assert period(text) is None


def test_query_period_of_yesterday_and_last_month_for_every_day_of_2024() -> None:
    for day in DAYS_2024:
        ref = noon(day)
        start = utc(day.year, day.month, day.day)
        assert period("What did I do yesterday?", ref) == (start - timedelta(1), start)
        assert period("What did I do last month?", ref) == event_date_range(
            resolve_relative_date("last month", ref)
        )


def test_query_accepts_a_naive_clock() -> None:
    assert period("yesterday?", datetime(2026, 4, 1, 12)) == (utc(2026, 3, 31), utc(2026, 4, 1))


def test_time_intent_any_and_immutability() -> None:
    assert not TimeIntent().any
    assert TimeIntent(asks_when=True).any
    assert TimeIntent(current=True).any
    assert TimeIntent(period=(utc(2026, 1, 1), utc(2026, 1, 2))).any
    intent = TimeIntent()
    with pytest.raises(dataclasses.FrozenInstanceError):
        intent.current = True  # type: ignore[misc]


def test_watermarks_beyond_the_cap_are_dropped_oldest_first_by_time_not_spelling() -> None:
    from deermem_middleware.memory.document import Watermark
    from deermem_middleware.memory.watermark import MAX_WATERMARKS, newest_watermarks

    marks = {
        f"t{i}": Watermark(turn="fp", count=1, updatedAt=f"2026-03-01T00:00:{i % 60:02d}Z")
        for i in range(MAX_WATERMARKS - 1)
    }
    # spelled later than the next one, but 20:00 UTC: the older of the two
    marks["offset"] = Watermark(turn="fp", count=1, updatedAt="2026-01-02T01:00:00+05:00")
    marks["utc"] = Watermark(turn="fp", count=1, updatedAt="2026-01-01T22:00:00Z")
    kept = newest_watermarks(marks)
    assert len(kept) == MAX_WATERMARKS
    assert "utc" in kept and "offset" not in kept

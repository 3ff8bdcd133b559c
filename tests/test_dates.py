"""Relative times resolved against when they were said (summaries and recall write dates, not "yesterday")."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory import dates
from memory.dates import day_line, resolve_relative, span

MONDAY = 1_683_540_000.0  # Monday 8 May 2023, 10:00 UTC


@pytest.mark.parametrize(("said", "resolved"), [
    ("I went yesterday", "I went yesterday (yesterday: 7 May 2023)"),
    ("the day before yesterday", "the day before yesterday (the day before yesterday: 6 May 2023)"),  # not "yesterday"
    ("3 days ago and two weeks ago", "3 days ago and two weeks ago (3 days ago: 5 May 2023; two weeks ago: around "
                                     "24 April 2023)"),
    ("see you next Friday! Bye.", "see you next Friday! (next Friday: 12 May 2023) Bye."),  # after its sentence
    ("last weekend", "last weekend (last weekend: the weekend of 6 May 2023)"),
    ("last month, next year", "last month, next year (last month: April 2023; next year: 2024)"),
    ("一昨日と昨日", "一昨日と昨日（一昨日：2023年5月6日、昨日：2023年5月7日）"),
    ("昨日は雨。いい", "昨日は雨。（昨日：2023年5月7日）いい"),
    ("nothing relative here", "nothing relative here"),
])
def test_relative_times_get_the_date_they_meant(said, resolved):
    assert resolve_relative(said, MONDAY) == resolved


def test_resolving_twice_changes_nothing():
    once = resolve_relative("yesterday and tomorrow", MONDAY)
    assert resolve_relative(once, MONDAY + 86_400 * 30) == once


def test_what_is_read_per_day_or_minute_changes_exactly_at_its_boundary():
    """Resolved by the day said and the time line by the minute (each cached so): the first and last second of a UTC
    day read alike, the next day's first second does not."""
    midnight = MONDAY - 10 * 3_600
    assert resolve_relative("yesterday", midnight) == resolve_relative("yesterday", midnight + 86_399) == \
        "yesterday (yesterday: 7 May 2023)"
    assert resolve_relative("yesterday", midnight + 86_400) == "yesterday (yesterday: 8 May 2023)"
    assert dates.days_named("what did we say yesterday?", midnight + 86_399) == [dates.date(2023, 5, 7)]
    assert dates.days_named("what did we say yesterday?", midnight + 86_400) == [dates.date(2023, 5, 8)]
    assert dates.now_text(midnight + 59.9) == "Monday, 8 May 2023, 00:00 UTC"
    assert dates.now_text(midnight - 0.1) == "Sunday, 7 May 2023, 23:59 UTC"
    assert dates.now_text(MONDAY + 61) == "Monday, 8 May 2023, 10:01 UTC"


def test_day_lines_and_spans():
    assert day_line(MONDAY) == "Monday, 8 May 2023"
    assert span(MONDAY, MONDAY + 3_600) == "8 May 2023"
    assert span(MONDAY, MONDAY + 86_400 * 2) == "8 May 2023 to 10 May 2023"
    assert span(None, MONDAY) == ""


PHRASES = ["yesterday", "the day before yesterday", "10 days ago", "last week", "next Tuesday", "this morning",
           "tomorrowland", "lastly", "today (already dated)", "昨日", "一昨日", "lorem", "ipsum dolor sit amet", "(x)"]


@given(st.lists(st.sampled_from(PHRASES), max_size=40))
def test_scanning_around_keywords_finds_what_a_full_scan_finds(words):
    text = " ".join(words)
    full = [m.group(0) for m in dates._ANY.finditer(text)]
    assert [m.group(0) for m in dates._matches(text)] == full


def test_the_days_a_question_names():
    from datetime import UTC, date, datetime

    from memory.dates import days_named

    now = datetime(2023, 5, 4, 12, tzinfo=UTC).timestamp()
    assert days_named("What did Ana say on 3 May 2023?", now) == [date(2023, 5, 3)]
    assert days_named("and on May 3rd?", now) == days_named("the 3rd of May", now) == [date(2023, 5, 3)]
    assert days_named("what did we say yesterday?", now) == [date(2023, 5, 3)]
    assert days_named("last Tuesday", now) == [date(2023, 5, 2)]
    assert days_named("5月3日に何を話した？", now) == [date(2023, 5, 3)]
    assert days_named("the plan of 2023-04-30", now) == [date(2023, 4, 30)]
    assert days_named("on 12 December", now) == [date(2022, 12, 12)]  # no year: the latest before now
    # a day not begun yet has nothing said on it: not looked up
    assert days_named("what do we do tomorrow?", now) == [] and days_named("on 3 May 2099", now) == []
    assert days_named("today, not tomorrow", now) == [date(2023, 5, 4)]
    assert days_named("on 30 February", now) == [] and days_named("what is the tide?", now) == []


def test_a_dates_day_number_is_left_out_of_the_words_a_question_looks_up():
    """The day is looked up as a day; a bare "1" would find every message with a 1 in it."""
    assert dates.without_day_numbers("What happened on 1 December 2026?") == "What happened on December 2026?"
    assert dates.without_day_numbers("on May 3rd, 2023 or 2023-05-03") == "on May 2023 or May 2023"
    assert dates.without_day_numbers("2023年5月3日と5月4日") == "2023年5月と5月"
    assert dates.without_day_numbers("room 1, not a date: 2023-13-01") == "room 1, not a date: 2023-13-01"

"""Dates as the persona reads them: day lines, spans, and relative times resolved against when they were said.

Everything renders from stored timestamps in UTC, so the same message always renders the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10}


def day_of(ts: float) -> date:
    """The UTC day a moment falls on."""
    return datetime.fromtimestamp(ts, UTC).date()


def day_text(d: date) -> str:
    """7 May 2023."""
    return f"{d.day} {d.strftime('%B')} {d.year}"


def day_line(ts: float) -> str:
    """Monday, 7 May 2023: the line history shows when the day changes."""
    return _day_line(int(ts // 86_400))


@lru_cache(maxsize=4_096)
def _day_line(day: int) -> str:
    d = day_of(day * 86_400)
    return f"{d.strftime('%A')}, {day_text(d)}"


def now_text(ts: float) -> str:
    return _now_text(int(ts // 60))


@lru_cache(maxsize=64)  # every reply's tail says it: the same minute renders once
def _now_text(minute: int) -> str:
    return f"{day_line(minute * 60)}, {datetime.fromtimestamp(minute * 60, UTC).strftime('%H:%M')} UTC"


def same_day(a: float, b: float) -> bool:
    return a // 86_400 == b // 86_400  # POSIX time has no leap seconds: UTC days are exact multiples


def span(first: float | None, last: float | None) -> str:
    """The days a summary covers: one day, or from one to another; empty when unknown."""
    if first is None or last is None:
        return ""
    a, b = day_of(first), day_of(last)
    return day_text(a) if a == b else f"{day_text(a)} to {day_text(b)}"


def _week_before(d: date) -> str:
    return f"the week before {day_text(d)}"


def _month(d: date, delta: int) -> str:
    month = d.month - 1 + delta
    year = d.year + month // 12
    return date(year, month % 12 + 1, 1).strftime("%B %Y")


def _weekday(d: date, name: str, direction: int) -> date:
    """The named weekday strictly before (-1) or after (+1) d."""
    target = WEEKDAYS.index(name)
    step = timedelta(days=direction)
    d = d + step
    while d.weekday() != target:
        d += step
    return d


def _ago(d: date, count: str, unit: str) -> str:
    n = _NUMBERS.get(count.lower()) or int(count)
    unit = unit.lower()
    if unit.startswith("day"):
        return day_text(d - timedelta(days=n))
    if unit.startswith("week"):
        return f"around {day_text(d - timedelta(weeks=n))}"
    if unit.startswith("month"):
        return _month(d, -n)
    return str(d.year - n)


def _weekend(d: date, direction: int) -> str:
    saturday = _weekday(d - timedelta(days=1) if direction < 0 else d, "saturday", direction)
    return f"the weekend of {day_text(saturday)}"


Resolver = Callable[[re.Match[str], date], str]
_RULES: list[tuple[re.Pattern[str], Resolver]] = [
    (re.compile(r"\bthe day before yesterday\b", re.I), lambda m, d: day_text(d - timedelta(days=2))),
    (re.compile(r"\bthe day after tomorrow\b", re.I), lambda m, d: day_text(d + timedelta(days=2))),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), lambda m, d: day_text(d - timedelta(days=1))),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), lambda m, d: day_text(d)),
    (re.compile(r"\btomorrow\b", re.I), lambda m, d: day_text(d + timedelta(days=1))),
    (re.compile(r"\b(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten) (days?|weeks?|months?|years?)"
                r" ago\b", re.I), lambda m, d: _ago(d, m.group(1), m.group(2))),
    (re.compile(r"\blast week\b", re.I), lambda m, d: _week_before(d)),
    (re.compile(r"\bnext week\b", re.I), lambda m, d: f"the week after {day_text(d)}"),
    (re.compile(r"\blast weekend\b", re.I), lambda m, d: _weekend(d, -1)),
    (re.compile(r"\b(?:this|next) weekend\b", re.I), lambda m, d: _weekend(d, 1)),
    (re.compile(r"\blast month\b", re.I), lambda m, d: _month(d, -1)),
    (re.compile(r"\bnext month\b", re.I), lambda m, d: _month(d, 1)),
    (re.compile(r"\blast year\b", re.I), lambda m, d: str(d.year - 1)),
    (re.compile(r"\bnext year\b", re.I), lambda m, d: str(d.year + 1)),
    (re.compile(r"\blast (" + "|".join(WEEKDAYS) + r")\b", re.I),
     lambda m, d: day_text(_weekday(d, m.group(1).lower(), -1))),
    (re.compile(r"\bnext (" + "|".join(WEEKDAYS) + r")\b", re.I),
     lambda m, d: day_text(_weekday(d, m.group(1).lower(), 1))),
    # Japanese: no word boundaries; the longest words first so 一昨日 is not read as 昨日.
    (re.compile(r"一昨日|おととい"), lambda m, d: _ja(d - timedelta(days=2))),
    (re.compile(r"明後日|あさって"), lambda m, d: _ja(d + timedelta(days=2))),
    (re.compile(r"昨日|昨夜|きのう"), lambda m, d: _ja(d - timedelta(days=1))),
    (re.compile(r"今日|今夜|今朝|きょう"), lambda m, d: _ja(d)),
    (re.compile(r"明日|あした"), lambda m, d: _ja(d + timedelta(days=1))),
    (re.compile(r"先週"), lambda m, d: f"{_ja(d)}の前の週"),
    (re.compile(r"来週"), lambda m, d: f"{_ja(d)}の次の週"),
    (re.compile(r"先月"), lambda m, d: _ja_month(d, -1)),
    (re.compile(r"来月"), lambda m, d: _ja_month(d, 1)),
    (re.compile(r"去年|昨年"), lambda m, d: f"{d.year - 1}年"),
    (re.compile(r"来年"), lambda m, d: f"{d.year + 1}年"),
]


# Every rule in one alternation, each as a named group, so a text is scanned once; English rules share
# their leading word boundary, which lets the regex engine skip ahead faster.
_ENGLISH = [(i, p.pattern[2:]) for i, (p, _) in enumerate(_RULES) if p.pattern.startswith(r"\b")]
_OTHER = [(i, p.pattern) for i, (p, _) in enumerate(_RULES) if not p.pattern.startswith(r"\b")]
_ANY = re.compile(r"\b(?:" + "|".join(f"(?P<r{i}>{p})" for i, p in _ENGLISH) + ")|"
                  + "|".join(f"(?P<r{i}>{p})" for i, p in _OTHER), re.I)
# A word every rule contains: only the text around these is scanned with the full alternation.
_KEYWORDS = re.compile(r"yesterday|today|tonight|tomorrow|ago|last|next|this|昨|今|明|一昨日|おととい|あさって|きのう"
                       r"|きょう|あした|先[週月]|来[週月年]|去年", re.I)
_REACH = 30  # characters a rule may start before its keyword ("the day before yesterday", "10 days ago")


def _ja(d: date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def _ja_month(d: date, delta: int) -> str:
    month = d.month - 1 + delta
    return f"{d.year + month // 12}年{month % 12 + 1}月"


def resolve_relative(text: str, said_at: float) -> str:
    """Text with the date each relative time meant noted after its sentence: "I went yesterday. (yesterday:
    7 May 2023)".

    The words said stay as they were, so what was said can still be quoted and found whole. Resolved text
    passed through again does not change (a phrase already noted is left alone). One pass: at each place the
    first rule that matches wins, so "the day before yesterday" is never read as "yesterday".
    """
    return _resolved(text, int(said_at // 86_400))


# Only the day said matters: the same messages come back turn after turn in recall and transcripts, and a question
# asked today is read against today however many times it is asked.
@lru_cache(maxsize=1_024)
def _resolved(text: str, day: int) -> str:
    d = None
    notes: dict[int, list[str]] = {}
    for found in _matches(text):
        index = int(found.lastgroup[1:])  # type: ignore[index]  # every alternative of the pattern is named
        pattern, resolve = _RULES[index]
        match = pattern.match(text, found.start())
        if match is None:  # pragma: no cover - the rule matched here as part of the alternation
            continue
        phrase = match.group(0)
        ascii_phrase = phrase.isascii()
        if f"{phrase}: " in text or f"{phrase}：" in text:  # noted already
            continue
        d = d or day_of(day * 86_400)
        end = _SENTENCE_END.search(text, found.end())
        at = end.end() if end else len(text)
        notes.setdefault(at, []).append(f"{phrase}: {resolve(match, d)}" if ascii_phrase
                                        else f"{phrase}：{resolve(match, d)}")
    if not notes:
        return text
    out, start = [], 0
    for at, said in sorted(notes.items()):
        wide = "：" in said[0]  # the first phrase noted there was Japanese
        out += [text[start:at], f"（{'、'.join(said)}）" if wide else f" ({'; '.join(said)})"]
        start = at
    return "".join(out) + text[start:]


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")


def _matches(text: str) -> list[re.Match[str]]:
    """The rules' matches, left to right, looking only around keywords (most text has none)."""
    windows: list[list[int]] = []
    for key in _KEYWORDS.finditer(text):
        start = text.rfind(" ", 0, max(0, key.start() - _REACH)) + 1
        stop = text.find(" ", key.end() + _REACH)
        stop = len(text) if stop < 0 else stop
        if windows and start <= windows[-1][1]:  # overlapping: one window, so no match is cut in two
            windows[-1][1] = max(windows[-1][1], stop)
        else:
            windows.append([start, stop])
    return [m for start, stop in windows for m in _ANY.finditer(text, start, stop)]


_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_MONTHS = {m.lower(): i for i, m in enumerate(_NAMES, 1)}
_MONTH = "(" + "|".join(_MONTHS) + r")"
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?" + _MONTH + r"(?:,? (\d{4}))?\b", re.I)
_MONTH_DAY = re.compile(r"\b" + _MONTH + r" (\d{1,2})(?:st|nd|rd|th)?(?:,? (\d{4}))?\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_JA_DATE = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日")
MOST_DAYS = 3  # a question names a day or two; more is a list, not a question about when


def days_named(text: str, now: float) -> list[date]:
    """The days a question names, absolutely ("3 May 2023", "May 3rd", 2023-05-03, 5月3日) or relatively
    ("yesterday", "last Tuesday", "three days ago", as of `now`); a day without a year is its latest before now,
    and one after today ("tomorrow", next year's date) is left out: nothing has been said on it yet."""
    return list(_days_named(text, int(now // 86_400)))


@lru_cache(maxsize=256)  # each request for a reply reads its question again (a retry, a preview, a playbook's nodes)
def _days_named(text: str, day: int) -> tuple[date, ...]:
    today = day_of(day * 86_400)
    text = _resolved(text, day)
    found: list[date] = []
    for m in _DAY_MONTH.finditer(text):
        found += _dated(m.group(3), _MONTHS[m.group(2).lower()], m.group(1), today)
    for m in _MONTH_DAY.finditer(text):
        found += _dated(m.group(3), _MONTHS[m.group(1).lower()], m.group(2), today)
    for m in _ISO.finditer(text):
        found += _dated(m.group(1), int(m.group(2)), m.group(3), today)
    for m in _JA_DATE.finditer(text):
        found += _dated(m.group(1), int(m.group(2)), m.group(3), today)
    return tuple(d for d in dict.fromkeys(found) if d <= today)[:MOST_DAYS]


def without_day_numbers(text: str) -> str:
    """The text with each date's day number left out ("1 December 2026" -> "December 2026", 2026-12-01 -> "December
    2026"): the day is looked up as a day, and a bare "1" would find every message with a 1 in it."""
    text = _DAY_MONTH.sub(lambda m: " ".join(filter(None, (m.group(2), m.group(3)))), text)
    text = _MONTH_DAY.sub(lambda m: " ".join(filter(None, (m.group(1), m.group(3)))), text)
    text = _ISO.sub(lambda m: f"{_NAMES[int(m.group(2)) - 1]} {m.group(1)}" if 1 <= int(m.group(2)) <= 12
                    else m.group(0), text)
    return _JA_DATE.sub(lambda m: f"{m.group(1) + '年' if m.group(1) else ''}{m.group(2)}月", text)


def _dated(year: str | None, month: int, day: str, today: date) -> list[date]:
    try:
        d = date(int(year) if year else today.year, month, int(day))
        if not year and d > today:
            d = date(d.year - 1, month, int(day))
    except ValueError:  # 31 April, 29 February of another year: not a day
        return []
    return [d]


def day_bounds(d: date) -> tuple[float, float]:
    """A UTC day as [start, end) timestamps."""
    start = datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()
    return start, start + 86_400

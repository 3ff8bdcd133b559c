"""The offline model's summaries: the most informative sentences that fit, quoted with who said them and when.

A transcript is read line by line: `[name]: text` at the margin starts a message (its next lines,
indented, continue it whatever they say), a `[Monday, 8 May 2023]` line sets the date. A merge's
material has `name: text` and `- fact [v3]` lines of earlier summaries, and bracketed headers such
as `[v5]` or `[existing long-term memory v19]` that say where the next facts come from. Headers,
the offline model's own replies and other boilerplate are never quoted. Sentences score by their
rare content words, numbers, names and dates; greetings and backchannel score low; a word already
quoted counts less the next time, so the budget fills with different facts rather than the same one
twice.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from dataclasses import dataclass

from memory.identifiers import identifiers
from memory.tokens import count_tokens
from memory.words import content_words

OFFLINE_TAG = "[offline model]"
SPEAKER_LINE = re.compile(r"^\[([^\]\n]{1,80})\]: ?(.*)$")  # a message starts: "[name]: text"
PLAIN_SPEAKER_LINE = re.compile(r"^([^\s:\[\]][^:\[\]\n]{0,39}): (.+)$")  # "name: text", in plain transcripts
DATE_LINE = re.compile(r"^\[(?:[A-Z][a-z]+day, )?(\d{1,2} [A-Z][a-z]+ \d{4})\]$")
SOURCE_LINE = re.compile(r"^\[(?:existing long-term memory (v\d+)|([^\]\n]{1,60}))\]$")
FACT_LINE = re.compile(r"^(?:- )?(?:([^:\n\[\]]{1,40}): )?(.+?)(?: (\[[^\]\n]{1,40}\]))?$")
BOILERPLATE = ("#", "[Stelis thread", "Also mentioned:", "Kept from", "Pinned:", "[Memory Summary]", "- ID:",
               "- Started:", "- Ended:", "- Messages:", "(partial:", "Older details", "(nothing to summarise)")
# The wrapping of a summary request (and of the part summaries a combining request is given): never quoted,
# though a part's material or a reply repeats it, or a stored memory would read as an echoed request.
REQUEST_MARKUP = re.compile(r"</?transcript>|\[part \d+ of \d+\]", re.IGNORECASE)
# A sentence ends at its stop, or after the date note that follows it ("... powerful. (yesterday: 7 May 2023)").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?!\()|(?<=\d{4}\))\s+|(?<=[。！？])(?!（)|(?<=[日月年]）)")
_MORE = re.compile(r"\(\+(\d+) more\)\s*$")
_DATE_NOTE = re.compile(r"[(;] ?(?:[^():;]{1,30}: )?(?:\d{1,2} [A-Z][a-z]+ \d{4}|the week|the weekend|around|"
                        r"[A-Z][a-z]+ \d{4}|\d{4})")


@dataclass
class Sentence:
    index: int
    date: str | None
    speaker: str | None
    text: str
    source: str | None  # provenance tag, "[v3]"
    tokens: int = 0
    words: frozenset[str] = frozenset()


def parse(material: str) -> list[Sentence]:
    """The quotable sentences of a transcript or a merge's material, in order."""
    lines = material.splitlines()
    # Engine transcripts say "[name]: text"; only a transcript with none of those reads "name: text" as a speaker.
    if any(SPEAKER_LINE.match(ln) for ln in lines):
        return _distinct(_transcript(lines))
    return _distinct(_notes(lines))


def _transcript(lines: list[str]) -> list[Sentence]:
    """A conversation: who said what is the line that starts each message, never what the message says.

    A message's own lines are its speaker's, whatever they look like ("- victim: ...", "[Current
    situation: ...]", "[bob]: ..."): the engine indents them, and nothing but a date line or a
    message start at the margin changes the speaker.
    """
    out: list[Sentence] = []
    date = speaker = None
    quoting = True  # False inside an offline reply
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        at_margin = not raw[:1].isspace()
        if at_margin and (m := DATE_LINE.match(line)):
            date = m.group(1)
            continue
        if at_margin and (m := SPEAKER_LINE.match(line)):
            speaker, line = m.group(1), m.group(2).strip()
            quoting = OFFLINE_TAG not in line
        if not quoting or OFFLINE_TAG in line or line.startswith(BOILERPLATE):
            quoting = quoting and OFFLINE_TAG not in line
            continue
        for part in _split(line):
            out.append(Sentence(len(out), date, speaker, part, None))
    return out


def _notes(lines: list[str]) -> list[Sentence]:
    """A merge's material or a plain transcript: `name: text` speakers, `- fact [v3]` lines of earlier
    summaries, and bracketed headers saying where the next facts come from."""
    out: list[Sentence] = []
    date = speaker = source = None
    quoting = True  # False inside a message that is an offline reply or boilerplate
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if m := DATE_LINE.match(line):
            date = m.group(1)
            continue
        if line.startswith(BOILERPLATE):
            continue
        if source is None and (m := PLAIN_SPEAKER_LINE.match(line)):
            speaker, line = m.group(1), m.group(2).strip()
            quoting = OFFLINE_TAG not in line
        elif m := SOURCE_LINE.match(line):
            # Facts of an existing memory carry their own tags; a version's facts get its name.
            tag = m.group(2)
            source = f"[{tag}]" if tag and re.search(r"\bv\d+\b", tag) else ""
            speaker, date, quoting = None, None, True
            continue
        elif source is not None or line.startswith("- "):  # a fact line of an earlier summary
            m = FACT_LINE.match(line)
            if m:
                own_source = m.group(3)
                for part in _split(m.group(2)):
                    out.append(Sentence(len(out), date, m.group(1), part, own_source or source or None))
            continue
        if not quoting or OFFLINE_TAG in line:
            quoting = quoting and OFFLINE_TAG not in line
            continue
        for part in _split(line):
            out.append(Sentence(len(out), date, speaker, part, None))
    return out


def _distinct(sentences: list[Sentence]) -> list[Sentence]:
    """The first of sentences said the same way by the same speaker (a merge repeats its sources)."""
    seen: set[tuple[str | None, str]] = set()
    out: list[Sentence] = []
    for s in sentences:
        key = (s.speaker, " ".join(s.text.lower().split()))
        if key not in seen:
            seen.add(key)
            out.append(Sentence(len(out), s.date, s.speaker, s.text, s.source))
    return out


def _split(text: str) -> list[str]:
    return [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]


def _weights(sentences: list[Sentence]) -> dict[str, float]:
    """Rarer words weigh more (inverse sentence frequency within this material)."""
    df: Counter[str] = Counter()
    for s in sentences:
        df.update(s.words)
    n = len(sentences)
    return {w: math.log(1 + n / c) for w, c in df.items()}


def _bonus(s: Sentence, names: set[str]) -> float:
    """Facts people ask about: numbers, names and identifiers, dates."""
    bonus = 1.5 * sum(1 for w in s.words if any(c.isdigit() for c in w))
    bonus += 1.0 * len(names & set(identifiers(s.text)))
    bonus += 2.0 * len(_DATE_NOTE.findall(s.text))
    return bonus


def select(sentences: list[Sentence], budget: int) -> list[Sentence]:
    """Greedy: the best value per token next, counting already-quoted words at a third, until full.

    Values only fall as words get quoted, so a stale value is an upper bound (lazy greedy).
    """
    for s in sentences:
        s.words = content_words(s.text)
        s.tokens = count_tokens(s.text) + (count_tokens(s.speaker) + 1 if s.speaker else 0) + 2
    weights = _weights(sentences)
    names = {n for s in sentences for n in identifiers(s.text)}
    base = {s.index: _bonus(s, names) for s in sentences}
    covered: set[str] = set()

    def value(s: Sentence) -> float:
        # fsum: a set's order changes with the process's hash seed, and a plain sum's last bits with it (ties)
        gain = math.fsum(weights[w] * (1.0 if w not in covered else 0.3) for w in s.words) + base[s.index]
        # "haha yes", "Good morning everyone!", "ok 2": too few words that mean something on their own
        small_talk = sum(1 for w in s.words if not w.isdigit()) < 2
        return gain / (s.tokens + 6) * (0.3 if small_talk else 1.0)

    heap = [(-value(s), s.index) for s in sentences if s.words or base[s.index]]
    heapq.heapify(heap)
    chosen: list[Sentence] = []
    used = 0
    while heap:
        _, index = heapq.heappop(heap)
        s = sentences[index]
        fresh = value(s)
        if heap and -fresh > heap[0][0]:  # fell below the next best: look again later
            heapq.heappush(heap, (-fresh, index))
            continue
        cost = s.tokens + (4 if s.date else 0)
        if fresh <= 0 or used + cost > budget:
            continue
        chosen.append(s)
        covered |= s.words
        used += cost
    return sorted(chosen, key=lambda s: s.index)


def render(chosen: list[Sentence]) -> str:
    """Grouped by date, one sentence a line, with its speaker and where it came from."""
    lines = []
    date = None
    for s in chosen:
        if s.date and s.date != date:
            lines.append(f"[{s.date}]")
            date = s.date
        speaker = f"{s.speaker}: " if s.speaker else ""
        source = f" {s.source}" if s.source and not s.text.endswith("]") else ""
        lines.append(f"{speaker}{s.text}{source}")
    return "\n".join(lines)


def extractive_summary(material: str, budget: int = 600) -> str:
    """Within `budget` tokens: the most informative sentences, then any names and numbers they left out.

    A name that fits nowhere is counted ("+N more"), never dropped silently.
    """
    material = REQUEST_MARKUP.sub("", material)
    sentences = parse(material)
    if not sentences:
        return "(nothing to summarise)"
    speakers = [s.speaker for s in sentences if s.speaker]
    carried, uncounted = _mentioned(material)
    names = list(dict.fromkeys([*speakers, *identifiers("\n".join(s.text for s in sentences)), *carried]))
    reserve = min(budget // 4, count_tokens("Also mentioned: " + ", ".join(names)) + 8)
    chosen = select(sentences, budget - reserve)
    while True:
        summary = _with_names(render(chosen), names, budget, uncounted)
        if count_tokens(summary) <= budget or not chosen:
            return summary.strip() or sentences[0].text[:budget]
        chosen = chosen[:-1]  # token counts of joined text are estimates: give back a line


def _mentioned(material: str) -> tuple[list[str], int]:
    """Names an earlier summary listed as "Also mentioned", and how many it could only count."""
    names: list[str] = []
    count = 0
    for line in material.splitlines():
        line = line.strip()
        if not line.startswith("Also mentioned:"):
            continue
        line = line.removeprefix("Also mentioned:")
        if m := _MORE.search(line):
            count += int(m.group(1))
            line = line[:m.start()]
        names += [n.strip() for n in line.split(",") if n.strip()]
    return names, count


def _with_names(summary: str, names: list[str], budget: int, uncounted: int = 0) -> str:
    """The summary, then the names it does not mention that fit, then how many did not."""
    present = set(identifiers(summary)) | {n for n in names if f"{n}: " in summary}
    missing = [x for x in names if x not in present]
    listed = list(missing)
    while True:
        text = summary
        if listed:
            text += ("\n" if text else "") + "Also mentioned: " + ", ".join(listed)
        if len(listed) < len(missing) or uncounted:
            text += ("" if listed else "\nAlso mentioned:") + f" (+{len(missing) - len(listed) + uncounted} more)"
        if count_tokens(text) <= budget or not listed:
            return text
        listed = listed[: max(0, min(len(listed) - 1, len(listed) * 3 // 4))]

"""What a merge left out, said where it came from (DESIGN.md section 6: a merge never drops a fact silently).

A merged memory is shorter than its sources, so facts fall out. Each source is checked after the
merge: the names and numbers it had that the merge lost are put back under its version, and facts
whose words the merge no longer carries are counted under the version that still holds them (a
fact's own "[v3]" tag, else its source), in one "Older details" line that recall can follow.
"""

from __future__ import annotations

import re

from memory.identifiers import identifiers
from memory.words import content_words

CARRIED = 0.5  # a fact is carried when this share of its content words is in the merged text
MAX_NAMES = 30  # names listed per source; the rest are counted
OLDER = "Older details are in "
_OLDER_LINE = re.compile(r"^Older details are in (.+): (\d+) fact\(s\) not repeated here\.$")
_MORE = re.compile(r" \(\+(\d+) more\)$")
_TAG = re.compile(r"\[(v\d+)\]\s*$")
_BOOKKEEPING = ("#", "[", "Kept from", OLDER, "Pinned:", "Also mentioned")


def facts(text: str) -> list[str]:
    """A memory's fact lines, without headers and bookkeeping lines."""
    lines = (raw.strip().removeprefix("- ").strip() for raw in text.splitlines())
    return [line for line in lines if line and not line.startswith(_BOOKKEEPING)]


def dropped(merged: str, source: str) -> list[str]:
    """The facts of a source whose words the merged text no longer carries."""
    kept = set(content_words(merged))
    out = []
    for fact in facts(source):
        words = set(content_words(fact))
        if words and len(words & kept) < CARRIED * len(words):
            out.append(fact)
    return out


def _names(text: str) -> tuple[list[str], int]:
    """Names and numbers of a text, and how many an earlier note could only count."""
    names: list[str] = []
    counted = 0
    for line in text.splitlines():
        if line.startswith(OLDER):
            continue
        if m := _MORE.search(line):
            counted += int(m.group(1))
            line = line[: m.start()]
        if line.startswith("Kept from"):  # already judged names: taken as listed
            names += [n.strip() for n in line.partition(": ")[2].split(",") if n.strip()]
            continue
        names += identifiers(line)
    return list(dict.fromkeys(names)), counted


def _older(text: str) -> tuple[list[str], int]:
    """Where an earlier note said older details are, and how many."""
    for line in text.splitlines():
        if m := _OLDER_LINE.match(line.strip()):
            return [w.strip() for w in m.group(1).split(",")], int(m.group(2))
    return [], 0


def account(merged: str, sources: list[tuple[str, str]]) -> str:
    """The merged text, then what each source lost: names put back per source, dropped facts counted once."""
    merged = "\n".join(line for line in merged.splitlines() if not line.strip().startswith(("Kept from", OLDER)))
    present = set(identifiers(merged))
    notes = []
    where: dict[str, None] = {}
    count = 0
    for name, content in sources:
        names, counted = _names(content)
        lost = [x for x in names if x not in present]
        present.update(lost)
        extra = counted + max(0, len(lost) - MAX_NAMES)
        if lost or counted:
            listed = ", ".join(lost[:MAX_NAMES]) or "names"
            notes.append(f"Kept from {name}: {listed}" + (f" (+{extra} more)" if extra else ""))
        places, earlier = _older(content)
        where.update(dict.fromkeys(places))
        count += earlier
        for fact in dropped(merged, content):
            tag = _TAG.search(fact)
            where[tag.group(1) if tag else name] = None
            count += 1
    if count:
        notes.append(f"{OLDER}{', '.join(where)}: {count} fact(s) not repeated here.")
    return "\n".join([merged, *notes]) if notes else merged

"""Names, numbers and identifiers in text: what no summary may lose."""

from __future__ import annotations

import re

# Boundaries are ASCII-only so that "Tokyo" inside Japanese text still counts as a word of its own.
_B, _E = r"(?<![A-Za-z0-9_])", r"(?![A-Za-z0-9_])"
_IDENTIFIER = re.compile(
    r"https?://\S+"                              # links
    r"|<[@#][!&]?\d+>"                           # Discord mentions
    r"|[@#][\w\-]+"                              # @names and #channels
    r"|`[^`\n]+`"                                # inline code
    rf"|{_B}\d[\d.,:/\-]*\d{_E}|{_B}\d{_E}"       # numbers, dates, times, versions
    rf"|{_B}[A-Za-z]+[_\d][A-Za-z0-9_\-.]*[A-Za-z0-9_]{_E}"  # snake_case, v2, calculator_v2, ISSUE-42
    rf"|{_B}[a-z]+[A-Z][A-Za-z0-9_]*{_E}"         # camelCase
    rf"|{_B}[A-Z][A-Za-z0-9_\-]*{_E}"             # Names, CamelCase, ACRONYMS
)
_STOPWORDS = {
    "I", "A", "An", "The", "It", "We", "You", "He", "She", "They", "This", "That", "These", "Those",
    "And", "But", "Or", "So", "If", "When", "Then", "There", "Here", "What", "Why", "How", "Who",
    "Yes", "No", "Ok", "OK", "Okay", "Hi", "Hello", "Thanks", "Please", "My", "Our", "Your", "Its",
    "In", "On", "At", "For", "To", "Of", "With", "As", "By", "From", "Let", "Also", "Not", "Do",
    "Is", "Are", "Was", "Were", "Be", "Can", "Will", "Would", "Should", "Could", "Maybe", "Just",
}
_SPEAKER = re.compile(r"^\[?([^\s:\]][^:\]\n]{0,39})\]?:\s+(.*)$")  # "name: text" and "[name]: text" lines
_SENTENCE_START = re.compile(r"(?:^|[.!?。！？]\s+|[\"“(]\s*)$")
_PLAIN_WORD = re.compile(r"[A-Z][a-z]+")


def identifiers(text: str) -> list[str]:
    """Distinct identifiers (speakers included) in order of first appearance.

    A plain capitalised word at the start of a sentence ("Hey", "Honestly") counts only if it is
    also capitalised somewhere else, where only a name would be.
    """
    found: list[tuple[str, bool]] = []  # (token, opens a sentence)
    for line in text.splitlines():
        speaker = _SPEAKER.match(line.strip())
        if speaker:
            found.append((speaker.group(1), False))
            line = speaker.group(2)
        for match in _IDENTIFIER.finditer(line):
            token = match.group(0).rstrip(".,:;-")
            if token and token not in _STOPWORDS:
                opening = bool(_SENTENCE_START.search(line[:match.start()])) and bool(_PLAIN_WORD.fullmatch(token))
                found.append((token, opening))
    named_inside = {token for token, opening in found if not opening}
    seen: dict[str, None] = {}
    for token, opening in found:
        if not opening or token in named_inside:
            seen.setdefault(token, None)
    return list(seen)

"""Names, numbers and identifiers in text: what no summary may lose."""

from __future__ import annotations

import re

# Names, numbers and identifiers: what a summary must never lose. Boundaries are ASCII-only so
# that "Tokyo" inside Japanese text still counts as a word of its own.
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
_SPEAKER = re.compile(r"^([^\s:][^:\n]{0,39}):\s+(.*)$")  # "name: text" transcript lines
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def identifiers(text: str) -> list[str]:
    """Distinct identifiers (speakers included) in order of first appearance."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        speaker = _SPEAKER.match(line.strip())
        if speaker:
            seen.setdefault(speaker.group(1), None)
        for match in _IDENTIFIER.finditer(line):
            token = match.group(0).rstrip(".,:;-")
            if token and token not in _STOPWORDS:
                seen.setdefault(token, None)
    return list(seen)


def sentences(text: str) -> list[str]:
    """Sentences, each keeping its line's speaker so a quote still says who said it."""
    out = []
    for line in text.splitlines():
        match = _SPEAKER.match(line.strip())
        speaker, body = (match.group(1), match.group(2)) if match else (None, line.strip())
        for part in _SENTENCE_END.split(body):
            if part.strip():
                out.append(f"{speaker}: {part.strip()}" if speaker else part.strip())
    return out

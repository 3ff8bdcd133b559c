"""What the offline model says in reply: that it is offline, and what memory and recall hold that fits the
message, each line with the layer it came from. Its replies are never quoted back into memory."""

from __future__ import annotations

import re

from memory.extractive import OFFLINE_TAG
from memory.llm import LLMRequest, Turn
from memory.recall import RECALL_GROUP
from memory.words import content_words

SHOWN = 3  # remembered lines a reply shows at most
LINE_CHARS = 220
VOLATILE_MARKS = ("[Now: ", "[Recall", "[Memory Summary]", "[Current situation")  # context, not messages
_DAY = re.compile(r"^\[[^\]]*\d{4}\]$")
_PERSON = re.compile(r"(?:^|\n)\[[^\]\n]{1,80}\] ")  # a person's message: "[name] text" (after a day line)
_SAID = re.compile(r"^\[([^\]\n]{1,80})\] (.+)$")  # one such line: who, what


def offline_reply(request: LLMRequest) -> str:
    persona = request.persona or "I"
    asked = _PERSON.sub("", _newest_message(request.turns))  # the words asked, not who asked
    found = _best(_remembered(request), content_words(asked))
    people, mine = _counts(request.turns)
    head = f"{OFFLINE_TAG} {persona} here. No language model is configured, so I cannot answer"
    lines = [f"{head}; this is what I remember that fits:" if found else
             f"{head}, and nothing in my memory matches that yet."]
    lines += [f"- {text} ({label})" for label, text in found]
    lines.append(f"({people} earlier message(s) from people here and {mine} of mine in view; /context shows what "
                 "a model would see.)")
    return "\n".join(lines)


def _remembered(request: LLMRequest) -> list[tuple[str, str]]:
    """(where it came from, line) for every line of the memory layers, of recall, and of what people said in the
    conversation the request carries (recall leaves out what is in view, so a fact said ten lines ago is there)."""
    out = _said_here(request.turns)
    for block in request.system[1:]:
        label = "memory"
        for raw in block.text.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                label = _layer(line.lstrip("# "), label)
            elif line and not _DAY.match(line) and not line.startswith("[Stelis thread") and OFFLINE_TAG not in line:
                out.append((label, line.removeprefix("- ")))
    for turn in request.turns:
        for block in turn.blocks:
            if block.text.startswith("[Recall"):
                day, place = "", ""
                for line in block.text.splitlines()[1:]:
                    if group := RECALL_GROUP.match(line):
                        day, place = group.groups()
                        continue
                    who, _, said = line.removeprefix("- ").partition(": ")
                    if said and OFFLINE_TAG not in said:  # another stand-in's words (a duet partner's)
                        out.append((f"recall: {day}, {who} ({place})", said))
    return out


def _said_here(turns: tuple[Turn, ...]) -> list[tuple[str, str]]:
    """People's messages in view before the newest (the question itself), each with who said it and when."""
    out: list[tuple[str, str]] = []
    day = ""
    for turn in turns:
        for block in turn.blocks:
            if turn.role != "user" or block.kind != "text" or not block.text or block.text.startswith(VOLATILE_MARKS):
                continue
            for line in block.text.splitlines():
                if _DAY.match(line.strip()):
                    day = line.strip()[1:-1]
                elif said := _SAID.match(line):
                    out.append((f"said here by {said.group(1)}{', ' + day if day else ''}", said.group(2)))
    return [(label, text) for label, text in out[:-1] if OFFLINE_TAG not in text]  # the last is the question


def _layer(heading: str, current: str) -> str:
    if m := re.search(r"Memory of this server \(long-term, v(\d+)\)", heading):
        return f"server memory v{m.group(1)}"
    if m := re.search(r"Long-term memory \(v(\d+)", heading):
        return f"long-term memory v{m.group(1)}"
    if m := re.search(r"Memory \d+ of \d+.*?v(\d+)", heading):
        return f"short-term memory v{m.group(1)}"
    if heading.startswith("Pinned"):
        return "pinned"
    if heading.startswith("Memory of"):
        return heading[len("Memory of "):]
    return current


def _best(lines: list[tuple[str, str]], asked: frozenset[str]) -> list[tuple[str, str]]:
    """The lines sharing most words with the message, at most SHOWN, each once; on a tie memory, then recall, then
    what was said in view (a model sees that anyway), newer before older."""
    scored = [(len(asked & content_words(text)), _rank(label), -i, label, text)
              for i, (label, text) in enumerate(lines)]
    chosen: list[tuple[str, str]] = []
    seen: list[str] = []
    for score, _, _, label, text in sorted(scored, key=lambda s: (-s[0], s[1], s[2])):
        if score == 0 or len(chosen) == SHOWN:
            break
        # One fact once, though the window, a version and the long-term memory all hold it: a summary's
        # sentence is often part of the message it came from, or the other way round.
        gist = _gist(text)
        if not any(gist in other or other in gist for other in seen):
            seen.append(gist)
            chosen.append((label, text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"))
    return chosen


def _rank(label: str) -> int:
    return 2 if label.startswith("said here") else 1 if label.startswith("recall") else 0


def _gist(text: str) -> str:
    """A line's words without its speaker, provenance tag or case."""
    text = re.sub(r"^[^:\n]{1,40}: ", "", text.strip())
    text = re.sub(r"\s*\[[^\]\n]{1,40}\]$", "", text)
    return " ".join(text.lower().split())


def _newest_message(turns: tuple[Turn, ...]) -> str:
    for turn in reversed(turns):
        texts = [b.text for b in turn.blocks if b.kind == "text" and b.text and not b.text.startswith(VOLATILE_MARKS)]
        if turn.role == "user" and texts:
            return texts[-1]
    return ""


def _counts(turns: tuple[Turn, ...]) -> tuple[int, int]:
    """People's messages before the newest, and the persona's own, among what the request carries."""
    people = mine = 0
    for turn in turns:
        for block in turn.blocks:
            if block.kind != "text" or not block.text or block.text.startswith(VOLATILE_MARKS):
                continue
            if turn.role == "assistant":
                mine += 1
            elif _PERSON.search(block.text):
                people += 1
    return max(0, people - 1), mine

"""What a model wrote is checked before it becomes memory (DESIGN.md section 7).

Real small models answer a summary request with its instructions echoed back, the template's
example person, an empty text, or a text the server cut at `max_tokens`. Such an answer is refused,
asked for once more, and then replaced by the extractive summary of the same material: memory is
never written from garbage, and a summary is always written.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from contextvars import ContextVar
from functools import lru_cache

from memory.extractive import REQUEST_MARKUP, extractive_summary
from memory.identifiers import identifiers
from memory.llm import LLM, LLMError, LLMRequest, LLMResult, RequestTooLarge
from memory.templates import render

log = logging.getLogger(__name__)

CUT = frozenset({"length", "max_tokens"})  # the server stopped the answer, not the model
ECHO_WORDS = 5  # this many words in a row from the instructions (and not from the material) is an echo
INVENTED_NAMES = 2  # at least this many names found nowhere in the source ...
INVENTED_SHARE = 1 / 5  # ... making up this share of the names it states, is an invented text
_WORD = re.compile(r"\w+")
_CALENDAR = frozenset({"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January",
                       "February", "March", "April", "May", "June", "July", "August", "September", "October",
                       "November", "December", "UTC"})


def _runs(text: str) -> set[tuple[str, ...]]:
    """Runs of ECHO_WORDS words, numbers as one word ("part 2 of 3" echoes "part 1 of 2")."""
    words = ["#" if w.isdigit() else w for w in _WORD.findall(text.lower())]
    return {tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}


@lru_cache(maxsize=1)
def _templates() -> frozenset[tuple[str, ...]]:
    """The word runs of every memory request's fixed words: a memory repeating any of them is an echo,
    whichever request it answered (a merge that copies the short-term instructions, say)."""
    fixed = [render("summarise_system.md.j2"), render("short_term_request.md.j2"),
             render("long_term_request.md.j2", subject="this conversation", pins=[]),
             render("summarise_request.md.j2", instruction="", transcript="", part=1, parts=2)]
    return frozenset(_runs("\n".join(fixed)))


def _instructions(request: LLMRequest, material: str) -> str:
    """The request's own words: its system text and the user text around the material, less its data
    (the pins and earlier versions it lists as `- ...` items, their further lines indented), which a
    summary may repeat."""
    asked = "\n".join(b.text for t in request.turns for b in t.blocks if b.text).replace(material, "")
    return "\n".join([*(b.text for b in request.system),
                      *(line for line in asked.splitlines() if not line.startswith(("- ", " ", "\t")))])


def echoes(text: str, instructions: str, material: str) -> str | None:
    """Why `text` repeats what it was asked rather than what it was given, or None."""
    if REQUEST_MARKUP.search(text):  # the wrapping of this request, or of the parts a combining request is given
        return "it repeats the request's markup"
    repeated = _runs(text) & (_runs(instructions) | _templates())
    if repeated and repeated - _runs(material):  # the material (often long) is read only when it could matter
        return "it repeats its instructions"
    return None


def refusal(result: LLMResult, request: LLMRequest, material: str) -> str | None:
    """Why this answer cannot be stored as a summary of `material`, or None when it can."""
    text = result.text.strip()
    if result.stop_reason in CUT:
        return f"cut off at {request.max_tokens} tokens ({result.stop_reason})"
    if not text:
        return "empty"
    echoed = echoes(text, _instructions(request, material), material)
    if echoed:
        return echoed
    source = "\n".join(b.text for t in request.turns for b in t.blocks if b.text).lower()
    named = [n for n in identifiers(text) if n[:1].isupper() and n not in _CALENDAR]
    absent = [n for n in named if n.lower() not in source]
    if len(absent) >= INVENTED_NAMES and len(absent) >= INVENTED_SHARE * len(named):
        return f"it names what its source does not ({', '.join(absent[:5])})"
    return None


_FINISHING: ContextVar[bool] = ContextVar("finishing", default=False)


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """Within it, a model that fails (down, overloaded) leaves the extractive summary instead of an error: an
    erasure's rewrite must finish, or the words it erases live on in what it could not rewrite."""
    token = _FINISHING.set(True)
    try:
        yield
    finally:
        _FINISHING.reset(token)


async def vetted(llm: LLM, request: LLMRequest, material: str, what: str) -> str:
    """The model's `what` (a summary, a chronicle, a merge) of `material`; refused once, it is asked again;
    refused twice, the extractive summary of the material within the same budget is kept instead."""
    for attempt in (1, 2):
        try:
            result = await llm.complete(request)
        except RequestTooLarge:
            raise  # the caller asks again in smaller parts
        except LLMError as exc:
            if not _FINISHING.get():
                raise
            log.warning("%s: the model failed (%s); the extractive summary is kept", what, exc.notice)
            return extractive_summary(material, request.max_tokens)
        problem = refusal(result, request, material)
        if problem is None:
            return result.text.strip()
        log.warning("%s refused (%s), attempt %d", what, problem, attempt)  # its text may quote anyone: not logged
    log.warning("%s: the model's answer was refused twice; the extractive summary is kept", what)
    return extractive_summary(material, request.max_tokens)

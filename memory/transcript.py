"""How one stored message reads to the model: anchors rendered, tool output reduced, speakers named."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from memory.anchors import is_anchor, render_anchor
from memory.dates import day_line, resolve_relative, same_day, span
from memory.images import described
from memory.observation import reduce_message, reduce_observation
from memory.records import Message, Thread
from memory.settings import ContextSettings
from memory.store import Store
from memory.templates import render
from memory.tokens import MESSAGE_OVERHEAD, cached_tokens

DEFAULT_POLICY = ContextSettings()
CONTINUED = "    "  # how a transcript continues a message on its next line


def message_text(message: Message, lineage: Collection[int], policy: ContextSettings = DEFAULT_POLICY,
                 max_tokens: int | None = None) -> str:
    """The text the model sees for a message, as viewed from a thread with this lineage.

    A message larger than `max_tokens` is shown as head and tail, as an oversized tool result is.
    """
    if is_anchor(message):
        return render_anchor(message, lineage)
    text = described(message, message.content) if message.metadata.get("images") else message.content
    if message.role == "tool":
        text = reduce_observation(text, policy.observation_max_lines, policy.observation_keep_lines)
    if max_tokens is not None and message.token_count > max_tokens:
        estimate = message.token_count * len(text) // max(1, len(message.content))  # what line reduction left
        text = reduce_message(text, estimate, max_tokens)
    if message.role == "user" and message.author_name:
        return f"[{message.author_name}] {text}"
    return text


def message_tokens(message: Message, text: str) -> int:
    """Tokens of the rendered message from the count stored at write; only rendered forms are counted."""
    if text == message.content:
        return message.token_count + MESSAGE_OVERHEAD
    if message.role == "user" and message.author_name and text.endswith(message.content):
        return message.token_count + cached_tokens(f"[{message.author_name}] ") + MESSAGE_OVERHEAD
    return cached_tokens(text) + MESSAGE_OVERHEAD


def transcript_line(message: Message, lineage: Collection[int],
                    policy: ContextSettings = DEFAULT_POLICY) -> tuple[str, int] | None:
    """`[speaker]: text` with relative times resolved to dates, and its tokens; None when there is nothing to show.

    The persona is named like everyone else, so a summary can say who said what.
    """
    if message.metadata.get("lookup"):
        return None  # what a look-up brought back is in memory already: a summary would write it again as new
    text = message_text(message, lineage, policy)
    if not text.strip():
        return None
    tokens = message_tokens(message, text) + 2
    if message.role in ("user", "assistant"):
        speaker = message.author_name or message.role
        text = text.removeprefix(f"[{message.author_name}] ") if message.role == "user" else text
        resolved = resolve_relative(text, message.created_at)
        if resolved != text:
            text, tokens = resolved, cached_tokens(resolved) + cached_tokens(speaker) + 4
    else:
        speaker = message.role
    # A message's own lines are indented: only the engine starts a line with a speaker or a date.
    return f"[{speaker}]: {text.replace(chr(10), chr(10) + CONTINUED)}", tokens + text.count("\n")


def dated_transcript(messages: Iterable[Message], lineage: Collection[int],
                     policy: ContextSettings = DEFAULT_POLICY) -> list[tuple[str, int]]:
    """Transcript lines with a `[Monday, 8 May 2023]` line wherever the day changes."""
    out: list[tuple[str, int]] = []
    day: float | None = None
    for message in messages:
        line = transcript_line(message, lineage, policy)
        if line is None:
            continue
        if day is None or not same_day(day, message.created_at):
            day = message.created_at
            header = f"[{day_line(day)}]"
            out.append((header, cached_tokens(header) + 1))
        out.append(line)
    return out


async def transcript_lines(store: Store, thread: Thread, lineage: Collection[int],
                           policy: ContextSettings = DEFAULT_POLICY) -> list[tuple[str, int]]:
    """Every live message of a thread as dated transcript lines, oldest first."""
    return dated_transcript([m async for m in store.span(thread.id, None, None)], lineage, policy)


def rolling_summary(thread: Thread) -> str:
    """A window's rolling summary as a prompt shows it (and a short-term version reads it): its range and days."""
    days = span(thread.window_summary_first_at, thread.window_summary_last_at)
    return render("summary_injection.md.j2", summary=thread.window_summary, first=thread.window_summary_from,
                  last=thread.window_summary_to, days=days)


def bridge_summary(thread: Thread) -> str:
    """A trimmed window's bridge as a prompt shows it (and a short-term version reads it), with its days."""
    return render("bridge_injection.md.j2", bridge=thread.window_bridge,
                  days=span(thread.window_bridge_first_at, thread.window_bridge_last_at))

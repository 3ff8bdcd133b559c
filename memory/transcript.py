"""How one stored message reads to the model: anchors rendered, tool output reduced, speakers named."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection

from memory.anchors import cached_tokens, is_anchor, render_anchor
from memory.observation import reduce_observation
from memory.records import Message, Thread
from memory.store import Store
from memory.tokens import MESSAGE_OVERHEAD
from memory.window import WindowPolicy

DEFAULT_POLICY = WindowPolicy()


def message_text(message: Message, lineage: Collection[int], policy: WindowPolicy = DEFAULT_POLICY) -> str:
    """The text the model sees for a message, as viewed from a thread with this lineage."""
    if is_anchor(message):
        return render_anchor(message, lineage)
    if message.role == "tool":
        return reduce_observation(message.content, policy.observation_max_lines, policy.observation_keep_lines)
    if message.role == "user" and message.author_name:
        return f"[{message.author_name}] {message.content}"
    return message.content


def message_tokens(message: Message, text: str) -> int:
    """Tokens of the rendered message from the count stored at write; only rendered forms are counted."""
    if text == message.content:
        return message.token_count + MESSAGE_OVERHEAD
    if message.role == "user" and message.author_name and text.endswith(message.content):
        return message.token_count + cached_tokens(f"[{message.author_name}] ") + MESSAGE_OVERHEAD
    return cached_tokens(text) + MESSAGE_OVERHEAD


def transcript_line(message: Message, lineage: Collection[int],
                    policy: WindowPolicy = DEFAULT_POLICY) -> tuple[str, int] | None:
    """`[speaker]: text` with its token count, or None for a message with nothing to show."""
    text = message_text(message, lineage, policy)
    if not text.strip():
        return None
    speaker = message.role if message.role != "user" else f"user {message.author_name or ''}".strip()
    body = text.removeprefix(f"[{message.author_name}] ") if message.role == "user" else text
    return f"[{speaker}]: {body}", message_tokens(message, text) + 2


async def transcript_lines(store: Store, thread: Thread, lineage: Collection[int],
                           policy: WindowPolicy = DEFAULT_POLICY) -> AsyncIterator[tuple[str, int]]:
    """Every live message of a thread as a transcript line with its token count, oldest first."""
    async for message in store.span(thread.id, None, None):
        line = transcript_line(message, lineage, policy)
        if line is not None:
            yield line

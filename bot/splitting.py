"""Long replies split for Discord's 2000-character limit: on paragraphs, then lines, then words,
with code fences closed at the end of a chunk and reopened (same language) at the start of the next."""

from __future__ import annotations

import re

DISCORD_LIMIT = 2_000
_FENCE = re.compile(r"^\s*```(\S*)")
_RESERVE = 48  # room for a closing fence and a reopened one with its language tag


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Chunks of at most `limit` characters whose code fences are balanced."""
    if not text.strip():
        return []
    if len(text) <= limit and _open_fence_after(text) is None:
        return [text]
    chunks = []
    opened: str | None = None  # the fence line open at the end of the previous chunk
    for raw in _cut(text, limit - _RESERVE):
        chunk = f"```{opened}\n{raw}" if opened is not None else raw
        opened = _open_fence_after(chunk)
        if opened is not None:
            chunk += "\n```"
        chunks.append(chunk)
    return [c for c in chunks if c.strip()]


def _cut(text: str, size: int) -> list[str]:
    """Pieces of at most `size` characters, cut at the last paragraph, line or word break that fits."""
    pieces = []
    while len(text) > size:
        window = text[:size]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            cut = window.rfind(separator)
            if cut > size // 4:
                break
        if cut <= 0:
            cut = size
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip("\n ") if cut < len(text) else ""
    if text.strip():
        pieces.append(text.rstrip())
    return pieces


def _open_fence_after(chunk: str) -> str | None:
    """The language of the fence still open at the end of the chunk, '' for a bare one, None if closed."""
    open_language: str | None = None
    for line in chunk.splitlines():
        match = _FENCE.match(line)
        if match:
            open_language = match.group(1) if open_language is None else None
    return open_language

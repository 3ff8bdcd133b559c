"""Observation reduction (seed 003): long tool output shown as head and tail; the stored message stays whole."""

from __future__ import annotations

MAX_LINE_CHARS = 2_000  # one enormous line (minified JSON) is reduced too


def reduce_observation(text: str, max_lines: int, keep_lines: int) -> str:
    """Head and tail of an oversized tool result with the `[Data Truncated]` marker, else the text."""
    lines = text.splitlines()
    if len(lines) > max_lines:
        omitted = len(lines) - 2 * keep_lines
        head, tail = lines[:keep_lines], lines[-keep_lines:]
        return "\n".join([
            "[Data Truncated]",
            f"Start: Line 1-{keep_lines}",
            *head,
            f"... ({omitted} lines omitted) ...",
            f"End: Line {len(lines) - keep_lines + 1}-{len(lines)}",
            *tail,
        ])
    if len(text) > MAX_LINE_CHARS * max(1, keep_lines):
        keep = MAX_LINE_CHARS * keep_lines // 2
        return f"[Data Truncated]\n{text[:keep]}\n... ({len(text) - 2 * keep} characters omitted) ...\n{text[-keep:]}"
    return text


def reduce_message(text: str, tokens: int, max_tokens: int) -> str:
    """A message far larger than its window, shown as head and tail; the stored message stays whole."""
    if tokens <= max_tokens:
        return text
    chars_per_token = len(text) / max(1, tokens)
    keep = max(1, int(max_tokens * chars_per_token * 0.45))
    omitted = max(0, tokens - int(2 * keep / chars_per_token))
    return f"{text[:keep]}\n[... about {omitted} tokens of this message left out here; it is stored whole ...]\n" \
           f"{text[-keep:]}"

"""A reply shown as it is written: the first message edited as text arrives (rate-limited), then split.

Typing shows until the first text. Discord allows about five edits per five seconds in a channel, so
edits are at least EDIT_SECONDS apart, and the last one always shows the final text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import discord

from bot.splitting import split_message

log = logging.getLogger(__name__)

EDIT_SECONDS = 1.2
SHOWN_CHARS = 1_900  # of the text so far, while it streams (the final text is split properly)


class ReplyStream:
    def __init__(self, to: discord.Message, allowed: discord.AllowedMentions):
        self._to = to
        self._allowed = allowed
        self._text = ""
        self._sent: discord.Message | None = None
        self._last_edit = 0.0
        self._flushing: asyncio.Task[None] | None = None
        self.started = asyncio.Event()  # the first text has arrived: typing can stop

    def add(self, piece: str) -> None:
        """The provider's text sink: keep the piece, and show it when an edit is allowed."""
        self._text += piece
        if self._text.strip():
            self.started.set()
        if self._text.strip() and (self._flushing is None or self._flushing.done()) \
                and time.monotonic() - self._last_edit >= EDIT_SECONDS:
            self._flushing = asyncio.create_task(self._show(self._text))

    async def _show(self, text: str) -> None:
        shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " …"
        self._last_edit = time.monotonic()
        try:
            if self._sent is None:
                self._sent = await self._to.reply(shown, mention_author=False, allowed_mentions=self._allowed)
            else:
                await self._sent.edit(content=shown, allowed_mentions=self._allowed)
        except discord.HTTPException as exc:  # a lost edit is not a lost reply: the final text follows
            log.warning("streaming edit failed: %s", exc)

    async def finish(self, text: str) -> None:
        """The final text: the first message holds its first part, the rest follow as new messages."""
        await self._settled()
        chunks = split_message(text) or [text]
        if self._sent is None:
            self._sent = await self._to.reply(chunks[0], mention_author=False, allowed_mentions=self._allowed)
        elif self._sent.content != chunks[0]:
            await self._sent.edit(content=chunks[0], allowed_mentions=self._allowed)
        for chunk in chunks[1:]:
            await self._to.channel.send(chunk, allowed_mentions=self._allowed)

    async def fail(self, notice: str) -> None:
        """The reply failed: what was shown of it becomes the notice, so no half answer stays."""
        await self._settled()
        if self._sent is None:
            await self._to.channel.send(notice, allowed_mentions=discord.AllowedMentions.none())
        else:
            await self._sent.edit(content=notice, allowed_mentions=discord.AllowedMentions.none())

    async def _settled(self) -> None:
        self.started.set()
        if self._flushing is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._flushing


async def typing_until(channel: discord.abc.Messageable, started: asyncio.Event) -> None:
    """Show typing until the first text (or the end); Discord repeats it every few seconds meanwhile."""
    async with channel.typing():
        await started.wait()

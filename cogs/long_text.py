"""Multi-line input for slash commands: a modal pre-filled with the current text, or an attached text file.

A slash command's text option is one line; a persona card or a memory is several paragraphs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import discord

MAX_CHARS = 4_000  # Discord's limit for a modal's paragraph field
MAX_FILE_BYTES = 64 * 1024

Submit = Callable[[discord.Interaction, str], Awaitable[None]]


class LongTextModal(discord.ui.Modal):
    """One paragraph field, pre-filled; on submit the text goes to `submit`."""

    def __init__(self, title: str, label: str, current: str, submit: Submit):
        super().__init__(title=title[:45])
        self.text: discord.ui.TextInput[LongTextModal] = discord.ui.TextInput(
            label=label[:45], style=discord.TextStyle.paragraph, default=current[:MAX_CHARS] or None,
            max_length=MAX_CHARS, required=True)
        self.add_item(self.text)
        self._submit = submit

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await self._submit(interaction, self.text.value)


async def attached_text(file: discord.Attachment) -> str:
    """An attachment's text; ValueError with what is wrong when it is not a small UTF-8 text file."""
    if file.size > MAX_FILE_BYTES:
        raise ValueError(f"{file.filename} is {file.size // 1024} KB; attach a text file of at most "
                         f"{MAX_FILE_BYTES // 1024} KB")
    try:
        text = (await file.read()).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{file.filename} is not UTF-8 text") from None
    if not text:
        raise ValueError(f"{file.filename} is empty")
    if len(text) > MAX_CHARS:
        raise ValueError(f"{file.filename} holds {len(text)} characters; the most is {MAX_CHARS}")
    return text


async def long_text(interaction: discord.Interaction, given: str | None, file: discord.Attachment | None, *,
                    title: str, label: str, current: str, submit: Submit) -> None:
    """The text as typed, as attached, or, with neither, from a modal pre-filled with the current text."""
    if given is not None:
        await submit(interaction, given)
    elif file is not None:
        try:
            text = await attached_text(file)
        except ValueError as exc:
            await interaction.response.send_message(f"Not changed: {exc}.", ephemeral=True)
            return
        await submit(interaction, text)
    else:
        await interaction.response.send_modal(LongTextModal(title, label, current, submit))

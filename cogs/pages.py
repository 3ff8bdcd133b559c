"""Long answers as pages of one message with buttons (◀ n / N ▶), instead of a stream of messages."""

from __future__ import annotations

import discord

PAGE_CHARS = 1_900  # a page stays well inside Discord's 2,000 characters
PAGES_SECONDS = 900  # buttons work this long after the answer


class Pager(discord.ui.View):
    """Pages of one answer; only the person who asked turns them (the answer is theirs alone anyway)."""

    def __init__(self, pages: list[str], owner_id: int):
        super().__init__(timeout=PAGES_SECONDS)
        self.pages, self.page, self.owner_id = pages, 0, owner_id
        self._show()

    def _show(self) -> None:
        self.previous.disabled = self.page == 0
        self.next.disabled = self.page == len(self.pages) - 1
        self.counter.label = f"{self.page + 1} / {len(self.pages)}"

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.owner_id

    async def _turn(self, interaction: discord.Interaction, step: int) -> None:
        self.page = max(0, min(len(self.pages) - 1, self.page + step))
        self._show()
        await interaction.response.edit_message(content=self.pages[self.page], view=self)

    @discord.ui.button(label="◀", style=discord.ButtonStyle.secondary)
    async def previous(self, interaction: discord.Interaction, _: discord.ui.Button[Pager]) -> None:
        await self._turn(interaction, -1)

    @discord.ui.button(label="1 / 1", style=discord.ButtonStyle.secondary, disabled=True)
    async def counter(self, interaction: discord.Interaction, _: discord.ui.Button[Pager]) -> None:
        """The page shown, of how many (a label, never pressed)."""

    @discord.ui.button(label="▶", style=discord.ButtonStyle.secondary)
    async def next(self, interaction: discord.Interaction, _: discord.ui.Button[Pager]) -> None:
        await self._turn(interaction, 1)

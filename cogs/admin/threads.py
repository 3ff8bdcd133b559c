"""/threads: the Stelis working threads of a channel."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.report import (
    tree_lines,
)
from cogs.admin.base import MAX_CHOICES, AdminBase
from memory.anchors import exchange_lines, thread_ref


class ThreadCommands(AdminBase):
    stelis = app_commands.Group(name="threads", description="Stelis working threads: the tree and one thread",
                                guild_only=True)

    # /threads (Stelis working threads)

    @stelis.command(name="tree", description="The Stelis threads of this channel: status, depth, window sizes")
    async def stelis_tree(self, interaction: discord.Interaction) -> None:
        scope, current = await self.where(interaction)
        root = await self.engine.stelis.root(scope)
        await self.answer(interaction, "\n".join(tree_lines(await self.engine.stelis.tree(root.id), current)))

    @stelis.command(name="show", description="A Stelis thread's chronicle and last exchanges")
    @app_commands.describe(thread="The thread's number (see /threads tree)")
    async def stelis_show(self, interaction: discord.Interaction, thread: int) -> None:
        scope, _ = await self.where(interaction)
        detail = await self.engine.stelis.detail(scope, thread)
        if detail is None:
            await self.answer(interaction, f"There is no Stelis thread {thread} in this channel; see /threads tree.")
            return
        found = detail.thread
        await self.answer(interaction, "\n".join([
            f"{thread_ref(found.id)} {found.label} [{found.status}], depth {found.depth}",
            "Chronicle:", found.chronicle_summary or "(none yet)", "Last exchanges:", *exchange_lines(detail.last),
        ]))

    @stelis_show.autocomplete("thread")
    async def _threads(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[int]]:
        scope, _ = await self.where(interaction)
        root = await self.engine.stelis.root(scope)
        rows = [r.thread for r in await self.engine.stelis.tree(root.id) if not r.thread.is_root]
        return [app_commands.Choice(name=f"{t.id} {t.label} [{t.status}]"[:100], value=t.id)
                for t in reversed(rows) if current.lower() in f"{t.id} {t.label}".lower()][:MAX_CHOICES]

"""Thread cog (DESIGN.md section 4): Discord threads and forum posts as branches of Stelis sessions.

Raw events, because archived threads leave discord.py's cache and unarchiving fires only
on_raw_thread_update. A thread spoken in again is resumed by the conversation cog.
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from cogs.interactions import engine_of
from memory.records import Scope

log = logging.getLogger(__name__)


class Threads(commands.Cog):
    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    @commands.Cog.listener()
    async def on_thread_create(self, thread: discord.Thread) -> None:
        if thread.parent_id is None or thread.guild is None or thread.is_private():
            return  # a private thread is a conversation of its own, opened when someone speaks in it
        if self.bot.user is not None and thread.owner_id == self.bot.user.id:
            return  # the persona's own thread (a task's): its branch is made by what opened it, or on first word
        policy = await self.engine.settings.reply_policy(thread.guild.id, thread.parent_id)
        if policy != "off":
            await self.engine.branches.session(Scope.channel(thread.guild.id, thread.parent_id), thread.id, thread.name)

    @commands.Cog.listener()
    async def on_raw_thread_update(self, payload: discord.RawThreadUpdateEvent) -> None:
        metadata = payload.data.get("thread_metadata") or {}
        name = payload.data.get("name")
        if name:
            await self.engine.branches.rename(payload.thread_id, name)
        if metadata.get("archived"):
            closed = await self.engine.branches.archive(payload.thread_id)
            if closed is not None:
                log.info("Discord thread %d archived: session %d %s", payload.thread_id, closed.id, closed.status)

    @commands.Cog.listener()
    async def on_raw_thread_delete(self, payload: discord.RawThreadDeleteEvent) -> None:
        await self.engine.branches.delete(payload.thread_id)


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Threads(bot))

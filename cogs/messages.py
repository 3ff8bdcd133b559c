"""Messages cog: every readable message remembered, answered per the channel's reply policy."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import discord
from discord.ext import commands

from bot import logs
from bot.config import ConfigError, DiscordConfig
from bot.discord_bot import SAFE_MENTIONS, mentions_for
from bot.engine import Arrival, ReplyFailed, ReplyUnsaved
from bot.splitting import split_message
from bot.tools import ToolError
from cogs.access import Cooldowns, permitted
from cogs.interactions import engine_of
from cogs.permissions import MissingPermissions, invite_url
from cogs.places import Place, locate
from cogs.reply_stream import ReplyStream, typing_until
from memory.records import Message, Scope
from memory.store import StoreError

log = logging.getLogger(__name__)

DM_POLICIES = {"answer": "chat", "listen": "listen", "off": "off"}  # discord.dms as a reply policy
MAX_BOT_TURNS = 3  # consecutive replies to other bots before the persona stops: no reply loops
BACKFILL_LIMIT = 200


@dataclass(frozen=True)
class Here:
    """Where a message was said: its place in memory, the reply policy there, the server's rules (None in a DM)."""

    place: Place
    policy: str
    rules: DiscordConfig | None


class Messages(commands.Cog):
    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)
        self._channel_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)  # replies, in order
        # Creates, edits and deletes of one channel applied in arrival order (an edit never outruns its message).
        self._ingest_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._unstored: defaultdict[int, list[discord.Message]] = defaultdict(list)  # refused by storage, in order
        self._bot_turns: defaultdict[int, int] = defaultdict(int)
        self._cooldowns = Cooldowns()
        self.missing = MissingPermissions()  # what Discord does not let the bot do, channel by channel

    async def cog_load(self) -> None:
        self.engine.attach(self)

    # the persona acting on its own (tools, playbooks): the engine's front end

    async def post(self, scope: Scope, text: str) -> None:
        channel = self._channel_of(scope)
        for chunk in split_message(text):
            await channel.send(chunk, allowed_mentions=SAFE_MENTIONS)

    async def open_thread(self, scope: Scope, name: str) -> str:
        thread = await self._new_thread(scope, name)
        return f"opened thread #{thread.name} ({thread.id}); its messages become a branch of this conversation"

    async def open_work_thread(self, scope: Scope, name: str) -> int | None:
        try:
            return (await self._new_thread(scope, name)).id
        except ToolError as exc:  # the work goes on inside, unseen: better than no work
            log.warning("no Discord thread for %r: %s", name, exc.notice)
            return None

    async def _new_thread(self, scope: Scope, name: str) -> discord.Thread:
        channel = self._channel_of(scope)
        if not isinstance(channel, discord.TextChannel):
            raise ToolError("threads open under a text channel; this conversation is not one")
        if not self.missing.has(channel, "create_public_threads"):
            raise ToolError(f"I lack the Create Public Threads permission in #{channel.name}")
        try:
            return await channel.create_thread(name=name[:100], type=discord.ChannelType.public_thread,
                                               auto_archive_duration=1440)
        except discord.Forbidden as exc:
            self.missing.note(channel.id, "create_public_threads")
            raise ToolError(f"Discord refused the thread: no permission ({exc.status})") from exc
        except discord.HTTPException as exc:
            raise ToolError(f"Discord refused the thread ({exc.status})") from exc

    def _channel_of(self, scope: Scope) -> discord.abc.Messageable:
        """The conversation's channel; only ever one of the server the scope belongs to."""
        target = scope.discord_thread_id or scope.channel_id
        channel = self.bot.get_channel(target) if target else None
        if not isinstance(channel, discord.abc.Messageable):
            raise ToolError("this conversation's channel is not reachable now")
        guild = getattr(channel, "guild", None)
        if (guild.id if guild is not None else None) != scope.guild_id:
            raise ToolError(f"channel {target} is not in this conversation's server")
        return channel

    async def strangers(self, guild_id: int, kind: str, ids: list[int]) -> list[int]:
        guild = self.bot.get_guild(guild_id)
        if guild is None:
            return ids
        if kind == "channel":  # a channel, never a thread (a private one has its own conversation)
            return [i for i in ids if guild.get_channel(i) is None]
        if kind == "role":
            return [i for i in ids if guild.get_role(i) is None]
        return [i for i in ids if guild.get_member(i) is None and not await self._fetched_member(guild, i)]

    @staticmethod
    async def _fetched_member(guild: discord.Guild, user_id: int) -> bool:
        """A member the cache does not hold (no members intent) is asked of Discord."""
        try:
            await guild.fetch_member(user_id)
        except discord.NotFound:
            return False
        except discord.HTTPException as exc:
            raise ConfigError([f"Discord could not say whether {user_id} is a member ({exc.status}); "
                               "try again"]) from exc
        return True

    # events

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        with logs.tagged(guild=message.guild.id if message.guild else None, channel=message.channel.id,
                         message=message.id):
            await self.handle(message, answer=True)

    @commands.Cog.listener()
    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        content = payload.data.get("content")
        if content is not None:
            async with self._ingest_locks[payload.channel_id]:
                await self.engine.forgetting.edit_message(payload.message_id, content)

    @commands.Cog.listener()
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        async with self._ingest_locks[payload.channel_id]:
            await self.engine.forgetting.delete_message(payload.message_id)

    @commands.Cog.listener()
    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        async with self._ingest_locks[payload.channel_id]:
            for message_id in payload.message_ids:
                await self.engine.forgetting.delete_message(message_id)

    @commands.Cog.listener()
    async def on_ready(self) -> None:
        if self.bot.application_id is not None:
            log.info("invite link with the permissions Stelis uses: %s", invite_url(self.bot.application_id))
        await self.backfill()

    @commands.Cog.listener()
    async def on_resumed(self) -> None:
        await self.backfill()

    # the work

    async def handle(self, message: discord.Message, *, answer: bool) -> None:
        """Remember a message if it is readable here; answer it if the policy says so."""
        if not self._from_someone(message):
            return
        async with self._ingest_locks[message.channel.id]:
            if await self._is_command(message):
                return
            here = await self._here(message.channel)
            if here is None or here.policy == "off":
                return
            place = here.place
            waiting = self._unstored[message.channel.id]
            waiting.append(message)
            try:  # in order: a later message is never stored before an earlier one that failed
                while waiting:
                    stored = await self.engine.arrivals.receive(place.scope, _arrival(waiting[0]),
                                                                session_id=place.session_id,
                                                                live=answer and waiting[0] is message)
                    waiting.pop(0)
            except StoreError as exc:
                log.error("%d message(s) in channel %d not stored yet: %s; retried with the next message, and "
                          "read again from Discord after a restart", len(waiting), message.channel.id, exc)
                if len(waiting) == 1:
                    await message.channel.send("⚠️ I can't save messages right now (the server's storage "
                                               "refused); I'll keep trying and won't lose them.",
                                               allowed_mentions=SAFE_MENTIONS)
                return
        if not answer:
            return
        try:
            await self._respond(message, here, stored)
        except StoreError as exc:  # the message is stored; what answering needed was refused
            log.error("no answer to message %d: the database refused: %s", message.id, exc.notice)
            await message.channel.send(f"⚠️ I can't reach my memory right now ({exc.notice}). Your message is "
                                       "remembered; mention me again in a moment.", allowed_mentions=SAFE_MENTIONS)

    async def _respond(self, message: discord.Message, here: Here, stored: Message | None) -> None:
        """What a stored message asks of the persona: an answer, a turn of an exchange, or nothing."""
        place, policy = here.place, here.policy
        if stored is None:  # opted out: nothing of it is kept, so nothing can be answered
            if self.bot.user in message.mentions:
                await message.reply("You asked me not to remember you (/memory optout), so I don't keep or read "
                                    "your messages. /memory optin undoes it.", mention_author=False,
                                    allowed_mentions=SAFE_MENTIONS)
            return
        if message.author.bot and stored.thread_id != place.session_id:
            if policy != "listen":
                await self._exchange(message, place, stored.thread_id)
            return
        if policy != "listen" and await self._should_answer(message, policy, place.session_id) \
                and await self._may_answer(message, here.rules):
            await self._answer(message, stored.thread_id)

    async def _exchange(self, message: discord.Message, place: Place, session_id: int) -> None:
        """Another persona's turn: answered within the bot cap and the exchange's turn budget; the last turn
        ends the exchange, so its chronicle reaches the channel."""
        if await self._should_answer(message, "mention", None):
            await self.engine.socials.answer_turn(place.scope, message.author.id, session_id,
                                          lambda: self._answer(message, session_id))

    async def backfill(self) -> int:
        """After a (re)connect: remember what was said while away (history after the last seen id), in the
        channels and in the Discord threads whose branch is still open."""
        places = [(root.channel_id, await self.engine.conversations.last_seen(root.id))
                  for root in await self.engine.conversations.channel_roots() if root.channel_id is not None]
        places += await self.engine.branches.discord_threads_seen()
        count = 0
        for channel_id, after in places:
            count += await self._backfill(channel_id, after)
        if count:
            log.info("backfill: remembered %d message(s) missed while away", count)
        return count

    async def _backfill(self, channel_id: int, after: int | None) -> int:
        channel = self.bot.get_channel(channel_id)
        if not isinstance(channel, discord.abc.Messageable) or isinstance(channel, discord.DMChannel):
            return 0
        try:
            missed = [m async for m in channel.history(limit=BACKFILL_LIMIT,
                                                       after=discord.Object(after) if after else None)]
        except discord.Forbidden:
            self.missing.note(channel_id, "read_message_history")
            return 0
        except discord.HTTPException as exc:
            log.warning("backfill of channel %s failed: %s", channel_id, exc)
            return 0
        count = 0
        for message in sorted(missed, key=lambda m: m.id):  # the API's order differs from dpytest's
            if after is None or message.id > after:
                await self.handle(message, answer=False)
                count += 1
        return count

    def _from_someone(self, message: discord.Message) -> bool:
        """People, and other persona bots we know; never ourselves, never webhooks or other bots."""
        if self.bot.user is None or message.author.id == self.bot.user.id:
            return False
        if message.webhook_id is not None or message.author.bot:
            return message.author.id in self.engine.config.discord.personas
        return message.type in (discord.MessageType.default, discord.MessageType.reply)

    async def _is_command(self, message: discord.Message) -> bool:
        return (await self.bot.get_context(message)).valid

    async def _here(self, channel: discord.abc.Messageable) -> Here | None:
        """Where the channel sits in memory, its reply policy (a DM's: discord.dms) and its server's rules in
        effect there; None if it is not readable."""
        place = await locate(self.engine, channel)
        if place is None:
            return None
        if place.guild_id is None:
            return Here(place, DM_POLICIES[self.engine.config.discord.dms], None)
        rules = (await self.engine.settings.effective(place.guild_id, place.settings_channel)).discord
        return Here(place, rules.reply_policy, rules)

    async def _should_answer(self, message: discord.Message, policy: str, thread_id: int | None) -> bool:
        me = self.bot.user
        mentioned = me in message.mentions or _replies_to(message, me)
        if message.author.bot:  # a persona bot: only when it speaks to us, and never endlessly
            return mentioned and self._bot_turns[message.channel.id] < MAX_BOT_TURNS
        self._bot_turns[message.channel.id] = 0
        if policy == "chat" or mentioned:
            return True
        if thread_id is not None and isinstance(message.channel, discord.Thread):
            return ((me is not None and message.channel.owner_id == me.id)
                    or await self.engine.branches.spoken_in(message.channel.id))  # any of its sessions
        return False

    async def _may_answer(self, message: discord.Message, config: DiscordConfig | None) -> bool:
        """The server's allow and deny lists, and the person's cooldown (a wait is marked, not answered)."""
        if config is None:  # a DM
            return True
        if not permitted(config, message.author):
            return False
        if self._cooldowns.waiting(message.channel.id, message.author.id, config.cooldown_seconds):
            if self.missing.has(message.channel, "add_reactions"):
                try:
                    await message.add_reaction("⏳")
                except discord.Forbidden:
                    self.missing.note(message.channel.id, "add_reactions")
                except discord.HTTPException as exc:  # the mark is a courtesy: the wait holds without it
                    log.warning("could not mark message %d as waiting: %s", message.id, exc)
            return False
        self._cooldowns.answered(message.channel.id, message.author.id)
        return True

    async def _answer(self, message: discord.Message, target: int) -> None:
        """One reply at a time per channel, in order; typing until the first text, then the message is
        edited as the text arrives; long replies split at the end."""
        channel = message.channel
        speak = "send_messages_in_threads" if isinstance(channel, discord.Thread) else "send_messages"
        if not (self.missing.has(channel, speak) and self.missing.has(channel, "read_message_history")):
            return  # the message is remembered; an answer could not be posted (logged once, and /help says so)
        async with self._channel_locks[channel.id]:
            allowed = mentions_for(await self.engine.conversations.participants(target) | {message.author.id})
            stream = ReplyStream(message, allowed)
            typing = asyncio.create_task(typing_until(channel, stream.started))
            notice = None
            try:
                text = (await self.engine.conversations.reply(target, on_text=stream.add)).content
            except ReplyFailed as exc:
                await stream.fail(f"⚠️ I couldn't answer just now: {exc.notice} Your message is remembered; "
                                  "mention me again in a moment to retry.")
                return
            except ReplyUnsaved as exc:  # said, and kept until the database takes it: the user is told
                text, notice = exc.text, exc.notice
            finally:
                stream.started.set()
                await asyncio.gather(typing, return_exceptions=True)
            if message.author.bot:
                self._bot_turns[channel.id] += 1
            await stream.finish(text)
            if notice is not None:
                await channel.send(f"⚠️ {notice}", allowed_mentions=SAFE_MENTIONS)


MAX_IMAGE_BYTES = 5 * 1024 * 1024  # larger images are named, not sent (the API's own limit per image)


def _is_image(attachment: discord.Attachment) -> bool:
    return (attachment.content_type or "").startswith("image/") and attachment.size <= MAX_IMAGE_BYTES


def _content(message: discord.Message) -> str:
    """The text kept: what was written, an image by its name (sent to the model as an image), other files by link."""
    parts = [message.content] + [f"[image: {a.filename}]" if _is_image(a) else f"[attachment: {a.filename} {a.url}]"
                                 for a in message.attachments]
    return "\n".join(p for p in parts if p) or "(empty message)"


def _arrival(message: discord.Message) -> Arrival:
    """What is kept of a message: its text, and references to its images (the model is shown them while the
    links are fresh); a persona bot's goes to the session of its exchange."""
    images: list[dict[str, Any]] = [{"url": a.url, "name": a.filename, "media_type": a.content_type, "size": a.size}
                                    for a in message.attachments if _is_image(a)]
    reference = message.reference if message.type == discord.MessageType.reply else None
    return Arrival(_content(message), message.author.display_name, message.author.id, message.id, images,
                   persona=message.author.bot, reply_to=reference.message_id if reference else None)


def _replies_to(message: discord.Message, me: discord.ClientUser | None) -> bool:
    resolved = message.reference.resolved if message.reference else None
    return isinstance(resolved, discord.Message) and me is not None and resolved.author.id == me.id


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Messages(bot))

"""dpytest set-up (with the fixes DESIGN.md section 10 names) and gateway payloads dpytest lacks."""

from __future__ import annotations

import datetime

import discord
import discord.ext.test as dpytest
from discord.ext.test import backend, factories
from discord.ext.test import factories as facts

from bot.discord_bot import make_bot
from cogs.permissions import NEEDED


async def _edit_my_member(self, guild_id: int, *, reason: str | None = None, **fields):
    """PATCH /guilds/{id}/members/@me, which dpytest lacks: the bot's own nickname (None clears it)."""
    state = backend.get_state()
    me = state._get_guild(guild_id).me
    data = facts.dict_from_member(me)
    data["nick"] = fields.get("nick", me.nick)
    state.parse_guild_member_update(data)
    return facts.dict_from_member(me)


backend.FakeHttp.edit_my_member = _edit_my_member


async def start_bot(engine, config, guilds: int = 1):
    bot = make_bot(config, engine, members_intent=True)
    await bot._async_setup_hook()
    dpytest.configure(bot, guilds=guilds)
    await bot._async_setup_hook()  # dpytest 0.7 + discord.py 2.7: set up again after configure
    for guild in dpytest.get_config().guilds:  # invited with the link: what the features use (dpytest: less)
        guild.default_role._permissions |= NEEDED.value
    await bot.setup_hook()
    return bot


def channel():
    return dpytest.get_config().channels[0]


def member():
    return dpytest.get_config().members[0]


def mention(bot) -> str:
    return f"<@{bot.user.id}>"


BOT_USER_ID = 424242424242424242  # another bot, not in the member cache (a cached member is never a bot)


def post(text: str, *, author=None, in_channel=None, webhook_id: int | None = None, bot_author: bool = False,
         reference: discord.Message | None = None) -> int:
    """Dispatch a MESSAGE_CREATE like the gateway would; returns the message id."""
    where = in_channel or channel()
    author = author or member()
    guild = where.guild
    data = factories.make_message_dict(
        where, author, content=text, mentions=backend.find_user_mentions(text, guild), guild_id=guild.id,
    )
    if webhook_id is not None:
        data["webhook_id"] = webhook_id
    if bot_author:
        data["author"] = {"id": BOT_USER_ID, "username": "otherbot", "discriminator": "0001", "avatar": None,
                          "bot": True, "global_name": None}
        data.pop("member", None)
    if reference is not None:
        data["message_reference"] = {"message_id": reference.id, "channel_id": where.id, "guild_id": guild.id}
        data["referenced_message"] = factories.dict_from_message(reference)
        data["type"] = 19
    state = backend.get_state()
    state.parse_message_create(data)
    backend._cur_config.messages.setdefault(where.id, []).append(data)
    return int(data["id"])


def edit(message_id: int, in_channel, text: str) -> None:
    stored = next(d for d in backend._cur_config.messages[in_channel.id] if int(d["id"]) == message_id)
    update = {**stored, "content": text, "edited_timestamp": datetime.datetime.now(datetime.UTC).isoformat()}
    update.pop("member", None)  # dpytest's stored member lacks the roles discord.py 2.7 reads
    backend.get_state().parse_message_update(update)


def delete(message_id: int, in_channel) -> None:
    backend.get_state().parse_message_delete({"id": message_id, "channel_id": in_channel.id,
                                              "guild_id": in_channel.guild.id})


def thread_payload(thread_id: int, parent, name: str, owner_id: int, *, archived: bool = False,
                   private: bool = False) -> dict:
    return {
        "id": thread_id, "guild_id": parent.guild.id, "parent_id": parent.id, "owner_id": owner_id, "name": name,
        "type": 12 if private else 11, "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {"archived": archived, "auto_archive_duration": 1440, "locked": False,
                            "archive_timestamp": datetime.datetime.now(datetime.UTC).isoformat()},
    }


def create_thread(thread_id: int, parent, name: str, owner_id: int, *, private: bool = False) -> discord.Thread:
    state = backend.get_state()
    state.parse_thread_create({**thread_payload(thread_id, parent, name, owner_id, private=private),
                               "newly_created": True})
    return parent.guild.get_thread(thread_id)


def update_thread(thread_id: int, parent, name: str, owner_id: int, *, archived: bool) -> None:
    backend.get_state().parse_thread_update(thread_payload(thread_id, parent, name, owner_id, archived=archived))


def delete_thread(thread_id: int, parent) -> None:
    backend.get_state().parse_thread_delete({"id": thread_id, "guild_id": parent.guild.id,
                                             "parent_id": parent.id, "type": 11})


def make_forum(guild, name: str = "forum", channel_id: int | None = None):
    channel_id = channel_id or factories.make_id()
    backend.get_state().parse_channel_create({
        "id": channel_id, "type": 15, "guild_id": guild.id, "name": name, "position": 5,
        "permission_overwrites": [], "available_tags": [], "flags": 0, "nsfw": False, "rate_limit_per_user": 0,
    })
    return guild.get_channel(channel_id)

"""The Discord front end through dpytest: policies, splitting, failures, edits, backfill, threads."""

from __future__ import annotations

import asyncio

import discord
import discord.ext.test as dpytest
import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.llm import LLMError, LLMResult
from memory.records import Scope
from tests.discord_helpers import (
    BOT_USER_ID,
    channel,
    create_thread,
    delete,
    delete_thread,
    edit,
    make_forum,
    member,
    mention,
    post,
    start_bot,
    update_thread,
)


class Settable:
    """Replies with whatever the test sets; fails when told to."""

    name = "settable"

    def __init__(self):
        self.text = "hello from the persona"
        self.fail = False

    async def complete(self, request, on_text=None):
        if self.fail:
            raise LLMError("The model is overloaded (529) after 3 retries; try again in a minute.")
        if request.purpose == "summary":
            return await OfflineLLM().complete(request)
        return LLMResult(text=self.text)

    async def aclose(self):
        return None


@pytest.fixture
async def world(make_config):
    llm = Settable()
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, llm)
    bot = await start_bot(engine, config)
    yield bot, engine, llm
    await dpytest.empty_queue()
    await engine.close()  # bot.close() needs a real gateway; the engine is what holds resources


async def remembered(engine, scope=None) -> list[str]:
    scope = scope or Scope.channel(channel().guild.id, channel().id)
    thread = await engine.stelis.root(scope)
    return [m.content for m in await engine.store.tail(thread.id, 100)]


async def settle():
    await dpytest.run_all_events()
    await asyncio.sleep(0.05)


async def test_mention_policy_remembers_everything_and_answers_mentions_and_replies(world):
    bot, engine, _ = world
    post("just chatting")
    await settle()
    assert dpytest.verify().message().nothing()
    post(f"{mention(bot)} are you there?")
    await settle()
    answer = dpytest.get_message()
    assert answer.content == "hello from the persona"
    post("replying to you", reference=answer)
    await settle()
    assert dpytest.get_message().content == "hello from the persona"
    stored = await remembered(engine)
    assert stored[0] == "just chatting" and "replying to you" in stored
    assert stored.count("hello from the persona") == 2


@pytest.mark.parametrize(("policy", "remembered_count", "answered"), [
    ("chat", 2, True), ("listen", 1, False), ("off", 0, False),
])
async def test_reply_policies(world, policy, remembered_count, answered):
    bot, engine, _ = world
    await engine.settings.set("channel", channel().id, "discord.reply_policy", policy)
    post(f"{mention(bot)} hello" if policy != "chat" else "hello everyone")
    await settle()
    sent = not dpytest.verify().message().nothing()
    assert sent is answered
    assert len(await remembered(engine)) == remembered_count


async def test_bots_webhooks_and_itself_are_ignored(world):
    bot, engine, _ = world
    await engine.settings.set("channel", channel().id, "discord.reply_policy", "chat")
    post("from a webhook", webhook_id=123456789012345678)
    post("from another bot", bot_author=True)
    post("from myself", author=bot.user)
    await settle()
    assert dpytest.verify().message().nothing()
    assert await remembered(engine) == []


async def test_a_known_persona_bot_is_answered_only_when_it_speaks_to_us_and_not_forever(world):
    bot, engine, _ = world
    engine.config.discord.personas.append(BOT_USER_ID)
    for i in range(5):
        post(f"{mention(bot)} persona says {i}", bot_author=True)
        await settle()
    answers = 0
    while not dpytest.verify().message().nothing():
        dpytest.get_message()
        answers += 1
    assert answers == 3  # MAX_BOT_TURNS: no reply loop
    here = Scope.channel(channel().guild.id, channel().id)
    sessions = await engine.store.branch_threads(f"social-{here.guild_id}-{BOT_USER_ID}")
    assert len(sessions) == 1  # one exchange: its messages are its session's, the channel keeps its anchor
    assert len([m for m in await engine.store.tail(sessions[0].id, 50) if "persona says" in m.content]) == 5
    assert not [c for c in await remembered(engine) if "persona says" in c]


async def test_each_exchange_with_another_persona_is_a_new_session_of_its_social_branch(world):
    bot, engine, _ = world
    engine.config.discord.personas.append(BOT_USER_ID)
    here = Scope.channel(channel().guild.id, channel().id)
    await engine.settings.set("guild", channel().guild.id, "autonomy.session_turns", 2)
    branch_id = f"social-{here.guild_id}-{BOT_USER_ID}"
    for i in range(3):  # two turns, then the exchange ends; the third message opens the next one
        post(f"{mention(bot)} stargazing tonight? ({i})", bot_author=True)
        await settle()
    first, second = await engine.store.branch_threads(branch_id)
    assert first.status == "completed" and first.chronicle_summary and second.status == "active"
    assert len([m for m in await engine.store.tail(first.id, 20) if m.role == "assistant"]) == 2
    opening = (await engine.store.tail(second.id, 5))[0]
    assert opening.metadata.get("stelis_thread_id") == first.id  # anchored to the previous exchange

    post("hello both of you")  # a person speaks: the exchange ends, its chronicle reaches the channel
    await settle()
    branch = await engine.store.branch(branch_id)
    assert branch.branch_type == "social" and branch.status == "suspended"
    assert (await engine.store.thread(second.id)).status == "completed"
    root = await engine.stelis.root(here)
    asked = "\n".join(b.text for t in (await engine.conversations.context(root.id)).request.turns for b in t.blocks)
    assert "## Chronicle" in asked and "with otherbot" in asked
    with pytest.raises(Exception, match="never completes"):
        await engine.branches.update(here, branch_id, status="completed")


async def test_a_5000_character_reply_is_split_and_stored_as_one_turn(world):
    bot, engine, llm = world
    code = "```python\n" + "\n".join(f"print('line {i}')" for i in range(180)) + "\n```"
    llm.text = ("Here is the script.\n\n" + code + "\n\nDone. " + "More words. " * 200)[:5000]
    assert len(llm.text) == 5000
    post(f"{mention(bot)} write the script")
    await settle()
    chunks = []
    while not dpytest.verify().message().nothing():
        chunks.append(dpytest.get_message().content)
    assert len(chunks) >= 3 and all(len(c) <= 2000 for c in chunks)
    assert all(sum(1 for ln in c.splitlines() if ln.startswith("```")) % 2 == 0 for c in chunks)
    stored = await remembered(engine)
    assert stored[-1] == llm.text and len([c for c in stored if c.startswith("Here is the script")]) == 1


async def test_an_llm_failure_becomes_a_short_notice(world):
    bot, engine, llm = world
    llm.fail = True
    post(f"{mention(bot)} hello?")
    await settle()
    notice = dpytest.get_message().content
    assert notice.startswith("⚠️ I couldn't answer just now: The model is overloaded (529)")
    assert "remembered" in notice
    assert await remembered(engine) == [f"{mention(bot)} hello?"]


async def test_edits_and_deletes_reach_the_next_context(world):
    _bot, engine, _ = world
    first = post("my cat is Tama")
    second = post("my password is hunter2")
    edit(first, channel(), "my cat is Mochi")
    delete(second, channel())
    await settle()
    root = await engine.stelis.root(Scope.channel(channel().guild.id, channel().id))
    text = str((await engine.conversations.context(root.id)).request)
    assert "Mochi" in text and "Tama" not in text and "hunter2" not in text

    edit(second, channel(), "my password is now swordfish")  # an edit of an erased message
    third = post("my pin is 1234")
    await settle()
    await engine.forgetting.opt_out(member().id)
    edit(third, channel(), "my pin is now 9876")  # an edit after its author opted out
    await settle()
    text = str((await engine.conversations.context(root.id)).request)
    assert "swordfish" not in text and "9876" not in text


async def test_backfill_after_a_reconnect(world):
    bot, engine, _ = world
    post("before the outage")
    await settle()
    await bot.remove_cog("Messages")  # away: nothing is heard
    post("said while away 1")
    post("said while away 2")
    await settle()
    assert "said while away 1" not in await remembered(engine)
    from cogs.messages import Messages

    cog = Messages(bot)
    await bot.add_cog(cog)
    assert await cog.backfill() == 2
    assert (await remembered(engine))[-2:] == ["said while away 1", "said while away 2"]
    assert dpytest.verify().message().nothing()  # backfill remembers, never answers


async def test_thread_lifecycle(world):
    bot, engine, _ = world
    parent = channel()
    root = await engine.stelis.root(Scope.channel(parent.guild.id, parent.id))
    thread = create_thread(9001, parent, "Novel", owner_id=member().id)
    await settle()
    branch = await engine.store.branch("discord-9001")
    session = await engine.store.thread(branch.current_thread_id)
    anchors = [m for m in await engine.store.tail(root.id, 10) if m.metadata.get("type") == "stelis_anchor"]
    assert len(anchors) == 1 and anchors[0].metadata["stelis_thread_id"] == session.id

    post(f"{mention(bot)} start the novel about calculator_v2", in_channel=thread)
    await settle()
    assert dpytest.get_message().content == "hello from the persona"
    post("and continue without a mention", in_channel=thread)  # the bot spoke here: it answers on
    await settle()
    assert dpytest.get_message().content == "hello from the persona"

    update_thread(9001, parent, "Novel", member().id, archived=True)
    await settle()
    ended = await engine.store.thread(session.id)
    assert ended.status == "completed" and ended.chronicle_summary
    assert (await engine.store.branch("discord-9001")).status == "suspended"
    asked_there = await engine.conversations.context(root.id)
    parent_view = "\n".join(b.text for t in asked_there.request.turns for b in t.blocks)
    assert "## Chronicle" in parent_view and "calculator_v2" in parent_view

    update_thread(9001, parent, "Novel", member().id, archived=False)
    post("back again", in_channel=thread)
    await settle()
    assert dpytest.get_message().content == "hello from the persona"  # it spoke here before: no mention needed
    resumed = await engine.store.thread((await engine.store.branch("discord-9001")).current_thread_id)
    assert resumed.id != session.id and resumed.status == "active"
    first = (await engine.store.tail(resumed.id, 10))[0]
    assert first.metadata.get("stelis_thread_id") == session.id  # opened by an anchor to the previous session

    delete_thread(9001, parent)
    await settle()
    assert (await engine.store.thread(resumed.id)).status == "aborted"
    assert (await engine.store.branch("discord-9001")).status == "completed"
    await dpytest.empty_queue()


async def test_forum_posts_are_branches_too(world):
    _bot, engine, _ = world
    forum = make_forum(channel().guild)
    post_thread = create_thread(9100, forum, "Question about Tokyo", owner_id=member().id)
    await settle()
    post("what is the best time to visit?", in_channel=post_thread)
    await settle()
    branch = await engine.store.branch("discord-9100")
    assert branch is not None and branch.channel_id == forum.id
    session = await engine.store.thread(branch.current_thread_id)
    assert [m.content for m in await engine.store.tail(session.id, 10)] == ["what is the best time to visit?"]


def channel_payload(ch, *, name: str | None = None, hidden: bool = False) -> dict:
    deny = str(discord.Permissions(view_channel=True).value) if hidden else "0"
    return {"id": ch.id, "type": 0, "guild_id": ch.guild.id, "name": name or ch.name, "position": ch.position,
            "permission_overwrites": [{"id": ch.guild.id, "type": 0, "allow": "0", "deny": deny}],
            "nsfw": False, "rate_limit_per_user": 0, "topic": None, "last_message_id": None, "flags": 0}


async def test_channels_are_described_on_first_sight_and_on_permission_changes(world):
    _, engine, _ = world
    here = channel()
    scope = Scope.channel(here.guild.id, here.id)
    post("hello there")
    await settle()
    described = (await engine.admin.view(scope)).channel
    assert (described.name, described.public) == (here.name, True)

    dpytest.backend.get_state().parse_channel_update(channel_payload(here, name="staff-only", hidden=True))
    await settle()
    described = (await engine.admin.view(scope)).channel
    assert (described.name, described.public) == ("staff-only", False)  # a channel gone private stops being shared

    dpytest.backend.get_state().parse_channel_update(channel_payload(here, name="open-again"))
    await settle()
    assert (await engine.admin.view(scope)).channel.public == 1

    everyone = here.guild.default_role
    role = {"id": everyone.id, "name": "@everyone", "permissions": "0", "position": 0, "color": 0, "hoist": False,
            "managed": False, "mentionable": False, "flags": 0}
    dpytest.backend.get_state().parse_guild_role_update({"guild_id": here.guild.id, "role": role})
    await settle()
    assert (await engine.admin.view(scope)).channel.public == 0  # @everyone lost "view channel" server-wide


async def test_a_private_thread_is_its_own_conversation_and_nothing_of_it_reaches_the_parent(world):
    bot, engine, _ = world
    parent = channel()
    parent_scope = Scope.channel(parent.guild.id, parent.id)
    post("the parent channel talks about coffee", in_channel=parent)
    await settle()
    secret = create_thread(9200, parent, "HR matter", owner_id=member().id, private=True)
    await settle()
    assert await engine.store.branch("discord-9200") is None  # not a Stelis session of the parent
    post(f"{mention(bot)} my salary is 91234 and I am leaving for Valparaiso", in_channel=secret)
    await settle()
    assert dpytest.get_message().content == "hello from the persona"  # answered in the thread

    private_scope = Scope.private_thread(parent.guild.id, 9200)
    assert any("Valparaiso" in m for m in await remembered(engine, private_scope))
    root = await engine.stelis.root(parent_scope)
    tree = await engine.stelis.tree(root.id)
    assert [row.thread.id for row in tree] == [root.id]  # no session, no anchor, no live status
    assert not any("Valparaiso" in m or "HR matter" in m for m in await remembered(engine, parent_scope))
    assert await engine.archive.recall(parent_scope, "Valparaiso salary 91234") == []
    preview = await engine.conversations.preview(parent_scope, "where is someone leaving for? Valparaiso?",
                                                 author_name="x")
    assert "91234" not in str(preview.request)

    view = await engine.admin.view(private_scope)
    assert not view.channel.shared  # never in server memory or another channel's layers
    with pytest.raises(Exception, match="never shared"):
        await engine.admin.share(private_scope, True)


async def test_a_reply_may_ping_only_people_in_the_conversation(world, monkeypatch):
    from discord.ext.test import backend

    bot, _, llm = world

    outsider = backend.make_member(backend.make_user("outsider", 7), channel().guild).id  # never spoke here
    llm.text = f"<@{outsider}> and <@{member().id}>, have a look"
    sent: list[discord.AllowedMentions] = []
    original = discord.Message.reply

    async def spy(self, content=None, **kwargs):
        sent.append(kwargs["allowed_mentions"])
        return await original(self, content, **kwargs)

    monkeypatch.setattr(discord.Message, "reply", spy)
    post(f"{mention(bot)} who should look at this?")
    await settle()
    assert dpytest.get_message().content.endswith("have a look")
    allowed = sent[-1]
    assert allowed.everyone is False and allowed.roles is False
    assert {u.id for u in allowed.users} == {member().id}  # the model wrote the outsider's id: no ping


async def test_a_message_storage_refused_is_kept_and_stored_in_order_later(world, monkeypatch):
    from memory.store import StoreError

    _, engine, _ = world
    full = {"on": True}

    def refusing(original):
        async def append(*args):
            if full["on"]:
                raise StoreError("the database refused a write (database or disk is full); nothing of it was saved")
            return await original(*args)
        return append

    for name in ("append", "append_counted"):  # counted or not, the message is refused
        monkeypatch.setattr(engine.store, name, refusing(getattr(engine.store, name)))
    post("first, while the disk is full")
    await settle()
    assert "can't save messages right now" in dpytest.get_message().content
    full["on"] = False
    post("second, after space was freed")
    await settle()
    assert (await remembered(engine))[-2:] == ["first, while the disk is full", "second, after space was freed"]


async def test_backfill_after_a_reconnect_covers_threads_too(world):
    bot, engine, _ = world
    parent = channel()
    post("in the channel")  # dpytest's history of a channel nobody wrote in is an error, not empty
    thread = create_thread(9300, parent, "Planning", owner_id=member().id)
    await settle()
    post("in the thread before the outage", in_channel=thread)
    await settle()
    await bot.remove_cog("Messages")  # away: nothing is heard
    post("in the thread while away", in_channel=thread)
    await settle()
    from cogs.messages import Messages

    cog = Messages(bot)
    await bot.add_cog(cog)
    assert await cog.backfill() == 1
    session = (await engine.store.branch("discord-9300")).current_thread_id
    said = [m.content for m in await engine.store.tail(session, 10) if m.role == "user"]
    assert said == ["in the thread before the outage", "in the thread while away"]
    assert dpytest.verify().message().nothing()


async def test_a_reply_the_database_refuses_is_shown_the_user_told_and_stored_once_it_recovers(world, monkeypatch):
    from bot.services import conversation
    from memory.store import StoreError

    bot, engine, llm = world
    monkeypatch.setattr(conversation, "SAVE_RETRY_SECONDS", 0.05)
    down = {"on": True}
    original = engine.store.append

    async def append(thread_id, new):
        if down["on"] and new.role == "assistant":
            raise StoreError("the database went away (connection refused)")
        return await original(thread_id, new)

    monkeypatch.setattr(engine.store, "append", append)
    llm.text = "the lighthouse opens at nine"
    post(f"{mention(bot)} when does the lighthouse open?")
    await settle()
    shown = [dpytest.get_message().content, dpytest.get_message().content]
    assert shown[0] == "the lighthouse opens at nine"  # what streamed stays, whole
    assert "My reply is not saved yet" in shown[1] and "connection refused" in shown[1]
    assert "the lighthouse opens at nine" not in await remembered(engine)
    down["on"] = False
    for _ in range(100):  # the process recovers by itself: nobody has to speak again
        if "the lighthouse opens at nine" in await remembered(engine):
            break
        await asyncio.sleep(0.02)
    post("thanks!")
    await settle()
    assert (await remembered(engine))[-3:] == [f"{mention(bot)} when does the lighthouse open?",
                                              "the lighthouse opens at nine", "thanks!"]


async def test_every_real_command_has_a_fingerprint_and_a_test_bot_syncs_nothing(world, tmp_path):
    """The whole tree (groups, options, autocompletes) reads as Discord would receive it; a bot given its engine
    (a test's) never syncs on start."""
    from bot.command_sync import SYNCED_FILE, fingerprint

    bot, engine, _ = world
    assert len(bot.tree.get_commands()) > 10 and len(fingerprint(bot.tree)) == 64
    assert not (engine.config.data_dir / SYNCED_FILE).exists()

"""Reply chains (llmcord's core feature): a reply brings what it answers into the request, a few deep, when that
has left the window; only the conversation's own messages, never an erased one."""

import discord.ext.test as dpytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope
from tests.discord_helpers import channel, post, start_bot

HERE, ELSEWHERE = Scope.channel(1, 10), Scope.channel(1, 11)
HEADER = "[The message you answer replies to an earlier one no longer in view"


def tail(assembly) -> str:
    return assembly.request.turns[-1].blocks[-1].text


async def _engine(make_config):
    config = make_config(snapshots={"interval_seconds": 0}, llm={"context_tokens": 2_048},
                         short_term_history={"enabled": False})
    return await Engine.open(config, OfflineLLM())


async def _chain_then_filler(engine):
    hear = engine.conversations.hear
    await hear(HERE, "the spare key is in locker 5512 by the kestrel mural", author_name="ana", external_id=1)
    await hear(HERE, "is that the blue locker near the stairs?", author_name="ben", external_id=2, reply_to=1)
    await hear(HERE, "no, the red one by the north pier gate", author_name="ana", external_id=3, reply_to=2)
    await hear(ELSEWHERE, "the payroll code is 4471", author_name="cy", external_id=50)
    for i in range(60):
        await hear(HERE, f"filler {i}: the weather, the tide table, the ferry times and the bakery queue today",
                   author_name="dee", external_id=1_000 + i)


async def test_a_reply_brings_its_chain_a_few_deep_once_it_left_the_window(make_config):
    engine = await _engine(make_config)
    await _chain_then_filler(engine)
    root = (await engine.stelis.root(HERE)).id
    window = [m.content for m in (await engine.conversations.context(root, calls=False)).window_messages]
    assert not any("locker" in text for text in window)  # the chain has left the window
    await engine.conversations.hear(HERE, "which one did you say?", author_name="ben", external_id=100, reply_to=3)
    shown = tail(await engine.conversations.context(root, calls=False))
    assert HEADER in shown
    lines = shown[shown.index(HEADER):].splitlines()[1:4]
    assert [line.split(",")[0] for line in lines] == ["- ana", "- ben", "- ana"]  # newest first, three deep
    assert "red one by the north pier" in lines[0] and "locker 5512" in lines[2]
    await engine.close()


async def test_a_reply_shows_nothing_of_another_conversation_or_of_an_erased_message(make_config):
    engine = await _engine(make_config)
    await _chain_then_filler(engine)
    root = (await engine.stelis.root(HERE)).id
    await engine.conversations.hear(HERE, "and that code?", author_name="ben", external_id=101, reply_to=50)
    assert HEADER not in tail(await engine.conversations.context(root, calls=False))  # another channel's message
    await engine.forgetting.delete_message(3)
    await engine.conversations.hear(HERE, "which one?", author_name="ben", external_id=102, reply_to=3)
    shown = tail(await engine.conversations.context(root, calls=False))
    assert HEADER not in shown and "north pier" not in shown
    await engine.conversations.hear(HERE, "still there?", author_name="ben", external_id=103, reply_to=1_059)
    assert HEADER not in tail(await engine.conversations.context(root, calls=False))  # in view: nothing to add
    await engine.close()


async def test_a_discord_reply_is_kept_with_the_message_it_answers(make_config):
    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    await start_bot(engine, config)
    post("the spare key is in locker 5512")
    await dpytest.run_all_events()
    said = (await engine.store.tail((await engine.stelis.root(Scope.channel(channel().guild.id, channel().id))).id,
                                    5))[-1]
    post("which locker was it?", reference=await channel().fetch_message(said.external_id))
    await dpytest.run_all_events()
    root = (await engine.stelis.root(Scope.channel(channel().guild.id, channel().id))).id
    newest = (await engine.store.tail(root, 1))[0]
    assert newest.content == "which locker was it?" and newest.metadata["reply_to"] == said.external_id
    await dpytest.empty_queue()
    await engine.close()

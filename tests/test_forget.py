"""Forgetting: erased messages leave no trace in versions, long-term and server memory, chronicles,
rolling summaries, the search index or snapshots; opted-out people are not remembered at all."""

from __future__ import annotations

import asyncio

import pytest

from bot.clock import Clock
from bot.engine import Engine
from memory import threads
from memory.records import NewMessage, Scope
from tests.test_short_term import GENERAL, IDLE, RANDOM, Scripted, memory_config

SECRET = "passport ZX4471Q"
ANA, BEN = 1001, 1002


@pytest.fixture
async def world(make_config, database):
    clock = Clock()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, Scripted(), clock)
    for scope, name in ((GENERAL, "general"), (RANDOM, "random")):
        await engine.describe_channel(scope, name=name, public=True)
    yield engine, clock, config
    await engine.close()


async def traces(engine, config, text: str) -> list[str]:
    """Every place in the database (and the snapshots on disk) that still holds the text."""
    found = await engine.store.traces(text)
    snapshots = config.data_dir / "snapshots"
    found += [p.name for p in snapshots.glob("*.json") if text in p.read_text()] if snapshots.exists() else []
    return found


async def remember_everywhere(engine, clock):
    """Ana's secret in a channel, its versions, long-term and server memory, a chronicle and a snapshot."""
    await engine.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA, external_id=1)
    await engine.hear(GENERAL, "ben likes the Kyoto trip plan", author_name="ben", author_id=BEN, external_id=2)
    root = await engine.thread_for(GENERAL)
    run = threads.Run(root.id)
    child = await threads.start(engine.store, run, "paperwork", engine.config.stelis)
    await engine.store.append(child.id, NewMessage("user", f"renew the {SECRET} please", ANA, "ana"))
    await threads.end(engine.store, engine.llm, run, engine.config.stelis)
    clock.advance(IDLE)
    await engine.memory.run_due()
    await engine.store.set_window(root.id, window_summary=f"ana mentioned her {SECRET}", window_gap_from=1,
                                  window_gap_to=2, window_bridge=f"then ana renewed the {SECRET}")
    await engine.write_snapshots()
    assert await engine.recall(GENERAL, "passport ZX4471Q")  # a search has indexed her messages for recall


async def test_forget_me_erases_every_trace_and_keeps_everyone_else(world):
    engine, clock, config = world
    await remember_everywhere(engine, clock)
    before = await traces(engine, config, SECRET)
    index = {"messages_fts"} if type(engine.store).__name__ == "SqliteStore" else set()  # pg_trgm: on the column
    assert {"messages.content", "memory_records.content", "threads.chronicle_summary", "threads.window_summary",
            "threads.window_bridge", *index} <= set(before) and any(p.endswith(".json") for p in before)

    done = await engine.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert done.messages == 2 and done.versions >= 1 and done.chronicles == 1
    assert await traces(engine, config, SECRET) == []
    assert await engine.recall(GENERAL, "passport ZX4471Q") == []
    latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
    assert "Kyoto" in latest.content  # Ben's part of the conversation is still remembered


async def test_forgetting_in_one_server_leaves_another_alone(world):
    engine, clock, config = world
    elsewhere = Scope.channel(77, 700)
    await engine.hear(elsewhere, f"{SECRET} in another server", author_name="ana", author_id=ANA)
    await remember_everywhere(engine, clock)
    await engine.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert "messages.content" in await traces(engine, config, SECRET)  # the other server's message and memory stay
    theirs = await engine.store.latest_record(engine.persona, "channel", 700, "short_term")
    assert SECRET in theirs.content
    for scope_id, kind in ((GENERAL.channel_id, "channel"), (GENERAL.guild_id, "workspace")):
        for type_ in ("short_term", "long_term"):
            for record in await engine.store.recent_records(engine.persona, kind, scope_id, type_, 100):
                assert SECRET not in record.content


async def test_a_message_deleted_in_discord_leaves_its_summaries(world):
    engine, clock, config = world
    await remember_everywhere(engine, clock)
    assert await engine.delete_message(1)
    for _ in range(100):
        if not engine.forgetting.rewrites:
            break
        await asyncio.sleep(0.02)
    left = await traces(engine, config, "expires in May")
    assert left == []


async def test_someone_who_opted_out_is_not_remembered_at_all(world):
    engine, _, config = world
    await engine.opt_out(ANA)
    assert await engine.hear(GENERAL, f"my {SECRET}", author_name="ana", author_id=ANA) is None
    assert await traces(engine, config, SECRET) == []
    await engine.opt_out(ANA, out=False)
    assert await engine.hear(GENERAL, "back again", author_name="ana", author_id=ANA) is not None

"""Forgetting: erased messages leave no trace in versions, long-term and server memory, chronicles,
rolling summaries, the search index or snapshots; opted-out people are not remembered at all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.clock import Clock
from bot.engine import Engine
from cogs.admin.memory import forget_report
from memory import threads
from memory.records import NewMessage, Scope
from memory.store import StoreError
from tests.test_short_term import GENERAL, IDLE, RANDOM, Scripted, memory_config

SECRET = "passport ZX4471Q"
ANA, BEN = 1001, 1002


@pytest.fixture
async def world(make_config, database):
    clock = Clock()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, Scripted(), clock)
    for scope, name in ((GENERAL, "general"), (RANDOM, "random")):
        await engine.admin.describe(scope, name=name, public=True)
    yield engine, clock, config
    await engine.close()


async def traces(engine, config, text: str) -> list[str]:
    """Every place in the database (and the snapshots on disk) that still holds the text."""
    found = await engine.store.traces(text)
    snapshots = config.data_dir / "snapshots"
    found += [p.name for p in snapshots.glob("*.json") if text in p.read_text()] if snapshots.exists() else []
    return found


def hold_answers(llm: Scripted, *needles: str, purpose: str | None = None) -> tuple[asyncio.Event, asyncio.Event]:
    """The model holds back its answer to a request that holds every needle until released: (asked, release)."""
    asked, release = asyncio.Event(), asyncio.Event()
    answer = llm.complete

    async def held(request, on_text=None):
        if all(n in str(request) for n in needles) and purpose in (None, request.purpose):
            asked.set()
            await release.wait()
        return await answer(request, on_text)

    llm.complete = held
    return asked, release


async def remember_everywhere(engine, clock):
    """Ana's secret in a channel, its versions, long-term and server memory, a chronicle and a snapshot."""
    await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA,
                                    external_id=1)
    await engine.conversations.hear(GENERAL, "ben likes the Kyoto trip plan", author_name="ben", author_id=BEN,
                                    external_id=2)
    root = await engine.stelis.root(GENERAL)
    run = threads.Run(root.id)
    child = await threads.start(engine.store, run, "paperwork", engine.config.stelis)
    await engine.store.append(child.id, NewMessage("user", f"renew the {SECRET} please", ANA, "ana"))
    await threads.end(engine.store, engine.llm, run, engine.config.stelis)
    clock.advance(IDLE)
    await engine.memory.run_due()
    await engine.store.set_window(root.id, window_summary=f"ana mentioned her {SECRET}", window_gap_from=1,
                                  window_gap_to=2, window_bridge=f"then ana renewed the {SECRET}")
    await engine.snapshots.write_due()
    assert await engine.archive.recall(GENERAL, "passport ZX4471Q")  # a search has indexed her messages for recall


async def test_forget_me_erases_every_trace_and_keeps_everyone_else(world):
    engine, clock, config = world
    await remember_everywhere(engine, clock)
    before = await traces(engine, config, SECRET)
    index = {"messages_fts"} if type(engine.store).__name__ == "SqliteStore" else set()  # pg_trgm: on the column
    assert {"messages.content", "memory_records.content", "threads.chronicle_summary", "threads.window_summary",
            "threads.window_bridge", *index} <= set(before) and any(p.endswith(".json") for p in before)

    done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert done.messages == 2 and done.versions >= 1 and done.chronicles == 1
    assert await traces(engine, config, SECRET) == []
    assert await engine.archive.recall(GENERAL, "passport ZX4471Q") == []
    latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
    assert "Kyoto" in latest.content  # Ben's part of the conversation is still remembered


async def test_forgetting_in_one_server_leaves_another_alone(world):
    engine, clock, config = world
    elsewhere = Scope.channel(77, 700)
    await engine.conversations.hear(elsewhere, f"{SECRET} in another server", author_name="ana", author_id=ANA)
    await remember_everywhere(engine, clock)
    await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
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
    assert await engine.forgetting.delete_message(1)
    for _ in range(100):
        if not engine.forgetting.rewrites:
            break
        await asyncio.sleep(0.02)
    left = await traces(engine, config, "expires in May")
    assert left == []


async def test_someone_who_opted_out_is_not_remembered_at_all(world):
    engine, _, config = world
    await engine.forgetting.opt_out(ANA)
    assert await engine.conversations.hear(GENERAL, f"my {SECRET}", author_name="ana", author_id=ANA) is None
    assert await traces(engine, config, SECRET) == []
    await engine.forgetting.opt_out(ANA, out=False)
    assert await engine.conversations.hear(GENERAL, "back again", author_name="ana", author_id=ANA) is not None


def _raw_files(engine, config, request) -> list[Path]:
    """The files the project writes: the database's own (SQLite: file and WAL; PostgreSQL: the database's folder
    in the test cluster), the snapshots and the log."""
    files = [*(config.data_dir / "snapshots").glob("*"), *config.data_dir.glob("*.log")]
    if type(engine.store).__name__ == "SqliteStore":
        path = config.database_path
        return files + [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-journal")) if p.exists()]
    return files + [p for p in request.getfixturevalue("postgres_cluster").data.joinpath("base").rglob("*")
                    if p.is_file()]


async def test_forget_me_leaves_no_quote_no_anchor_copy_and_no_bytes_in_any_file(world, tmp_path, request):
    import logging

    from bot import logs
    from memory.llm import LLMResult, ToolCall
    from memory.turns import tool_call_message, tool_result_message

    engine, clock, config = world
    root_logger = logging.getLogger()
    kept = (list(root_logger.handlers), root_logger.level)
    logs.configure("DEBUG", [], config.data_dir / "stelis.log")  # as the bot logs, at its most talkative
    try:
        await remember_everywhere(engine, clock)
        root = await engine.stelis.root(GENERAL)
        # A recall the persona made, quoting ana: a tool result has no author of its own.
        quoted = "\n".join(await engine.tools.recall_text(GENERAL, "when does the passport ZX4471Q expire", 5))
        assert SECRET in quoted
        call = ToolCall("t1", "recall", {"query": "passport"})
        await engine.store.append(root.id, tool_call_message(LLMResult("", tool_calls=[call]), engine.persona))
        await engine.store.append(root.id, tool_result_message(call, quoted, lookup=True))
        await engine.store.log_autonomy(engine.persona, "guild:1", "react", f"ana said: my {SECRET} expires")
        # What was written from her words elsewhere: a task (its goal, its branch's state), a pin.
        await engine.tasks.create(GENERAL, "Paperwork", f"help renew the {SECRET} before May", ["ask"])
        await engine.admin.pin(GENERAL, f"ana's {SECRET} expires in May")
        # A Discord thread's branch: ana speaks, it is archived (its anchor keeps the last exchanges), it resumes
        # (the new session opens with a copy of that anchor), and the new session's memory is written.
        first = await engine.branches.session(GENERAL, 600, "trip planning")
        await engine.conversations.hear(GENERAL, f"bring the {SECRET} to the airport", author_name="ana", author_id=ANA,
                          thread_id=first.id)
        await engine.branches.archive(600)
        second = await engine.branches.session(GENERAL, 600, "trip planning")
        await engine.conversations.hear(GENERAL, "ben will book the hotel", author_name="ben", author_id=BEN,
                                        thread_id=second.id)
        clock.advance(IDLE)
        await engine.memory.run_due()
        opening = (await engine.store.tail(second.id, 5))[0]
        assert SECRET in str(opening.metadata)  # the copy holds her words before the forget-me
        await engine.snapshots.write_due()

        await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        await engine.snapshots.write_due()
    finally:
        for handler in list(root_logger.handlers):
            root_logger.removeHandler(handler)
            handler.close()
        for handler in kept[0]:
            root_logger.addHandler(handler)
        root_logger.setLevel(kept[1])

    assert await traces(engine, config, SECRET) == []
    for thread_id in (root.id, first.id, second.id):
        request_text = str((await engine.conversations.context(thread_id)).request)
        assert SECRET not in request_text and "ZX4471Q" not in request_text
    assert "ben will book the hotel" in str((await engine.conversations.context(second.id)).request)
    assert (config.data_dir / "stelis.log").stat().st_size > 0  # the log was written, and is read below
    for path in _raw_files(engine, config, request):
        data = path.read_bytes()
        assert b"ZX4471Q" not in data, f"{path} still holds the forgotten words"
        assert b"zx4471q" not in data, f"{path} still holds them folded to lower case (PostgreSQL's search copy)"


async def test_an_edit_brings_back_neither_erased_nor_opted_out_words(world):
    engine, _, config = world
    await engine.conversations.hear(GENERAL, "my phone is 0170-555", author_name="ana", author_id=ANA, external_id=41)
    await engine.conversations.hear(GENERAL, "ben's note", author_name="ben", author_id=BEN, external_id=42)
    await engine.conversations.hear(GENERAL, "ana again", author_name="ana", author_id=ANA, external_id=43)
    assert await engine.forgetting.delete_message(41)
    assert await engine.forgetting.edit_message(41, "my new phone is 0170-999") is None  # erased stays erased
    assert await engine.store.edit_message(41, "my new phone is 0170-999") is None  # in the store too
    await engine.forgetting.opt_out(ANA)
    assert await engine.forgetting.edit_message(43, "ana's secret after opting out: 0170-777") is None
    assert (await engine.forgetting.edit_message(42, "ben's corrected note")).content == "ben's corrected note"
    root = await engine.stelis.root(GENERAL)
    shown = str((await engine.conversations.context(root.id)).request)
    assert "0170-999" not in shown and "0170-777" not in shown and "ben's corrected note" in shown
    assert await traces(engine, config, "0170-999") == [] and await traces(engine, config, "0170-777") == []


async def test_a_forget_me_whose_files_cannot_be_cleaned_still_erases_and_says_so(world, monkeypatch):
    from cogs.admin import forget_report
    from memory.store import StoreError

    engine, clock, config = world
    await remember_everywhere(engine, clock)

    async def busy() -> None:
        raise StoreError("the write-ahead log could not be emptied (another connection is reading)")

    monkeypatch.setattr(engine.store, "scrub", busy)
    done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert await traces(engine, config, SECRET) == []  # every row: erased all the same
    assert "could not be emptied" in (done.unscrubbed or "")
    assert "could not be cleaned yet" in forget_report(done, "of yours")


async def test_a_summary_being_written_when_its_words_are_erased_is_not_saved(make_config, database):
    """A cut's rolling summary was asked of the model before a forget-me erased what it summarises: when the model
    answers, the erased words are not saved as the window's summary (the window is read again instead)."""
    clock = Clock()
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    config = config.model_copy(update={"llm": config.llm.model_copy(update={"context_tokens": 3_000})})
    engine = await Engine.open(config, llm, clock)
    try:
        await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA)
        for n in range(60):
            await engine.conversations.hear(GENERAL, f"ben's note {n}: " + "plans for the trip " * 12,
                                            author_name="ben", author_id=BEN)
        root = await engine.stelis.root(GENERAL)
        summarising, release = hold_answers(llm, SECRET, purpose="summary")
        replying = asyncio.create_task(engine.conversations.reply(root.id))
        await asyncio.wait_for(summarising.wait(), 10)
        done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        assert done.messages == 1
        release.set()
        await asyncio.wait_for(replying, 10)
        assert await engine.store.traces(SECRET) == []
        thread = await engine.store.thread(root.id)
        assert SECRET not in (thread.window_summary or "") + (thread.window_bridge or "")
    finally:
        await engine.close()


async def paperwork(engine) -> threads.Run:
    """A Stelis thread under the channel, open, where ana gives her secret and ben his plans: its run."""
    await engine.conversations.hear(GENERAL, "let us sort the paperwork", author_name="ben", author_id=BEN)
    run = threads.Run((await engine.stelis.root(GENERAL)).id)
    child = await threads.start(engine.store, run, "paperwork", engine.config.stelis)
    await engine.store.append(child.id, NewMessage("user", f"renew the {SECRET} please", ANA, "ana"))
    await engine.store.append(child.id, NewMessage("user", "and book the Kyoto train", BEN, "ben"))
    return run


async def test_a_chronicle_being_written_when_its_words_are_erased_is_not_saved(make_config, database):
    """A Stelis thread's chronicle was asked of the model before a forget-me erased a message of the thread: when the
    model answers, the chronicle saved holds none of the erased words."""
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, llm, Clock())
    try:
        run = await paperwork(engine)
        writing, release = hold_answers(llm, SECRET)
        ending = asyncio.create_task(threads.end(engine.store, engine.llm, run, engine.config.stelis))
        await asyncio.wait_for(writing.wait(), 10)
        await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        release.set()
        closed = await asyncio.wait_for(ending, 10)
        assert closed.status == "completed" and "Kyoto" in (closed.chronicle_summary or "")
        assert await engine.store.traces(SECRET) == []
    finally:
        await engine.close()


async def test_a_server_memory_being_merged_when_its_words_are_erased_is_not_saved(make_config, database):
    """The server's memory was being merged from a channel memory holding someone's words when they asked to be
    forgotten: the merge that answers after the forget-me's own leaves none of their words behind."""
    clock = Clock()
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, llm, clock)
    try:
        for scope, name in ((GENERAL, "general"), (RANDOM, "random")):
            await engine.admin.describe(scope, name=name, public=True)
        await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA)
        clock.advance(IDLE)
        await engine.memory.run_due()
        await engine.conversations.hear(RANDOM, "ben likes the Kyoto trip plan", author_name="ben", author_id=BEN)
        clock.advance(IDLE)
        merging, release = hold_answers(llm, SECRET, "this server")
        waiting = asyncio.Event()
        claim = engine.store.claim

        async def claimed(key, owner, lease_seconds):
            taken = await claim(key, owner, lease_seconds)
            if not taken and owner.endswith("forget"):
                waiting.set()  # the forget-me has rewritten the rest and waits for the merge under way
            return taken

        engine.store.claim = claimed
        running = asyncio.create_task(engine.memory.run_due())
        await asyncio.wait_for(merging.wait(), 10)
        forgetting = asyncio.create_task(engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id))
        await asyncio.wait_for(asyncio.wait([forgetting, asyncio.ensure_future(waiting.wait())],
                                            return_when=asyncio.FIRST_COMPLETED), 10)
        release.set()
        await asyncio.wait_for(asyncio.gather(running, forgetting), 10)
        assert await engine.store.traces(SECRET) == []
        server = await engine.store.latest_record(engine.persona, "workspace", GENERAL.guild_id, "long_term")
        assert server is not None and "Kyoto" in server.content
    finally:
        await engine.close()


async def test_a_channel_memory_being_merged_when_its_words_are_erased_is_not_saved(make_config, database):
    """A channel's long-term memory was being merged from a version holding someone's words when they asked to be
    forgotten: the merge that answers after the forget-me's rebuild is not saved over it."""
    clock = Clock()
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, llm, clock)
    try:
        await engine.admin.describe(GENERAL, name="general", public=False)
        await engine.conversations.hear(GENERAL, "ben likes the Kyoto trip plan", author_name="ben", author_id=BEN)
        clock.advance(IDLE)
        await engine.memory.run_due()
        await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA)
        clock.advance(IDLE)
        merging, release = hold_answers(llm, SECRET, "long-term memory")
        running = asyncio.create_task(engine.memory.run_due())
        await asyncio.wait_for(merging.wait(), 10)
        await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        release.set()
        await asyncio.wait_for(running, 10)
        merged = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "long_term")
        assert merged is not None and "Kyoto" in merged.content  # rebuilt from what is left
        assert await engine.store.traces(SECRET) == []
    finally:
        await engine.close()


async def test_a_snapshot_being_written_when_its_words_are_erased_is_written_again(make_config, database, monkeypatch):
    """A timed snapshot had read a thread before a forget-me erased from it, and writes its file after the forget-me
    wrote its own: the thread's snapshot is written once more, from what is left, and the file holds none of it."""
    import threading

    from memory import snapshots as snapshot_files

    clock = Clock()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, Scripted(), clock)
    try:
        await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA)
        await engine.conversations.hear(GENERAL, "ben likes the Kyoto trip plan", author_name="ben", author_id=BEN)
        writing, release = asyncio.Event(), asyncio.Event()
        write = snapshot_files.write

        def slow(path, snapshot):
            if SECRET in str(snapshot) and not release.is_set():
                writing.set()
                release_seen.wait(10)
            write(path, snapshot)

        release_seen = threading.Event()
        monkeypatch.setattr(snapshot_files, "write", slow)
        timed = asyncio.create_task(engine.snapshots.write_due())
        await asyncio.wait_for(writing.wait(), 10)
        forgetting = asyncio.create_task(engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id))
        await asyncio.sleep(0.3)  # the forget-me erases, rewrites, and asks for its snapshots meanwhile
        release.set()
        release_seen.set()
        await asyncio.wait_for(asyncio.gather(timed, forgetting), 10)
        files = list((config.data_dir / "snapshots").glob("*.json"))
        assert files and not [f.name for f in files if SECRET in f.read_text()]
        assert any("Kyoto" in f.read_text() for f in files)
    finally:
        await engine.close()


async def test_a_forget_me_while_the_model_is_down_still_leaves_none_of_their_words(world):
    """The versions, memories and chronicle written from an erased message are rewritten by the model; when it cannot
    answer, they are rewritten extractively from what is left, and the erasure still finishes whole."""
    engine, clock, config = world
    await remember_everywhere(engine, clock)
    llm = engine.memory.llm
    while not isinstance(llm, Scripted):  # the engine's own model, under its metering wrappers
        llm = llm.inner
    llm.fail = 10_000
    done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert done.messages == 2 and done.versions >= 1 and done.chronicles == 1
    assert await traces(engine, config, SECRET) == []
    latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
    assert "Kyoto" in latest.content  # Ben's part, kept by the extractive rewrite


async def test_a_forget_me_cut_short_is_finished_at_the_next_start(make_config, database):
    """The messages were erased, then the process stopped before the memory written from them was rewritten (a
    crash, the database gone): the next start rewrites it, and no erased word is left."""
    clock = Clock()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, Scripted(), clock)
    stopped = False
    try:
        await remember_everywhere(engine, clock)

        async def cut_short(*args, **kwargs):
            raise StoreError("the database went away")

        engine.forgetting._rewrite = cut_short
        done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        assert done.messages == 2 and done.unfinished == "the database went away"
        assert "rewritten on its own" in forget_report(done, "of yours")  # what the member is told
        assert "memory_records.content" in await engine.store.traces(SECRET)  # written from it, not rewritten
        engine.shutdown_grace = 0.1  # its retries keep failing: the process stops with the erasure pending
        await engine.close()
        stopped = True
        engine = await Engine.open(config, Scripted(), clock)
        stopped = False
        for _ in range(200):
            if not engine.forgetting.rewrites:
                break
            await asyncio.sleep(0.02)
        assert await traces(engine, config, SECRET) == []
        assert await engine.store.erasures() == {}
        latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
        assert "Kyoto" in latest.content
    finally:
        if not stopped:
            await engine.close()


async def test_a_rewrite_that_fails_is_tried_again_until_the_erased_words_are_gone(world, monkeypatch):
    """The database went away while a deleted message's memory was rewritten: the rewrite is tried again a little
    later, in the running bot, until it is done."""
    from bot.services import forgetting
    from memory import forget

    engine, clock, config = world
    await remember_everywhere(engine, clock)
    real, failed = forget.rewrite, []

    async def once_away(*args, **kwargs):
        if not failed:
            failed.append(True)
            raise StoreError("the database went away")
        return await real(*args, **kwargs)

    monkeypatch.setattr(forget, "rewrite", once_away)
    monkeypatch.setattr(forgetting, "RETRY_SECONDS", 0.05)
    assert await engine.forgetting.delete_message(1)
    await asyncio.wait_for(asyncio.gather(*engine.forgetting.rewrites), 10)
    assert failed and await traces(engine, config, "expires in May") == []
    assert await engine.store.erasures() == {}
    # A forget-me whose rewrite fails: finished in the background, and the database's files cleaned after it.
    failed.clear()
    scrubbed = []
    scrub = engine.store.scrub

    async def counted_scrub():
        scrubbed.append(True)
        await scrub()

    monkeypatch.setattr(engine.store, "scrub", counted_scrub)
    done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert done.unfinished == "the database went away" and not scrubbed
    await asyncio.wait_for(asyncio.gather(*engine.forgetting.rewrites), 10)
    assert scrubbed and await traces(engine, config, SECRET) == [] and await engine.store.erasures() == {}


async def cut_over_ana(engine, clock) -> int:
    """Ana's words in v1, then a cut's rolling summary that holds them and the next messages (the prompt's memory
    lags the newest version, so a summary may reach back before it): the root thread's id."""
    await engine.conversations.hear(GENERAL, f"my {SECRET} expires in May", author_name="ana", author_id=ANA,
                                    external_id=1)
    await engine.conversations.hear(GENERAL, "ben says hello", author_name="ben", author_id=BEN, external_id=2)
    clock.advance(IDLE)
    await engine.memory.run_due()
    for n, text in enumerate(("the kiln is fixed", "the glaze goes on monday", "the shop opens at nine")):
        await engine.conversations.hear(GENERAL, text, author_name="ben", author_id=BEN, external_id=3 + n)
    root = await engine.stelis.root(GENERAL)
    said = [m async for m in engine.store.span(root.id, None, None)]
    await engine.store.set_window(root.id, window_start_seq=said[4].seq, window_summary=f"ana's {SECRET}; the kiln",
                                  window_summary_from=said[0].seq, window_summary_to=said[2].seq,
                                  window_summary_first_at=said[0].created_at, window_summary_last_at=said[2].created_at)
    return root.id


async def test_a_version_that_read_a_window_summary_is_rewritten_when_a_message_it_stood_for_is_erased(world):
    """The version after v1 reads the window's summary for the messages it stands for, ana's among them though
    v1 covers hers: erasing her message rewrites that version too, and no word of it is left anywhere."""
    engine, clock, config = world
    await cut_over_ana(engine, clock)
    clock.advance(IDLE)
    await engine.memory.run_due()
    v1, v2 = await engine.store.recent_records(engine.persona, "channel", GENERAL.channel_id, "short_term", 10)
    assert SECRET in v2.content and v2.metadata["read_from"] == v1.first_seq < v2.first_seq
    done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert done.versions == 2
    assert await traces(engine, config, SECRET) == []
    latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
    assert "glaze" in latest.content and "read_from" not in latest.metadata  # rewritten from its own range alone


async def test_a_version_reading_a_window_summary_when_its_words_are_erased_is_not_saved(make_config, database):
    """The version's request held the window's summary with ana's words when a forget-me erased her message (before
    the version's range): when the model answers, it is not saved, and the next scan writes it without them."""
    clock = Clock()
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, llm, clock)
    try:
        await cut_over_ana(engine, clock)
        asked, release = hold_answers(llm, SECRET, "short-term memory", purpose="summary")
        clock.advance(IDLE)
        writing = asyncio.create_task(engine.memory.run_due())
        await asyncio.wait_for(asked.wait(), 10)
        done = await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        assert done.messages == 1
        release.set()
        await asyncio.wait_for(writing, 10)
        clock.advance(IDLE)
        await engine.memory.run_due()
        assert await traces(engine, config, SECRET) == []
        latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
        assert "glaze" in latest.content
    finally:
        await engine.close()


@pytest.mark.parametrize("copy", ["edit", "rollback"])
async def test_an_edit_or_rollback_of_a_version_that_read_a_window_summary_is_rewritten_too(world, copy):
    """An admin's edit or rollback copies the version's text and range: and where its reading began, so erasing a
    message the summary stood for reaches the copy as it reaches the version."""
    engine, clock, config = world
    await cut_over_ana(engine, clock)
    clock.advance(IDLE)
    await engine.memory.run_due()
    read = (await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term"))
    if copy == "edit":
        made = await engine.admin.edit(GENERAL, f"{read.content} (checked by an admin)")
    else:
        made = await engine.admin.rollback(GENERAL, read.version)
    assert SECRET in made.content and made.metadata["read_from"] == read.metadata["read_from"]
    await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert await traces(engine, config, SECRET) == []


async def test_a_bridge_whose_words_reach_before_a_version_says_so_in_the_version_it_is_read_for(world):
    """A trim's bridge may hold a memory version's words for part of its gap, and so words said before the gap
    (window_bridge_from): a version that reads it in place of the gap's messages records where its reading began,
    and erasing the older words rewrites it too, leaving none behind."""
    engine, clock, config = world
    await cut_over_ana(engine, clock)
    root = await engine.stelis.root(GENERAL)
    said = [m async for m in engine.store.span(root.id, None, None)]
    await engine.store.set_window(root.id, window_start_seq=said[1].seq, window_summary=None, window_summary_from=None,
                                  window_summary_to=None, window_gap_from=said[2].seq, window_gap_to=said[4].seq,
                                  window_bridge=f"the kiln; as v1 had it, ana's {SECRET}", window_trims=1,
                                  window_bridge_from=said[0].seq)
    clock.advance(IDLE)
    await engine.memory.run_due()
    _, v2 = await engine.store.recent_records(engine.persona, "channel", GENERAL.channel_id, "short_term", 10)
    assert SECRET in v2.content and v2.metadata["read_from"] == said[0].seq and "kiln" in v2.content
    await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
    assert await traces(engine, config, SECRET) == []


async def test_a_version_reading_a_chronicle_when_its_words_are_erased_is_not_saved(make_config, database):
    """The channel's version was asked of the model with a closed Stelis thread's anchor, its chronicle quoting ana,
    when a forget-me erased her message in that thread: the chronicle and its anchor are written again, and the
    version that answers afterwards is not saved with her words; the next scan writes it without them."""
    clock = Clock()
    llm = Scripted()
    config = memory_config(lambda **sections: make_config(database=database, **sections))
    engine = await Engine.open(config, llm, clock)
    try:
        run = await paperwork(engine)
        await threads.end(engine.store, engine.llm, run, engine.config.stelis)
        await engine.conversations.hear(GENERAL, "the paperwork is sorted", author_name="ben", author_id=BEN)
        asked, release = hold_answers(llm, SECRET, "short-term memory", purpose="summary")
        clock.advance(IDLE)
        writing = asyncio.create_task(engine.memory.run_due())
        await asyncio.wait_for(asked.wait(), 10)
        await engine.forgetting.forget_person(ANA, guild_id=GENERAL.guild_id)
        release.set()
        await asyncio.wait_for(writing, 10)
        clock.advance(IDLE)
        await engine.memory.run_due()
        assert await engine.store.traces(SECRET) == []
        latest = await engine.store.latest_record(engine.persona, "channel", GENERAL.channel_id, "short_term")
        assert latest is not None and "Kyoto" in latest.content  # ben's part is remembered
    finally:
        await engine.close()

"""The contract every storage backend keeps, run against each (SQLite, and PostgreSQL when installed)."""

import asyncio
import contextlib
import itertools
import sys
from dataclasses import replace

import pytest

from memory.backends import open_store
from memory.records import ModelUsage, NewMessage, Scope, Thread, own_memory
from memory.settings import Triggers
from memory.sql.threads import REPLY_WITHIN
from memory.store import OptedOut, StaleSummary, StaleUpdate, Store, StoreError
from memory.tokens import count_tokens
from tests.recall_helpers import matched_messages, matched_notes, said_between

TRIGGERS = Triggers(idle_seconds=7_200, threshold=50)


def backend_module(store: Store):
    return sys.modules[type(store).__module__]


async def test_root_thread_is_created_once_per_persona_and_scope(store):
    a = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    b = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    other_persona = await store.root_thread("Q", Scope.channel(1, 2), 0.8)
    other_channel = await store.root_thread("P", Scope.channel(1, 3), 0.8)
    assert a.id == b.id
    assert len({a.id, other_persona.id, other_channel.id}) == 3
    assert (a.kind, a.depth, a.parent_thread_id, a.guild_id, a.channel_id) == ("root", 0, None, 1, 2)


@pytest.mark.parametrize("steps", range(10))
async def test_a_write_cancelled_between_its_statements_is_whole_or_none_and_the_next_write_lands(store, steps):
    """A reply cancelled (a shutdown, a timeout) while its write of several statements is under way: on SQLite the
    connection stayed inside that transaction, every later write was refused, and a later COMMIT could keep half."""
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    batch = [NewMessage("user", "first of a pair"), NewMessage("assistant", "second of a pair")]
    cancelled = asyncio.ensure_future(store.append_many(root.id, batch))
    for _ in range(steps):  # cancelled after this many turns of the event loop: at each step of the write
        await asyncio.sleep(0)
    cancelled.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cancelled
    await store.append(root.id, NewMessage("user", "the next write"))
    texts = [m.content async for m in store.span(root.id, None, None)]
    assert texts in (["the next write"], ["first of a pair", "second of a pair", "the next write"])


async def test_live_messages_are_counted_after_a_sequence(store):
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    said = [(await store.append(root.id, NewMessage("user", f"m{i}", external_id=500 + i)))[0] for i in range(5)]
    await store.purge(external_id=502)
    assert await store.count_messages(root.id) == 4
    assert await store.count_messages(root.id, said[0].seq) == 3  # m1, m3 and m4: m2 erased
    assert await store.count_messages(root.id, said[3].seq) == 1


async def test_ingesting_the_same_external_message_twice_stores_it_once(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    first, created = await store.append(root.id, NewMessage("user", "hello", external_id=1234567890123))
    again, created_again = await store.append(root.id, NewMessage("user", "hello (resent)", external_id=1234567890123))
    assert created and not created_again
    assert again.seq == first.seq and again.content == "hello"
    assert await store.count_messages(root.id) == 1


async def test_a_message_of_someone_who_opted_out_is_refused_by_the_statement_that_would_store_it(store):
    """The store checks the opt-out where it writes: a caller whose list of opt-outs is older (another process
    took it a moment ago) stores nothing, counts nothing, and is told so. Only this persona's opt-out counts."""
    root = await store.root_thread("Stelis", Scope.channel(10, 100), 0.8)
    other = await store.root_thread("Echo", Scope.channel(10, 100), 0.8)
    await store.set_optout("Stelis", 77, True)
    with pytest.raises(OptedOut):
        await store.append(root.id, NewMessage("user", "my locker code is 5512", author_id=77, external_id=9001))
    with pytest.raises(OptedOut):
        await store.append_counted(root, NewMessage("user", "and my PIN is 0420", author_id=77), TRIGGERS)
    await store.append_counted(root, NewMessage("user", "hello", author_id=78, external_id=9002), TRIGGERS)
    await store.append(root.id, NewMessage("assistant", "hi"))  # no author: the persona's own
    assert [m.content for m in await store.tail(root.id, 10)] == ["hello", "hi"]
    assert (await store.memory_channel(root.id)).pending_count == 1
    assert await store.message_by_external_id(9001) is None
    assert (await store.append(other.id, NewMessage("user", "to another persona", author_id=77)))[1]
    await store.set_optout("Stelis", 77, False)
    await store.append(root.id, NewMessage("user", "the meeting is at noon", author_id=77, external_id=9003))
    await store.set_optout("Stelis", 77, True)
    assert await store.edit_message(9003, "the meeting is at noon, bring the 5512 key") is None  # not taken
    assert (await store.message_by_external_id(9003)).content == "the meeting is at noon"
    await store.set_optout("Stelis", 77, False)
    assert (await store.append(root.id, NewMessage("user", "back again", author_id=77, external_id=9001)))[1]


async def test_token_count_is_stored_at_write_and_not_recomputed_on_read(store, monkeypatch):
    root = await store.root_thread("P", Scope.console(), 0.8)
    text = "Stelis remembers calculator_v2 and <|endoftext|> as plain text."
    message, _ = await store.append(root.id, NewMessage("user", text))
    assert message.token_count == count_tokens(text) > 0

    def explode(_text):
        raise AssertionError("tokenised on read")

    monkeypatch.setattr(backend_module(store), "count_tokens", explode)
    (read,) = await store.tail(root.id, 5)
    assert read.token_count == message.token_count


async def test_edit_and_delete_by_external_id(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    await store.append(root.id, NewMessage("user", "short", external_id=9))
    edited = await store.edit_message(9, "a much longer edited message about calculator_v2")
    assert edited.content.startswith("a much longer") and edited.edited_at is not None
    assert edited.token_count == count_tokens(edited.content)
    assert await store.delete_message(9) is True
    assert await store.delete_message(9) is False
    assert await store.tail(root.id, 10) == []


async def test_settings_round_trip(store):
    await store.set_setting("channel", 5, "stelis.max_depth", 2)
    await store.set_setting("channel", 5, "stelis.max_depth", 1)
    await store.set_setting("guild", 5, "persona.name", "Eris")
    assert await store.settings("channel", 5) == {"stelis.max_depth": 1}
    assert await store.delete_setting("channel", 5, "stelis.max_depth") is True
    assert await store.settings("channel", 5) == {}


async def test_a_message_and_its_count_are_stored_together_or_not_at_all(store, monkeypatch):
    root = await store.root_thread("Stelis", Scope.channel(10, 100), 0.8)
    triggers = Triggers(idle_seconds=7_200, threshold=50)
    await store.append_counted(root, NewMessage("user", "counted with its message"), triggers)
    assert (await store.memory_channel(root.id)).pending_count == 1
    monkeypatch.setattr(backend_module(store), "_NOTE_MESSAGE", "UPDATE no_such_table SET x = 1")  # the count fails
    with pytest.raises(StoreError):
        await store.append_counted(root, NewMessage("user", "lost with its count"), triggers)
    assert [m.content for m in await store.tail(root.id, 10)] == ["counted with its message"]
    assert (await store.memory_channel(root.id)).pending_count == 1


async def test_a_claim_is_held_by_one_owner_until_released_or_its_lease_runs_out(backend):
    now = [1_000.0]
    store = await open_store(backend, clock=lambda: now[0])
    assert await store.claim("memory:7", "a", 60)
    assert not await store.claim("memory:7", "b", 60)  # held
    assert await store.claim("memory:7", "a", 60)  # the holder may renew
    assert await store.claim("memory:8", "b", 60)  # another piece of work is free
    await store.release("memory:7", "b")  # not b's to release
    assert not await store.claim("memory:7", "b", 60)
    now[0] += 61  # the lease ran out: a stuck holder loses it
    assert await store.claim("memory:7", "b", 60)
    await store.release("memory:7", "b")
    assert await store.claim("memory:7", "a", 60)
    await store.close()


async def test_set_metadata_replaces_what_is_kept_with_a_message_never_its_text(store):
    root = await store.root_thread("Stelis", Scope.console(), 0.8)
    message, _ = await store.append(root.id, NewMessage("user", "[image: w.png]", metadata={"images": [{"name": "w"}]}))
    await store.set_metadata(message.seq, {"images": [{"name": "w", "description": "five stars in a W"}]})
    kept = await store.message_by_seq(message.seq)
    assert kept.content == "[image: w.png]" and kept.metadata["images"][0]["description"] == "five stars in a W"


# recall: the same hits from FTS5 trigram tables (SQLite) and pg_trgm indexes (PostgreSQL)

CORPUS = [
    "The kestrel nests on the old water tower",
    "We moved the kestrel camera to the east side",
    "Budget: 50% for cameras, the rest for ladders",
    "snake_case names in the calculator_v2 code",
    "昨日は東京タワーに行きました",
    "東京タワーの近くでラーメンを食べた",
    "Nothing about birds here at all",
    "KESTREL in capitals, kestrel twice: kestrel",
]


async def _corpus(store: Store) -> tuple[list[int], str]:
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    seqs = [(await store.append(root.id, NewMessage("user", text, author_name="mahe")))[0].seq for text in CORPUS]
    other = await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    await store.append(other.id, NewMessage("user", "a kestrel in another channel"))
    await store.append(root.id, NewMessage("assistant", "a stand-in's kestrel line", metadata={"placeholder": True}))
    await store.index_messages()
    return seqs, root.scope_key


def _expected(seqs: list[int], *terms: str) -> set[int]:
    return {seq for seq, text in zip(seqs, CORPUS, strict=True) if any(t.lower() in text.lower() for t in terms)}


@pytest.mark.parametrize("terms", [["kestrel"], ["tower"], ["東京タワー"], ["ラーメン", "water"], ["50%"],
                                   ["snake_case"], ["calculator_v2"], ["nowhere-to-be-found"]])
async def test_recall_finds_the_same_messages_on_every_backend(store, terms):
    seqs, key = await _corpus(store)
    found = await matched_messages(store, terms, "Stelis", (key,), 20)
    assert {m.seq for m in found} == _expected(seqs, *terms)  # case folded, only this channel, no stand-in
    assert all(m.scope_key == key and m.author_name == "mahe" for m in found)


async def test_recall_ranks_a_message_with_more_of_the_rarer_terms_first(store):
    seqs, key = await _corpus(store)
    found = await matched_messages(store, ["kestrel", "camera"], "Stelis", (key,), 20)
    assert found[0].seq == seqs[1]  # the only one with both
    assert len(found) == len({m.seq for m in found})  # once, however many of the terms it matched
    assert next(m.seq for m in await matched_messages(store, ["kestrel"], "Stelis", (key,), 2)) == seqs[7]  # thrice


async def test_recall_counts_and_scans(store):
    seqs, key = await _corpus(store)
    newest, counts = await store.match_counts(["kestrel", "東京タワー", "zebra"], cap=2)
    assert newest >= seqs[-1] and counts == {"kestrel": 2, "東京タワー": 2, "zebra": 0}  # capped at 2
    short = await store.scan_messages("東京", "Stelis", (key,), window=100, limit=10)
    assert {m.seq for m in short} == {seqs[4], seqs[5]}
    await store.purge(external_id=None, author_id=None)  # nothing named: nothing erased
    assert len(await matched_messages(store, ["東京タワー"], "Stelis", (key,), 10)) == 2


async def test_a_message_s_reply_is_the_next_thing_someone_else_said_in_its_thread_where_it_may_be_seen(store):
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    said = [("user", "ana", 11, "what flowers are those?", {}), ("user", "ana", 11, "they look lovely", {}),
            ("tool", None, None, "a tool's result", {}), ("user", "ben", 12, "an image, described soon",
                                                         {"placeholder": True}),
            ("user", "cyd", 13, "gone", {}), ("user", "ben", 12, "Peruvian lilies, from my aunt", {}),
            ("assistant", "Stelis", None, "They suit the window.", {}), ("user", "ben", 12, "thanks!", {})]
    seqs = [(await store.append(root.id, NewMessage(role, text, author_name=name, author_id=who,
                                                    external_id=900 + n, metadata=meta)))[0].seq
            for n, (role, name, who, text, meta) in enumerate(said)]
    assert await store.delete_message(904)  # cyd's "gone"
    elsewhere = await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    hidden, _ = await store.append(elsewhere.id, NewMessage("user", "in another channel", author_name="ana"))
    await store.append(elsewhere.id, NewMessage("user", "its reply", author_name="ben"))

    replies = await store.replies_to([seqs[0], seqs[5], seqs[6], seqs[7], hidden.seq], "Stelis", (root.scope_key,))
    # ana's own second message, the tool result, the placeholder and the deleted message are passed over
    assert {k: v.content for k, v in replies.items()} == {
        seqs[0]: "Peruvian lilies, from my aunt", seqs[5]: "They suit the window.", seqs[6]: "thanks!"}
    assert replies[seqs[0]].author_name == "ben" and replies[seqs[0]].scope_key == root.scope_key
    assert await store.replies_to([hidden.seq], "Stelis", (root.scope_key,)) == {}  # not a conversation it may see
    assert await store.replies_to([hidden.seq], "Other", (elsewhere.scope_key,)) == {}  # nor another persona's
    assert (await store.replies_to([hidden.seq], "Stelis", (elsewhere.scope_key,)))[hidden.seq].content == "its reply"
    assert await store.replies_to([], "Stelis", (root.scope_key,)) == {}
    # a reply is among the next REPLY_WITHIN messages of the thread: after a long monologue, nothing is one
    monologue = [(await store.append(elsewhere.id, NewMessage("user", f"and {n}", author_name="dee")))[0].seq
                 for n in range(REPLY_WITHIN + 1)]
    await store.append(elsewhere.id, NewMessage("user", "finally, an answer", author_name="eve"))
    replies = await store.replies_to(monologue[:2], "Stelis", (elsewhere.scope_key,))
    assert monologue[0] not in replies and replies[monologue[1]].content == "finally, an answer"


async def _chronicled(store: Store, root: Thread, label: str, chronicle: str) -> None:
    """A Stelis thread under `root`, completed with this chronicle."""
    from dataclasses import replace

    child, _ = await store.create_thread(root, kind="stelis", label=label, window_ratio=0.5, chronicle_prompt=None,
                                         run_id=None, anchor=NewMessage("system", f"[Stelis thread: {label}]"))
    await store.close_thread(replace(child, status="completed", chronicle_summary=chronicle, completed_at=5.0), None, 0)


async def test_recall_of_notes_finds_chronicles_and_short_term_versions_of_the_visible_scopes(store):
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await _chronicled(store, root, "birds", "We counted kestrel nests")
    await store.add_record("Stelis", "channel", 2, "short_term", "kestrel numbers are up")
    await store.add_record("Stelis", "channel", 2, "long_term", "kestrel numbers (long-term)")
    await store.add_record("Stelis", "channel", 3, "short_term", "kestrel in another channel")
    notes = await matched_notes(store, ["kestrel"], "Stelis", (root.scope_key,), (("channel", 2),), 10)
    assert sorted((n.source, n.text) for n in notes) == [("chronicle", "We counted kestrel nests"),
                                                          ("record", "kestrel numbers are up")]
    assert [n.version for n in notes if n.source == "record"] == [1]
    # a note matching several terms comes once, first; a version an edit hid does not come at all
    await store.add_record("Stelis", "channel", 2, "short_term", "kestrel sighting, numbers unsure")
    await store.add_record("Stelis", "channel", 2, "short_term", "the kestrel note, edited", hides=[2])
    notes = await matched_notes(store, ["kestrel", "numbers"], "Stelis", (root.scope_key,), (("channel", 2),), 10)
    records = [n.text for n in notes if n.source == "record"]
    assert records[0] == "kestrel numbers are up" and len(records) == len(set(records)) == 2
    assert "kestrel sighting, numbers unsure" not in records


async def test_recall_matches_asked_together_are_each_look_up_asked_alone(store):
    """Messages for the rarest terms, notes (chronicles, versions) for all of them and each named day's messages,
    asked in one call: the same as each asked alone, in the same order; another channel's message or version, a
    stand-in, a hidden version in none; a look-up not asked for finds nothing."""
    seqs, key = await _corpus(store)
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await _chronicled(store, root, "gear", "We packed the camera")
    await store.add_record("Stelis", "channel", 2, "short_term", "a camera version, edited away")
    await store.add_record("Stelis", "channel", 2, "short_term", "kestrel and camera notes", hides=[1])
    await store.add_record("Stelis", "channel", 3, "short_term", "kestrel and camera in another channel")
    await store.add_record("Stelis", "channel", 2, "short_term", "the camera, seen again")
    places, now = (("channel", 2),), store.clock()
    days = [(now - 60, now + 60), (0.0, 1.0), (0.0, now + 60)]  # today, a day long ago, everything
    for terms, rarest, asked in ((["kestrel", "camera", "tower"], ["kestrel", "camera"], days), (["camera"], [], []),
                                 ([], [], days[:1])):
        found = await store.recall_matches(terms, rarest, "Stelis", (key,), places, 3, 2, asked, 4)
        assert found.messages == (await matched_messages(store, rarest, "Stelis", (key,), 3) if rarest else [])
        assert found.notes == (await matched_notes(store, terms, "Stelis", (key,), places, 2) if terms else [])
        assert found.days == [await said_between(store, "Stelis", (key,), *day, 4) for day in asked]
    assert len(found.days[0]) == 4 and all(m.scope_key == key for m in found.days[0])  # the newest four today
    camera = await store.recall_matches(["camera"], [], "Stelis", (key,), places, 3, 2)
    assert sorted(n.text for n in camera.notes) == [
        "We packed the camera", "kestrel and camera notes", "the camera, seen again"]
    found = await store.recall_matches(["kestrel"], ["kestrel"], "Stelis", (key,), places, 20, 5)
    assert {m.seq for m in found.messages} == _expected(seqs, "kestrel")  # not another channel's, nor a stand-in
    assert all(m.author_name == "mahe" and m.scope_key == key for m in found.messages) and found.days == []


async def test_an_erased_message_leaves_no_trace_and_is_not_recalled(store):
    _, key = await _corpus(store)
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await store.append(root.id, NewMessage("user", "my secret is quetzalcoatl", author_id=7, external_id=70))
    assert await store.traces("quetzalcoatl") == ["messages.content"]
    assert await store.purge(author_id=7, thread_ids=[root.id])
    await store.index_messages()
    assert await store.traces("quetzalcoatl") == []
    assert await matched_messages(store, ["quetzalcoatl"], "Stelis", (key,), 5) == []


async def test_saved_counts_keep_the_newest_and_a_purge_leaves_none_nor_lets_one_taken_before_it_in(store):
    """Recall's word counts (by hash) kept between starts: the newer count of a word wins; a purge empties them,
    and a count taken before it (an archive no larger than then), by any process, is never saved after."""
    assert await store.save_counts([(11, 3, 5), (-12, 1, 5)]) == 2
    assert await store.save_counts([(11, 2, 4)]) == 0  # older than the one kept
    assert await store.save_counts([(11, 4, 6)]) == 1
    assert await store.saved_counts([11, -12, 13]) == {11: (4, 6), -12: (1, 5)}
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    said, _ = await store.append(root.id, NewMessage("user", "my secret is quetzalcoatl", author_id=7, external_id=70))
    assert await store.purge(external_id=70)
    assert await store.saved_counts([11, -12]) == {}
    assert await store.save_counts([(11, 4, said.seq)]) == 0  # counted before the purge: it may hold the erased word
    assert await store.save_counts([(11, 3, said.seq + 1)]) == 1
    assert await store.saved_counts([11]) == {11: (3, said.seq + 1)}
    assert await store.save_counts([]) == 0 and await store.saved_counts([]) == {}
    assert await store.save_counts([(14, 1, said.seq + 9)], stale_below=said.seq + 2) == 1  # outgrown ones go
    assert await store.saved_counts([11, 14]) == {14: (1, said.seq + 9)}


# shared memory work: leases, fenced saves, process heartbeats


async def _due_channels(store: Store, n: int) -> list[int]:
    ids = []
    for i in range(n):
        root = await store.root_thread("Stelis", Scope.channel(1, 100 + i), 0.8)
        await store.append_counted(root, NewMessage("user", f"hello {i}"), Triggers(idle_seconds=0, threshold=1))
        ids.append(root.id)
    return ids


async def test_due_work_is_claimed_by_one_worker_until_released_or_its_lease_runs_out(backend):
    now = [10_000.0]
    store = await open_store(backend, clock=lambda: now[0])
    ids = await _due_channels(store, 6)
    now[0] += 1
    a = await store.claim_due(now[0], "a", 60, limit=4)
    b = await store.claim_due(now[0], "b", 60, limit=10)
    assert len(a) == 4 and {c.thread_id for c in a} | {c.thread_id for c in b} == set(ids)
    assert not {c.thread_id for c in a} & {c.thread_id for c in b}
    assert await store.claim_due(now[0], "c", 60, limit=10) == []  # all held
    assert await store.claim_due(now[0], "c", 60, limit=1, thread_id=ids[0]) == []
    await store.release_channel(a[0].thread_id, "b")  # not b's to release
    assert await store.claim_due(now[0], "c", 60, limit=10) == []
    await store.release_channel(a[0].thread_id, "a")
    assert [c.thread_id for c in await store.claim_due(now[0], "c", 60, limit=10)] == [a[0].thread_id]
    now[0] += 61  # a crashed worker's leases run out: another takes the work
    assert len(await store.claim_due(now[0], "d", 60, limit=10)) == 6
    await store.close()


async def test_workers_claiming_at_once_never_take_the_same_channel(backend):
    store = await open_store(backend, clock=lambda: 20_000.0)
    ids = await _due_channels(store, 40)
    claims = await asyncio.gather(*(store.claim_due(20_001.0, f"w{i}", 60, limit=7) for i in range(8)))
    taken = [c.thread_id for batch in claims for c in batch]
    assert sorted(taken) == sorted(ids)  # every channel once: 8 x 7 > 40, none twice
    await store.close()


async def test_a_save_over_work_another_worker_saved_first_is_refused(store):
    (thread_id,) = await _due_channels(store, 1)
    read = await store.memory_channel(thread_id)
    first = await store.save_short_term(read, "v1", 1, 1, 1, 1.0, TRIGGERS, {}, live=1)
    with pytest.raises(StaleUpdate):  # a slow worker read the same state before the first one saved
        await store.save_short_term(read, "v1 again", 1, 1, 1, 2.0, TRIGGERS, {}, live=1)
    saved = await store.memory_channel(thread_id)
    assert saved.long_term_pending == 1 and first.version == 1
    await store.save_long_term(saved, "merged", 1, 1, {}, 3.0, TRIGGERS)
    with pytest.raises(StaleUpdate):
        await store.save_long_term(saved, "merged again", 1, 1, {}, 4.0, TRIGGERS)
    versions = [(r.type, r.version) for t in ("short_term", "long_term")
                for r in await store.recent_records("Stelis", "channel", 100, t, 10)]
    assert versions == [("short_term", 1), ("long_term", 1)]
    assert (await store.memory_channel(thread_id)).long_term_pending == 0


async def test_a_version_is_not_saved_over_a_range_someone_was_erased_from_even_mid_purge(store, monkeypatch):
    """forget-me rewrites the versions covering what it erased: a version written from the erased words and saved
    after that look-up would keep them. A purge that committed first makes the save refuse; one in flight (its
    threads marked, not committed) holds the save until it commits, and then the save refuses too."""
    root = await store.root_thread("Stelis", Scope.channel(1, 100), 0.8)
    said = [(await store.append_counted(root, NewMessage("user", f"m{i}", external_id=700 + i), TRIGGERS))[0]
            for i in range(5)]
    read = await store.memory_channel(root.id)
    await store.purge(external_id=700)
    with pytest.raises(StaleUpdate):  # written from m0..m4; m0 went before the save
        await store.save_short_term(read, "m0 and the rest", said[0].seq, said[-1].seq, 5, 1.0, TRIGGERS, {}, live=5)
    backend = sys.modules[type(store).__module__]
    revise, marked, release = backend._revise, asyncio.Event(), asyncio.Event()

    async def paused(con, thread_ids):  # the purge stops after marking its threads, before it commits
        await revise(con, thread_ids)
        marked.set()
        await release.wait()

    monkeypatch.setattr(backend, "_revise", paused)
    purging = asyncio.create_task(store.purge(external_id=702))
    await marked.wait()
    saving = asyncio.create_task(
        store.save_short_term(read, "m1 to m4", said[1].seq, said[-1].seq, 4, 1.0, TRIGGERS, {}, live=4))
    await asyncio.sleep(0.3)
    assert not saving.done()  # held behind the purge
    release.set()
    await purging
    with pytest.raises(StaleUpdate):
        await saving
    assert await store.recent_records("Stelis", "channel", 100, "short_term", 10) == []
    saved = await store.save_short_term(read, "m1, m3, m4", said[1].seq, said[-1].seq, 3, 2.0, TRIGGERS, {}, live=3)
    assert saved.version == 1  # written again from what is left, it is kept


async def test_a_sweep_takes_only_threads_whose_process_stopped_beating(backend):
    now = [30_000.0]
    store = await open_store(backend, clock=lambda: now[0])
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    opened = {}
    for owner in ("alive", "gone", None):
        store.owner = owner
        opened[owner], _ = await store.create_thread(root, kind="stelis", label=str(owner), window_ratio=0.5,
                                                     chronicle_prompt=None, run_id=None, anchor=None)
    await store.beat("gone")
    now[0] += 100
    await store.beat("alive")
    stale = {t.id for t in await store.active_internal_threads(stale_before=now[0] - 90)}
    assert stale == {opened["gone"].id, opened[None].id}
    assert len(await store.active_internal_threads()) == 3  # no rule given: every candidate
    await store.close()


async def test_rows_imported_with_their_ids_are_continued_above(store):
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await store.append_many(root.id, [NewMessage("user", "imported")], seqs=[500], created=[1.0], tokens=[3])
    newer, _ = await store.append(root.id, NewMessage("user", "after the import"))
    assert newer.seq > 500
    assert [m.token_count for m in await store.tail(root.id, 2)] == [3, count_tokens("after the import")]


async def test_logins_of_processes_sharing_a_database_are_five_seconds_apart(backend):
    from bot.identify import IDENTIFY_SECONDS, IdentifyGate

    now = [50_000.0]
    store = await open_store(backend, clock=lambda: now[0])

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        await asyncio.sleep(0)

    logins: list[tuple[float, str]] = []
    claim = store.claim

    async def timed_claim(key: str, owner: str, lease: float) -> bool:
        at = now[0]  # the moment the store reads for the lease
        taken = await claim(key, owner, lease)
        if taken:
            logins.append((at, owner))
        return taken

    store.claim = timed_claim

    async def login(gate: IdentifyGate, shard: int) -> None:
        await gate.wait(shard)

    a, b = IdentifyGate(store, "process-a", sleep), IdentifyGate(store, "process-b", sleep)
    await asyncio.gather(login(a, 0), login(b, 1), login(a, 2), login(b, 3))
    times = [t for t, _ in logins]
    assert len({who.rsplit(":", 1)[0] for _, who in logins}) == 4
    assert all(later - earlier >= IDENTIFY_SECONDS for earlier, later in itertools.pairwise(times))
    await store.close()


async def test_what_was_said_in_a_span_of_time_is_found_within_the_visible_conversations(backend):
    now = [1_700_000_000.0]
    store = await open_store(backend, clock=lambda: now[0])
    seen = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    hidden = await store.root_thread("P", Scope.channel(1, 3), 0.8)
    for day, text in enumerate(["before", "on the day, early", "on the day, late", "after"]):
        now[0] = 1_700_000_000.0 + day * 43_200  # half a day apart: the middle two share [start, end)
        await store.append(seen.id, NewMessage("user", text, author_name="ana"))
        await store.append(hidden.id, NewMessage("user", f"{text} (elsewhere)", author_name="bo"))
    erased, _ = await store.append(seen.id, NewMessage("user", "erased later", external_id=99))
    await store.delete_message(99)
    start, end = 1_700_000_000.0 + 43_200, 1_700_000_000.0 + 2 * 43_200 + 1
    found = await said_between(store, "P", (seen.scope_key,), start, end, 10)
    assert [m.content for m in found] == ["on the day, late", "on the day, early"]  # newest first, this one only
    assert (await said_between(store, "P", (seen.scope_key,), start, end, 1))[0].content == "on the day, late"
    assert await said_between(store, "Q", (seen.scope_key,), start, end, 10) == []
    assert erased.seq not in {m.seq for m in await said_between(store, "P", (seen.scope_key,), 0, 2e9, 50)}
    await store.close()


async def test_a_days_look_up_leaves_out_what_the_request_shows_and_reaches_further_back(backend):
    """A long day's newest messages are in the window; asked about that day, recall reads the ones before them
    (they used to fill the look-up's rows only to be dropped), and another conversation's as before."""
    now = [1_700_000_000.0]
    store = await open_store(backend, clock=lambda: now[0])
    here = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    there = await store.root_thread("P", Scope.channel(1, 3), 0.8)
    said = []
    for n in range(8):
        now[0] += 60
        said.append((await store.append(here.id, NewMessage("user", f"here {n}", author_name="ana")))[0])
        now[0] += 60
        await store.append(there.id, NewMessage("user", f"there {n}", author_name="bo"))
    keys, day = (here.scope_key, there.scope_key), (1_700_000_000.0, 1_700_086_400.0)
    whole_from = (here.id, said[5].seq)  # the request shows "here 5" to "here 7"
    found = [m.content for m in await said_between(store, "P", keys, *day, 6, whole_from)]
    assert found == ["there 7", "there 6", "there 5", "there 4", "here 4", "there 3"]
    assert [m.content for m in await said_between(store, "P", (here.scope_key,), *day, 3, whole_from)] == [
        "here 4", "here 3", "here 2"]
    assert [m.content for m in await said_between(store, "P", (here.scope_key,), *day, 2)] == ["here 7", "here 6"]
    # what it leaves out only narrows what may be seen: another conversation named there is not let in
    outside = await said_between(store, "P", (here.scope_key,), *day, 20, (there.id, 0))
    assert [m.content for m in outside] == [f"here {n}" for n in reversed(range(8))]
    await store.close()


async def test_a_threads_revision_moves_with_a_change_to_its_stored_messages_and_no_other(store):
    """Edits, erasures, an anchor's final form and an import below the newest message move the revision of the
    thread they changed, in the same write, and it is read with the thread row; another thread's stays."""
    here = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    there = await store.root_thread("P", Scope.channel(1, 3), 0.8)
    await store.append(here.id, NewMessage("user", "the kestrel nests at the pier", author_id=7, external_id=71))
    await store.append(there.id, NewMessage("user", "the heron nests upriver", author_id=8, external_id=81))
    await store.append(here.id, NewMessage("user", "a new message changes nothing stored", external_id=72))
    assert ((await store.thread(here.id)).revision, (await store.thread(there.id)).revision) == (0, 0)

    await store.edit_message(71, "the kestrel nests at the lighthouse")
    assert ((await store.thread(here.id)).revision, (await store.thread(there.id)).revision) == (1, 0)
    await store.edit_message(999, "no such message")
    assert (await store.thread(here.id)).revision == 1

    await store.purge(author_id=8, thread_ids=[there.id])
    assert ((await store.thread(here.id)).revision, (await store.thread(there.id)).revision) == (1, 1)

    child, anchor = await store.create_thread(here, kind="stelis", label="a side task", window_ratio=0.5,
                                              chronicle_prompt=None, run_id="r1", anchor=NewMessage("system", "⟦…⟧"))
    assert (await store.thread(here.id)).revision == 1  # a new anchor is a new message, not a change
    from dataclasses import replace
    await store.close_thread(replace(child, status="completed", chronicle_summary="done", completed_at=1.0),
                             {"stelis_thread_id": child.id, "final": True}, 5)
    assert (await store.thread(here.id)).revision == 2  # its anchor, in the parent, took its final form
    assert (await store.thread(child.id)).revision == 0

    await store.append_many(there.id, [NewMessage("user", "imported from before")], seqs=[anchor.seq + 100])
    assert (await store.thread(there.id)).revision == 2


async def test_model_usage_adds_up_per_day_server_and_model_and_reads_back_by_server(store):
    await store.add_usage("P", [(1, ModelUsage("2026-11-23", "claude-haiku-5-5", 1, 100, 10, 0, 50))])
    await store.add_usage("P", [])  # nothing to add: no statement
    for _ in range(2):
        await store.add_usage("P", [(1, ModelUsage("2026-11-24", "claude-sonnet-5-5", 1, 1_000, 200, 4_000, 0))])
    await store.add_usage("P", [(1, ModelUsage("2026-11-24", "claude-sonnet-5-5", 2, 2_000, 400, 8_000, 0)),
                                (1, ModelUsage("2026-11-24", "claude-haiku-5-5", 1, 7, 7, 7, 7)),  # several in one
                                (2, ModelUsage("2026-11-24", "claude-sonnet-5-5", 1, 9, 9, 9, 9))])  # another server
    await store.add_usage("Q", [(1, ModelUsage("2026-11-24", "claude-sonnet-5-5", 1, 9, 9, 9, 9))])  # another persona
    rows = await store.usage_since("P", 1, "2026-11-23")
    assert [(r.day, r.model, r.calls, r.input_tokens, r.output_tokens, r.cache_read, r.cache_write) for r in rows] == [
        ("2026-11-23", "claude-haiku-5-5", 1, 100, 10, 0, 50),
        ("2026-11-24", "claude-haiku-5-5", 1, 7, 7, 7, 7),
        ("2026-11-24", "claude-sonnet-5-5", 4, 4_000, 800, 16_000, 0)]
    assert [r.day for r in await store.usage_since("P", 1, "2026-11-24")] == ["2026-11-24"] * 2
    assert [r.calls for r in await store.usage_since("P", 2, "2026-11-24")] == [1]


async def test_the_newest_versions_of_several_scopes_are_read_in_one_statement_as_each_alone(store):
    """Issue 32: a prompt's memory layers are read at once; each asked scope gets what recent_records gives it,
    as the database stood at a record and without the versions an edit hid."""
    for n in range(1, 5):
        await store.add_record("Stelis", "channel", 100, "short_term", f"a{n}", version=n)
    first_long = await store.add_record("Stelis", "channel", 100, "long_term", "a long")
    await store.add_record("Stelis", "channel", 200, "short_term", "b1")
    await store.add_record("Stelis", "workspace", 1, "long_term", "server")
    await store.add_record("Other", "channel", 100, "short_term", "another persona's")
    edited = await store.add_record("Stelis", "channel", 100, "long_term", "a long, edited", hides=[first_long.id])
    later = await store.add_record("Stelis", "channel", 200, "short_term", "b2")
    asked = [("channel", 100, "short_term", 3), ("channel", 100, "long_term", 1), ("channel", 300, "short_term", 2),
             ("channel", 200, "short_term", 5), ("workspace", 1, "long_term", 1)]
    for as_of in (None, edited.id):
        together = await store.newest_records("Stelis", asked, as_of)
        alone = [await store.recent_records("Stelis", *ask, as_of=as_of) for ask in asked]
        assert together == alone
    found = await store.newest_records("Stelis", asked, edited.id)
    assert [[r.content for r in each] for each in found] == [
        ["a2", "a3", "a4"], ["a long, edited"], [], ["b1"], ["server"]]
    assert [r.id for r in (await store.newest_records("Stelis", asked))[3]][-1] == later.id
    assert await store.newest_records("Stelis", []) == []


async def test_a_summary_written_from_messages_one_of_which_changed_since_is_refused_whole(store):
    """set_window and close_thread with the revision their summary was read at: an edit or erasure since voids it,
    and nothing of it is written; without a revision (bookkeeping, a reset) set_window always writes."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    first, _ = await store.append(root.id, NewMessage("user", "hello", external_id=41))
    read = await store.thread(root.id)
    await store.edit_message(41, "hello again")
    with pytest.raises(StaleSummary):
        await store.set_window(root.id, revision=read.revision, window_start_seq=first.seq, window_summary="said")
    assert (await store.thread(root.id)).window_summary is None
    now = await store.thread(root.id)
    written = await store.set_window(root.id, revision=now.revision, window_summary="said")
    assert written.window_summary == "said"
    assert (await store.set_window(root.id, memory_as_of=3)).memory_as_of == 3
    with pytest.raises(KeyError):
        await store.set_window(root.id + 999, memory_as_of=3)
    ended = replace(read, status="completed", chronicle_summary="hello, said", completed_at=1.0)
    with pytest.raises(StaleSummary):  # a chronicle read before the edit
        await store.close_thread(ended, None, 0, revision=read.revision)
    assert (await store.thread(root.id)).status == "active"


async def test_a_purge_records_what_it_erased_until_its_memory_is_rewritten(store):
    """Written in the purge's own transaction, so a rewrite cut short is known at the next start."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    mine, _ = await store.append(root.id, NewMessage("user", "my passport number", author_id=7, external_id=51))
    await store.append(root.id, NewMessage("user", "not mine", author_id=8))
    assert await store.erasures() == {}
    assert await store.purge(author_id=9, thread_ids=[root.id]) == {}  # nothing erased, nothing pending
    assert await store.erasures() == {}
    erased = await store.purge(author_id=7, thread_ids=[root.id])
    assert erased == {root.id: {mine.seq}} and await store.erasures() == erased
    await store.rewritten(erased)
    assert await store.erasures() == {}


async def test_match_counts_of_no_word_is_the_archives_size(store):
    """A query of short words only asks for the size alone (PostgreSQL refused the statement: a parameter too many)."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    said, _ = await store.append(root.id, NewMessage("user", "ok so we go"))
    await store.index_messages()
    assert await store.match_counts([], 500) == (said.seq, {})
    total, counted = await store.match_counts(["ok so"], 500)
    assert total == said.seq and set(counted) == {"ok so"}


async def test_a_windows_bookkeeping_is_stored_with_its_threads_next_message(store, monkeypatch):
    """No write of its own before the model is asked: shown by an opening at once, stored with the reply."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    asked, _ = await store.append(root.id, NewMessage("user", "what is on today?"))
    noted = store.note_window(await store.thread(root.id), memory_as_of=4, window_cached_after=asked.seq)
    assert (noted.memory_as_of, noted.window_cached_after) == (4, asked.seq)
    shown = (await store.opening(root.id, None, 0)).thread
    assert (shown.memory_as_of, shown.window_cached_after) == (4, asked.seq)
    assert (await store.thread(root.id)).memory_as_of is None  # nothing written yet
    monkeypatch.setattr(store, "_append", _refused)  # the database refuses the reply: the bookkeeping waits
    with pytest.raises(StoreError):
        await store.append(root.id, NewMessage("assistant", "lost"))
    monkeypatch.undo()
    assert (await store.opening(root.id, None, 0)).thread.memory_as_of == 4
    await store.append_counted(root, NewMessage("assistant", "the standup at ten"), Triggers(7_200, 50))
    stored = await store.thread(root.id)
    assert (stored.memory_as_of, stored.window_cached_after) == (4, asked.seq)
    assert (await store.opening(root.id, None, 0)).thread == stored


async def test_bookkeeping_noted_before_a_thread_changed_is_neither_shown_nor_stored(store):
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    await store.append(root.id, NewMessage("user", "my address", author_id=7, external_id=61))
    store.note_window(await store.thread(root.id), memory_as_of=9)
    await store.purge(external_id=61)  # its messages changed: what was planned on them is void
    assert (await store.opening(root.id, None, 0)).thread.memory_as_of is None
    await store.append(root.id, NewMessage("user", "hello"))
    assert (await store.thread(root.id)).memory_as_of is None
    said, _ = await store.append(root.id, NewMessage("user", "my phone number", author_id=7, external_id=62))
    store.note_window(await store.thread(root.id), window_cached_after=said.seq)
    await store.purge(external_id=62)
    store.note_window(await store.thread(root.id), memory_as_of=10)  # noted anew: nothing of before comes along
    assert (await store.opening(root.id, None, 0)).thread.window_cached_after is None


async def test_a_cut_at_the_same_revision_carries_what_was_noted_and_a_reset_drops_it(store):
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    first, _ = await store.append(root.id, NewMessage("user", "hello"))
    thread = store.note_window(await store.thread(root.id), memory_as_of=5, window_cached_after=first.seq)
    trimmed = await store.set_window(root.id, revision=thread.revision, window_trims=1)  # a trim keeps the cache's
    assert (trimmed.memory_as_of, trimmed.window_cached_after, trimmed.window_trims) == (5, first.seq, 1)
    store.note_window(trimmed, memory_as_of=6)
    reset = await store.set_window(root.id, window_start_seq=None, memory_as_of=None)  # an erasure's reset wins
    assert reset.memory_as_of is None
    await store.append(root.id, NewMessage("user", "again"))
    assert (await store.thread(root.id)).memory_as_of is None
    await store.append(root.id, NewMessage("user", "my card number", external_id=71))
    store.note_window(await store.thread(root.id), memory_as_of=7)
    await store.purge(external_id=71)  # a cut planned after the erasure does not bring back what was noted before
    changed = await store.thread(root.id)
    assert (await store.set_window(root.id, revision=changed.revision, window_trims=2)).memory_as_of is None


async def _refused(*args, **kwargs):
    raise StoreError("the database is gone")


async def test_a_visible_place_is_matched_whole_never_as_the_start_of_another(store):
    """Channel 1 sees itself, not channel 10 or 11, whose keys and places begin with its own (recall's visible
    places are sets of whole keys on every backend)."""
    places = [Scope.channel(1, 1), Scope.channel(1, 10), Scope.channel(1, 11)]
    roots = [await store.root_thread("Stelis", place, 0.8) for place in places]
    for root, place in zip(roots, places, strict=True):
        await store.append(root.id, NewMessage("user", f"the kestrel of {place.key}"))
        await store.add_record("Stelis", "channel", place.channel_id, "short_term", f"kestrel notes of {place.key}")
    await store.index_messages()
    here, day = (roots[0].scope_key,), (0.0, store.clock() + 1)
    found = [m.content for m in await matched_messages(store, ["kestrel"], "Stelis", here, 10)]
    assert found == [f"the kestrel of {places[0].key}"]
    assert [m.content for m in await said_between(store, "Stelis", here, *day, 10)] == found
    assert [m.content for m in await store.messages_since("Stelis", here, 0.0, 10)] == found
    assert [m.content for m in await store.scan_messages("kestrel", "Stelis", here, 1_000, 10)] == found
    notes = await matched_notes(store, ["kestrel"], "Stelis", here, (("channel", 1),), 10)
    assert [n.text for n in notes] == [f"kestrel notes of {places[0].key}"]


async def test_an_opening_is_the_thread_with_its_newest_live_messages_from_its_window_or_after_a_seq(store):
    """What an assembly reads first, in one round trip: the thread as noted, and a page of its
    live messages newest first, from its window's start or after a given message; never an erased one, nor another
    thread's."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    said = [(await store.append(root.id, NewMessage("user", f"m{i}", external_id=700 + i)))[0] for i in range(6)]
    other = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    await store.append(other.id, NewMessage("user", "another channel"))
    await store.purge(external_id=704)
    await store.add_record("P", "channel", 1, "long_term", "a fact")
    opened = await store.opening(root.id, None, 3)
    bare = await store.opening(root.id, None, 0)  # no page asked: the thread and the newest record alone
    assert (opened.thread, opened.newest_record) == (bare.thread, bare.newest_record) and bare.messages == []
    assert [m.content for m in opened.messages] == ["m5", "m3", "m2"] and not opened.whole
    since = await store.opening(root.id, said[1].seq, 10)
    assert [m.content for m in since.messages] == ["m5", "m3", "m2"] and since.whole and since.after == said[1].seq
    await store.set_window(root.id, window_start_seq=said[3].seq)
    from_start = await store.opening(root.id, None, 10)
    assert [m.content for m in from_start.messages] == ["m5", "m3"] and from_start.after == said[3].seq - 1
    assert (await store.opening(root.id, None, 0)).messages == []
    store.note_window(from_start.thread, memory_as_of=opened.newest_record)  # shown as an opening shows it
    assert (await store.opening(root.id, None, 1)).thread.memory_as_of == opened.newest_record
    with pytest.raises(KeyError):
        await store.opening(999_999, None, 5)


async def test_an_opening_brings_the_threads_own_memory_as_newest_records_reads_it(store):
    """With versions asked for, the thread's own memory comes with it (records.own_memory, its places taken from
    its own row): exactly what newest_records gives for them, never another persona's, channel's or server's, nor a
    hidden version."""
    channel = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    discord = await store.create_thread(channel, kind="stelis", label="a Discord thread", window_ratio=0.8,
                                        chronicle_prompt=None, run_id=None, discord_thread_id=77, anchor=None)
    discord = discord[0]
    for n in range(4):
        await store.add_record("P", "channel", 2, "short_term", f"version {n}")
    old = await store.add_record("P", "channel", 2, "long_term", "the old long-term memory")
    await store.add_record("P", "channel", 2, "long_term", "the long-term memory", hides=[old.id])
    await store.add_record("P", "thread", 77, "short_term", "the Discord thread's version")
    await store.add_record("P", "workspace", 1, "long_term", "the server's memory")
    await store.add_record("Q", "channel", 2, "short_term", "another persona's")
    await store.add_record("P", "channel", 3, "short_term", "another channel's")
    await store.add_record("P", "workspace", 9, "long_term", "another server's")
    for thread in (channel, discord):
        opened = await store.opening(thread.id, None, 5, versions=2)
        assert opened.memory_asked == own_memory(thread, thread, 2)
        assert opened.memory == await store.newest_records("P", opened.memory_asked)
        said = [r.content for part in opened.memory for r in part]
        assert said[:3] == ["the long-term memory", "version 2", "version 3"]
        assert said[3:] == (["the Discord thread's version"] if thread is discord else []) + ["the server's memory"]
    assert (await store.opening(channel.id, None, 5)).memory == []  # not asked for


async def test_a_purge_starts_afresh_the_windows_of_its_threads_and_their_ancestors_alone(store):
    """What stands in a window for older messages (its rolling summary, a trim's bridge) may hold the erased words:
    it goes in the purge's own transaction, so nothing reads it between the purge and the rewrite."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    child, _ = await store.create_thread(root, kind="stelis", label="a side task", window_ratio=0.5,
                                         chronicle_prompt=None, run_id="r", anchor=NewMessage("system", "anchor"))
    other = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    said, _ = await store.append(child.id, NewMessage("user", "my passport number", author_id=7))
    for thread in (root, child, other):
        await store.set_window(thread.id, window_start_seq=said.seq, window_summary="a summary of it",
                               window_summary_from=1, window_summary_to=said.seq, window_gap_from=1, window_gap_to=2,
                               window_bridge="a bridge over it", window_trims=1, memory_as_of=3)
    await store.purge(author_id=7, thread_ids=[child.id])
    for thread in (root, child):
        found = await store.thread(thread.id)
        assert (found.window_start_seq, found.window_summary, found.window_summary_from, found.window_bridge,
                found.window_gap_to, found.window_trims, found.memory_as_of) == (None, None, None, None, None, 0, None)
    kept = await store.thread(other.id)
    assert (kept.window_summary, kept.window_bridge, kept.window_trims) == ("a summary of it", "a bridge over it", 1)


async def test_a_messages_new_metadata_moves_its_threads_revision_alone(store):
    """A copied anchor written again (forget-me) changes what a reader of the thread saw: a version read before it
    is refused where it is saved against the revision."""
    root = await store.root_thread("P", Scope.channel(1, 1), 0.8)
    other = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    said, _ = await store.append(root.id, NewMessage("system", "an anchor", metadata={"stelis_thread_id": 9}))
    before, untouched = (await store.thread(root.id)).revision, (await store.thread(other.id)).revision
    await store.set_metadata(said.seq, {"stelis_thread_id": 9, "final": True})
    assert (await store.thread(root.id)).revision == before + 1
    assert (await store.thread(other.id)).revision == untouched
    assert (await store.message_by_seq(said.seq)).metadata["final"] is True

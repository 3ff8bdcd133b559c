"""Recall (DESIGN.md section 5): full-text look-up of the archive, under the visibility rules of memory sharing."""

import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory import recall
from memory.backends import open_store
from memory.budget import MOST_ASKED, MOST_RECALL
from memory.records import NewMessage, Scope

GENERAL = Scope.channel(10, 100)
RANDOM = Scope.channel(10, 101)
SECRET = Scope.channel(10, 102)
OTHER_GUILD = Scope.channel(20, 200)
DM = Scope.dm(7, 300)
PLACES = {GENERAL: ("general", True), RANDOM: ("random", True), SECRET: ("secret", False),
          OTHER_GUILD: ("elsewhere", True), DM: (None, None)}


@pytest.fixture
async def engine(make_config, database):
    e = await Engine.open(make_config(snapshots={"interval_seconds": 0}, database=database), OfflineLLM())
    for scope, (name, public) in PLACES.items():
        await e.admin.describe(scope, name=name, public=public)
    yield e
    await e.close()


async def places_found(engine, scope, query):
    return {hit.where for hit in await engine.archive.recall(scope, query)}


async def test_recall_stays_inside_what_the_conversation_may_see(engine):
    for i, scope in enumerate(PLACES):
        await engine.conversations.hear(scope, f"the zephyrine lantern was left in room {i}", author_name="ana",
                                        external_id=i + 1)
        await engine.admin.edit(scope, f"ana keeps a quillwort notebook ({i})")
        for n in range(3):  # other words, so the planted ones are rare
            await engine.conversations.hear(scope, f"plain chatter number {n} about the weather", author_name="ben")

    general = await engine.archive.recall(GENERAL, "where is the zephyrine lantern?")
    assert {h.text for h in general if h.kind == "message"} == {
        "the zephyrine lantern was left in room 0", "the zephyrine lantern was left in room 1"}
    assert {h.where for h in general} == {"this conversation", "#random"}
    memories = " ".join(h.text for h in await engine.archive.recall(GENERAL, "quillwort notebook"))
    assert "(0)" in memories and "(1)" in memories
    assert "(2)" not in memories and "(3)" not in memories and "(4)" not in memories

    # A DM, another server and a private channel reach nothing outside themselves.
    assert {h.text for h in await engine.archive.recall(DM, "zephyrine lantern")} == {
        "the zephyrine lantern was left in room 4"}
    assert {h.text for h in await engine.archive.recall(OTHER_GUILD, "zephyrine lantern")} == {
        "the zephyrine lantern was left in room 3"}
    for scope in (GENERAL, RANDOM, OTHER_GUILD, DM):
        texts = " ".join(h.text for h in await engine.archive.recall(scope, "zephyrine lantern quillwort"))
        assert "room 2" not in texts and "(2)" not in texts


async def test_a_channel_that_becomes_private_stops_being_recalled(engine):
    await engine.conversations.hear(RANDOM, "the zephyrine lantern is under the stairs", author_name="ana")
    await engine.conversations.hear(GENERAL, "nothing to see", author_name="ben")
    assert await places_found(engine, GENERAL, "zephyrine lantern") == {"#random"}
    await engine.admin.describe(RANDOM, public=False)  # what recall may see is cached: this must reach it
    assert await places_found(engine, GENERAL, "zephyrine lantern") == set()
    await engine.admin.share(RANDOM, True)
    assert await places_found(engine, GENERAL, "zephyrine lantern") == {"#random"}


async def test_a_new_public_channel_is_recalled_from_its_first_message(engine):
    assert await places_found(engine, GENERAL, "zephyrine lantern") == set()  # the visibility is cached now
    late = Scope.channel(10, 103)
    await engine.conversations.hear(late, "the zephyrine lantern went to the attic", author_name="ana")
    await engine.admin.describe(late, name="attic", public=True)
    assert await places_found(engine, GENERAL, "zephyrine lantern") == {"#attic"}


async def test_the_index_follows_edits_and_deletes(engine):
    await engine.conversations.hear(GENERAL, "my bicycle is a turquoise roadster", author_name="ana", external_id=500)
    await engine.conversations.hear(GENERAL, "my kettle is a copper antique", author_name="ana", external_id=501)
    assert [h.key for h in await engine.archive.recall(GENERAL, "turquoise roadster")]

    await engine.forgetting.edit_message(500, "my bicycle is a crimson tandem")
    assert await engine.archive.recall(GENERAL, "turquoise roadster") == []
    assert [h.text for h in await engine.archive.recall(GENERAL,
                                                        "crimson tandem")] == ["my bicycle is a crimson tandem"]

    await engine.forgetting.delete_message(501)
    assert await engine.archive.recall(GENERAL, "copper antique kettle") == []


async def test_unsegmented_and_short_queries_are_found(engine):
    await engine.conversations.hear(GENERAL, "昨日は京都で抹茶のパフェを食べました", author_name="mahe")
    await engine.conversations.hear(GENERAL, "猫が好き", author_name="mahe")
    await engine.conversations.hear(GENERAL, "the weather is nice", author_name="ben")
    found = [h.text for h in await engine.archive.recall(GENERAL, "抹茶のパフェはどこ？")]
    assert found == ["昨日は京都で抹茶のパフェを食べました"]
    assert "猫が好き" in [h.text for h in await engine.archive.recall(GENERAL, "猫")]  # one kanji: scanned, not indexed


async def test_preview_puts_recall_in_the_tail_and_stores_nothing(make_config):
    e = await Engine.open(make_config(llm={"context_tokens": 2048, "max_output_tokens": 256},
                                      snapshots={"interval_seconds": 0}), OfflineLLM())
    await e.conversations.hear(GENERAL, "my sister Odalys lives in Valparaiso and breeds alpacas", author_name="ana")
    for i in range(120):  # push the fact far out of a 2k window
        await e.conversations.hear(GENERAL, f"small talk {i} " + "and so on " * 10, author_name="ben")
    thread = await e.stelis.root(GENERAL)
    before = (await e.store.count_messages(thread.id), await e.store.thread(thread.id))

    assembly = await e.conversations.preview(GENERAL, "where does Odalys live?", author_name="carl")
    blocks = [b.text for t in assembly.request.turns for b in t.blocks]
    tail = next(b for b in blocks if b.startswith("[Recall:"))
    assert "Valparaiso" in tail and "ana" in tail
    summary = next(i for i, b in enumerate(blocks) if b.startswith("[Memory Summary]"))
    assert "Valparaiso" not in " ".join(b for b in blocks[summary + 1:] if not b.startswith("[Recall:"))
    question = max(i for i, b in enumerate(blocks) if b.endswith("where does Odalys live?"))
    flat = [b for t in assembly.request.turns for b in t.blocks]
    last_breakpoint = max(i for i, b in enumerate(flat) if b.cache)
    assert question == last_breakpoint  # the question closes the cached prefix ...
    assert blocks.index(tail) > last_breakpoint  # ... and recall sits after it: the cache is untouched

    after = (await e.store.count_messages(thread.id), await e.store.thread(thread.id))
    assert after == before  # neither the question nor a window cut was stored
    await e.close()


async def test_chronicles_of_finished_stelis_threads_are_recalled_with_their_label(engine):
    run = await engine.stelis.new_run(GENERAL)
    child = await engine.stelis.start(run, "budget review")
    await engine.conversations.hear(GENERAL, "the marmalade fund ends at 4200 credits", author_name="ana",
                                    thread_id=child.id)
    await engine.stelis.end(run)
    hits = [h for h in await engine.archive.recall(GENERAL, "marmalade fund") if h.kind == "chronicle"]
    assert hits and "marmalade" in hits[0].text and hits[0].who == 'chronicle of Stelis thread "budget review"'
    assert not [h for h in await engine.archive.recall(OTHER_GUILD, "marmalade fund") if h.kind == "chronicle"]


def test_a_long_text_is_judged_by_its_excerpt():
    from memory.recall import Hit, rank

    filler = " ".join(["we checked the build log again"] * 40)
    scattered = Hit("message", 1, f"odalys {filler} valparaiso {filler} alpacas", 0.0, "bot", "here", 0.0)
    dense = Hit("message", 2, f"{filler} odalys moved to valparaiso with the alpacas {filler}", 0.0, "ana", "here", 0.0)
    weights = {"odalys": 2.0, "valparaiso": 2.0, "alpacas": 2.0, "sister": 2.0}
    ranked = rank([scattered, dense], weights)
    assert [h.key for h in ranked] == [2]  # one word of four in any stretch of the scattered one is too little
    assert "odalys moved to valparaiso" in ranked[0].text and len(ranked[0].text) <= 402


async def test_a_reply_may_leave_its_newest_messages_unindexed_but_still_counts_their_words(store):
    from memory import recall
    from memory.records import NewMessage

    root = await store.root_thread("Stelis", GENERAL, 0.8)
    for i in range(5):
        await store.append(root.id, NewMessage("user", f"the quokka census, day {i}"))
    await store.index_messages()
    for i in range(3):
        await store.append(root.id, NewMessage("user", f"another quokka sighting {i}"))
    seen = await recall.visibility(store, root)
    frequencies = recall.Frequencies()
    await recall.search(store, seen, "how many quokka?", recall.Shown(), frequencies=frequencies, unindexed_ok=3)
    batched = type(store).__name__ == "SqliteStore"  # PostgreSQL's trigram index follows every row as it lands
    assert store.unindexed == (3 if batched else 0)  # SQLite: the three newest wait, no write on the reply path
    assert (await frequencies.counts(store, ["quokka"], store.unindexed_texts()))["quokka"] == 8
    await recall.search(store, seen, "how many quokka?", recall.Shown(), frequencies=frequencies, unindexed_ok=2)
    assert store.unindexed == 0  # more than the window holds: indexed first


def _message_terms_looked_up(store) -> list[list[str]]:
    """Each look-up's words among messages, as the store is asked from now on."""
    looked_up: list[list[str]] = []
    matches = store.recall_matches

    async def recall_matches(terms, message_terms, *args, **kwargs):
        looked_up.append(list(message_terms))
        return await matches(terms, message_terms, *args, **kwargs)

    store.recall_matches = recall_matches
    return looked_up


async def test_a_word_only_the_request_shows_is_not_looked_up_among_messages_unless_its_count_may_be_stale(store):
    """Counted just now, a word whose every match is a message the request shows (said for the first time: a name,
    a number) has no other message to be found in, and is not looked up among them; a count kept from before may
    miss a message said since, so that word is looked up and the message found."""
    root = await store.root_thread("Stelis", GENERAL, 0.8)
    for i in range(10):  # other words, so the new ones are rare
        await store.append(root.id, NewMessage("user", f"plain chatter number {i} about the weather"))
    said, _ = await store.append(root.id, NewMessage("user", "I adopted a quokka named Biscuit"))
    await store.index_messages()
    looked_up = _message_terms_looked_up(store)
    seen, frequencies = await recall.visibility(store, root), recall.Frequencies()
    shown = recall.Shown({said.seq}, texts=(said.content,))
    assert await recall.search(store, seen, said.content, shown, recall.QUESTION, frequencies=frequencies) == []
    assert looked_up == [[]]  # quokka, biscuit, adopted: each in the shown message alone

    later, _ = await store.append(root.id, NewMessage("user", "the quokka ate all the biscuits"))
    hits = await recall.search(store, seen, "what does the quokka eat?", shown, recall.QUESTION,
                               frequencies=frequencies)  # quokka's count (one) kept: the archive grew too little
    assert "quokka" in looked_up[-1] and [h.key for h in hits if h.kind == "message"] == [later.seq]


async def test_a_word_said_also_where_the_conversation_cannot_see_is_looked_up_and_what_is_there_stays_there(store):
    """The counts are the whole archive's: a word the request shows that was also said in a channel this
    conversation cannot see is looked up (its count is more than the request holds), and finds nothing there."""
    here = await store.root_thread("Stelis", GENERAL, 0.8)
    secret = await store.root_thread("Stelis", SECRET, 0.8)
    for i in range(10):
        await store.append(here.id, NewMessage("user", f"plain chatter number {i} about the weather"))
    await store.append(secret.id, NewMessage("user", "the quokka plan is in the locked drawer"))
    said, _ = await store.append(here.id, NewMessage("user", "has anyone seen a quokka?"))
    await store.index_messages()
    looked_up = _message_terms_looked_up(store)
    seen = await recall.visibility(store, here)
    hits = await recall.search(store, seen, said.content, recall.Shown({said.seq}, texts=(said.content,)),
                               recall.QUESTION, frequencies=recall.Frequencies())
    assert looked_up == [["quokka"]]
    assert not [h for h in hits if "drawer" in h.text]


async def test_a_new_discord_thread_joins_what_recall_may_see_at_its_first_message(engine):
    root = await engine.stelis.root(GENERAL)
    visibilities = engine.assembler.visibilities
    assert not any(scope == "thread" for scope, _ in (await visibilities.of(engine.store, root)).records)
    child, _ = await engine.store.create_thread(root, kind="stelis", label="trip", window_ratio=0.8,
                                                chronicle_prompt=None, run_id=None, discord_thread_id=555,
                                                anchor=NewMessage("system", "a thread opened"))
    await engine.conversations.hear(GENERAL, "shall we plan the trip here", author_name="ana", thread_id=child.id)
    # The visibility was cached before the thread had a memory row; its first message must reach it.
    assert ("thread", 555) in (await visibilities.of(engine.store, root)).records


async def test_warming_counts_the_newest_words_so_a_look_up_needs_no_count(store, monkeypatch):
    from memory import recall
    from memory.records import NewMessage

    root = await store.root_thread("Stelis", GENERAL, 0.8)
    await store.append(root.id, NewMessage("user", "an old note about the pelican harbour"))
    for i in range(6):
        await store.append(root.id, NewMessage("user", f"the quokka census counted {i} wombats"))
    await store.index_messages()
    frequencies = recall.Frequencies()
    assert await frequencies.warm(store, messages=6) >= 3  # quokka, census, counted, wombat(s)
    rounds = []
    real = store.match_counts

    async def counting(*args):
        rounds.append(args[0])
        return await real(*args)

    monkeypatch.setattr(store, "match_counts", counting)
    assert await frequencies.counts(store, ["quokka", "wombat"]) == {"quokka": 6, "wombat": 6}  # terms are stems
    assert rounds == []  # warmed: no round trip
    assert (await frequencies.counts(store, ["pelican"]))["pelican"] == 1  # older than the warmed messages
    assert rounds == [["pelican"]]


async def test_a_start_reads_the_counts_the_last_one_saved_and_counts_again_only_what_the_archive_outgrew(store,
                                                                                                        monkeypatch):
    from memory import recall
    from memory.records import NewMessage

    root = await store.root_thread("Stelis", GENERAL, 0.8)
    for i in range(6):
        await store.append(root.id, NewMessage("user", f"the quokka census counted {i} wombats"))
    await store.index_messages()
    first = recall.Frequencies()
    words = await first.warm(store, messages=6)
    assert await first.save(store) == words and await first.save(store) == 0  # saved once
    rounds: list[list[str]] = []
    real = store.match_counts

    async def counting(*args):
        rounds.append(list(args[0]))
        return await real(*args)

    monkeypatch.setattr(store, "match_counts", counting)
    again = recall.Frequencies()  # the next start
    assert await again.warm(store, messages=6) == words
    assert rounds == [[]]  # the archive's size alone: every count was read
    assert await again.counts(store, ["quokka", "wombat"]) == {"quokka": 6, "wombat": 6} and rounds == [[]]
    for i in range(4):  # the archive grows past FREQUENCY_GROWTH: the saved counts are too old
        await store.append(root.id, NewMessage("user", f"a quokka at the harbour {i}"))
    await store.index_messages()
    rounds.clear()
    later = recall.Frequencies()
    await later.warm(store, messages=6)
    assert "quokka" in {w for r in rounds for w in r}  # counted again, not read as 6
    assert (await later.counts(store, ["quokka"]))["quokka"] == 10


async def test_the_bot_saves_what_recall_counted_and_its_next_start_reads_it(make_config, database):
    """Counted during a run (here a look-up), saved by the indexer's rounds or at shutdown, by hash; the next
    start's warm-up reads those counts instead of counting those words again."""
    config = make_config(snapshots={"interval_seconds": 0}, database=database)
    engine = await Engine.open(config, OfflineLLM())
    for i in range(4):
        await engine.conversations.hear(GENERAL, f"the axolotl tank needs cleaning, day {i}", author_name="ana")
    await engine.conversations.settle()
    await engine.archive.recall(GENERAL, "who cleans the axolotl tank?")  # counts its words
    await engine.close()
    store = await open_store(config.database_target)
    try:
        saved = await store.saved_counts([recall.word_key(w) for w in ("axolotl", "tank", "nothing-said")])
        assert sorted(n for n, _ in saved.values()) == [4, 4]  # the words said, each in the four messages
    finally:
        await store.close()
    again = await Engine.open(config, OfflineLLM())
    try:
        counted: list[str] = []
        real = again.store.match_counts

        async def counting(terms, cap):
            counted.extend(terms)
            return await real(terms, cap)

        again.store.match_counts = counting  # type: ignore[method-assign]
        again.conversations.start_recall()
        await again.conversations.indexer
        assert counted and not {"axolotl", "tank"} & set(counted)  # read, where "cleaning" and the rest were counted
        assert (await again.assembler.frequencies.counts(again.store, ["axolotl"]))["axolotl"] == 4
    finally:
        await again.close()


async def test_a_refused_save_of_the_counts_is_logged_and_the_start_up_s_recall_is_still_prepared(engine, monkeypatch,
                                                                                                 caplog):
    """The counts are a cache: the database refusing them costs the next start a count, never the index."""
    from memory.store import StoreError

    async def refused(*args, **kwargs):
        raise StoreError("the disk is full")

    await engine.conversations.hear(GENERAL, "the narwhal tusk is a tooth", author_name="ana")
    monkeypatch.setattr(engine.store, "save_counts", refused)
    engine.conversations.start_recall()
    await engine.conversations.indexer
    assert "recall's word counts not saved" in caplog.text and "recall not prepared" not in caplog.text
    assert engine.store.unindexed == 0  # indexed all the same
    assert (await engine.assembler.frequencies.counts(engine.store, ["narwhal"]))["narwhal"] == 1


def test_recall_is_shown_under_one_line_per_day_and_place_best_first_within_its_room():
    from memory.recall import RECALL_HEADER, Hit, render

    day = 1_779_000_000.0
    hits = [Hit("message", 1, "The Osprey seats 16.", day, "kai", "this conversation", 3.0),
            Hit("message", 2, "The cafe sells our honey.", day - 86_400 * 30, "lena", "#harbour", 2.0),
            Hit("message", 3, "Our boat is called the Osprey.", day + 60, "kai", "this conversation", 1.0)]
    text, kept = render(hits, 200)
    lines = text.splitlines()
    assert lines[0] == RECALL_HEADER and kept == hits
    assert [ln for ln in lines if not ln.startswith("- ")][1:] == [
        "Sunday, 17 May 2026, this conversation:", "Friday, 17 April 2026, #harbour:"]
    assert lines[1:4] == ["Sunday, 17 May 2026, this conversation:", "- kai: The Osprey seats 16.",
                          "- kai: Our boat is called the Osprey."]
    small, few = render(hits, 45)  # the best first: what does not fit is left out, its day line too
    assert few == hits[:1] and "#harbour" not in small


def test_among_equal_hits_the_one_that_looks_like_the_answer_comes_first():
    from memory.recall import Hit, asks_for, rank

    said = [Hit("message", 1, "my niece Katarina just turned 78 and wants a party", 1_000.0, "ana", "here", 0.0),
            Hit("message", 2, "my niece Katarina sent me a postcard, lovely as ever", 9_000.0, "ana", "here", 0.0),
            Hit("message", 3, "my niece Katarina visited on Saturday", 5_000.0, "ana", "here", 0.0)]
    weights = {"niece": 2.0, "katarina": 3.0}
    assert [h.key for h in rank(said, weights)] == [2, 3, 1]  # equals: the newest first
    assert rank(said, weights, None, asks_for("How old is Ana's niece Katarina?"), 0.5)[0].key == 1
    assert rank(said, weights, None, asks_for("When did Katarina come round?"), 0.5)[0].key == 3
    assert rank(said, weights, None, asks_for("いつカタリナが来た?"), 0.5)[0].key == 3
    assert asks_for("What does Katarina like?") is None
    assert [h.key for h in rank(said, weights, None, asks_for("What does Katarina like?"), 0.5)] == [2, 3, 1]


async def test_a_day_the_question_names_finds_what_was_said_that_day_and_only_what_it_may_see(engine):
    from memory import dates

    # The boat is painted on the first of a month: "1 December" must not find "plain chatter number 1".
    now = dates.datetime.fromtimestamp(engine.clock(), dates.UTC)
    first = dates.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, 12, tzinfo=dates.UTC)
    engine.clock.advance(first.timestamp() - 86_400 - engine.clock())
    await engine.conversations.hear(GENERAL, "the boat trip is planned", author_name="ana")
    engine.clock.advance(86_400)
    painted = await engine.conversations.hear(GENERAL, "we painted the boat red", author_name="ana")
    await engine.conversations.hear(SECRET, "the secret boat plans for the staff", author_name="bo")
    await engine.conversations.hear(GENERAL, "lunch was lovely", author_name="ben")
    engine.clock.advance(86_400)
    await engine.conversations.hear(GENERAL, "the boat needs a new sail", author_name="ana")
    for n in range(3):
        await engine.conversations.hear(GENERAL, f"plain chatter number {n} about the weather", author_name="ben")

    assert (await engine.archive.recall(GENERAL, "what about the boat?"))[0].text == "the boat needs a new sail"
    assert (await engine.archive.recall(GENERAL, "what did we do with the boat yesterday?"))[0].text == painted.content
    day = dates.day_text(dates.day_of(painted.created_at))
    that_day = await engine.archive.recall(GENERAL, f"What happened on {day}?")  # no word of it was said that day
    assert {h.text for h in that_day} == {"we painted the boat red", "lunch was lovely"}
    assert not any("secret" in h.text for h in await engine.archive.recall(GENERAL, f"the boat on {day}"))


WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron", "iris", "jade", "kelp", "lichen")


async def test_a_memory_larger_than_its_room_shows_its_best_lines_and_recall_reaches_the_rest(make_config, database):
    """What a shortened memory version leaves out is still found for a question that asks for it; what it shows
    is not repeated by recall."""
    e = await Engine.open(make_config(snapshots={"interval_seconds": 0}, database=database,
                                      llm={"context_tokens": 4_096}), OfflineLLM())
    try:
        await e.admin.describe(GENERAL, name="general", public=True)
        await e.conversations.hear(GENERAL, "hello", author_name="ana")
        lines = [f"ana: the {WORDS[i % 12]} box number {i} holds a code{i:03d}word token" for i in range(150)]
        lines += [f"ben: ok sure, sounds good {i}" for i in range(30)]
        await e.store.add_record(e.persona, "channel", 100, "short_term", "\n".join(lines), first_seq=1, last_seq=1)

        request = (await e.conversations.preview(GENERAL, "nothing in particular", author_name="ana")).request
        memory = request.system[1].text
        assert "line(s) left out here; recall and /memory show have them" in memory
        shown = [i for i in range(150) if f"code{i:03d}word" in memory]
        hidden = [i for i in range(150) if i not in shown]
        assert shown and hidden

        def recalled(text: str) -> str:
            return "\n".join(b.text for t in text for b in t.blocks if b.text.startswith("[Recall"))

        asked = hidden[len(hidden) // 2]
        found = (await e.conversations.preview(GENERAL, f"what holds code{asked:03d}word?", author_name="ana")).request
        assert f"code{asked:03d}word" in recalled(found.turns)
        again = (await e.conversations.preview(GENERAL, f"what holds code{shown[0]:03d}word?",
                                               author_name="ana")).request
        assert f"code{shown[0]:03d}word" not in recalled(again.turns)
    finally:
        await e.close()


async def test_a_memory_line_an_earlier_turn_recalled_is_not_recalled_again(engine):
    """A kept tail already carries it: the line's key, not its record's id, says so."""
    from memory import recall

    await engine.conversations.hear(GENERAL, "plain chatter about the weather", author_name="ben")
    await engine.admin.edit(GENERAL, "ana keeps a quillwort notebook\nben owns a basalt lamp")
    root = await engine.stelis.root(GENERAL)
    seen = await recall.visibility(engine.store, root)
    first = await recall.search(engine.store, seen, "the quillwort notebook?", recall.Shown())
    line = next(h for h in first if h.kind == "memory" and "quillwort" in h.text)
    again = await recall.search(engine.store, seen, "the quillwort notebook?", recall.Shown(memory_lines={line.key}))
    assert line.key not in {h.key for h in again if h.kind == "memory"}
    other = await recall.search(engine.store, seen, "the basalt lamp?", recall.Shown(memory_lines={line.key}))
    assert any("basalt lamp" in h.text for h in other)  # the record's other lines still are


async def test_a_server_s_shared_conversations_are_read_once_for_all_its_conversations():
    """Issue 32: 500 channels of one server answering at once read what the server shares 1,000 times."""
    import asyncio as _asyncio
    from types import SimpleNamespace

    from memory.recall import Visibilities
    from memory.records import Thread

    reads: list[int] = []
    failing = [True]

    async def visible_conversations(persona, guild_id):
        reads.append(guild_id)
        await _asyncio.sleep(0.01)
        if failing[0]:
            failing[0] = False
            raise OSError("the database went away")
        return [(7, None, "general")]

    store = SimpleNamespace(sharing_version=0, conversations=0, visible_conversations=visible_conversations)
    roots = [Thread(id=i, persona="P", kind="root", parent_thread_id=None, depth=0, window_ratio=0.8,
                    status="active", label=None, chronicle_summary=None, chronicle_prompt=None, branch_id=None,
                    scope_key=f"guild:1:channel:{i}", guild_id=1, channel_id=i, discord_thread_id=None, run_id=None,
                    created_at=0.0, completed_at=None) for i in range(1, 6)]
    seen = Visibilities()
    with pytest.raises(OSError):
        await seen.of(store, roots[0])
    found = await _asyncio.gather(*(seen.of(store, r) for r in roots))  # a failed read is not kept
    assert len(reads) == 2 and all("guild:1:channel:7" in v.scope_keys for v in found)
    store.sharing_version += 1  # a channel became private, say: read again, once
    await _asyncio.gather(*(seen.of(store, r) for r in roots))
    assert len(reads) == 3


async def test_a_question_gets_more_recall_room_than_a_remark_but_not_where_tails_stay(make_config, database):
    e = await Engine.open(make_config(llm={"context_tokens": 16_384, "max_output_tokens": 512},
                                      snapshots={"interval_seconds": 0}, database=database), OfflineLLM())
    for scope, (name, public) in PLACES.items():
        await e.admin.describe(scope, name=name, public=public)
    for i in range(30):  # said in another public channel: none of it is in this channel's window
        text = f"saw quokka number {i} near the ferry pier this morning; it had a limp in its left hind leg ({i})"
        await e.conversations.hear(RANDOM, text, author_name="ana", external_id=i + 1)
    remark = await e.conversations.preview(GENERAL, "quokka near the ferry pier", author_name="ben")
    question = await e.conversations.preview(GENERAL, "what about the quokka near the ferry pier?",
                                             author_name="ben")
    assert remark.parts["recall"] <= MOST_RECALL < question.parts["recall"] <= MOST_ASKED
    recalled = [h.text for h in question.recalled]
    assert len(recalled) > len(remark.recalled) and all("quokka" in text for text in recalled)
    e.assembler.keep_tails = True  # a local server: each reply's tail stays in the window, so it stays small
    kept = await e.conversations.preview(GENERAL, "what about the quokka near the ferry pier?", author_name="ben")
    assert kept.parts["recall"] <= MOST_RECALL
    await e.close()


async def test_a_remark_recalls_only_what_echoes_it_and_a_question_or_a_look_up_reaches_the_rest(engine):
    """A remark's recall comes unasked before every reply, each token new and paid in full: only a message that
    carries most of the remark's information is worth it. Asked (a question, the recall tool), a part does."""
    await engine.conversations.hear(RANDOM, "the brass orrery in the attic has a cracked saturn ring",
                                    author_name="ana", external_id=1)
    await engine.conversations.hear(RANDOM, "my orrery with a saturn from the flea market keeps good time",
                                    author_name="ben", external_id=2)
    for n in range(30):  # other words, so the planted ones are rare
        await engine.conversations.hear(RANDOM, f"plain chatter number {n} about the weather", author_name="cy",
                                        external_id=10 + n)
    remark = await engine.conversations.preview(GENERAL, "the orrery saturn ring is cracked again, brass is soft",
                                                author_name="dee")
    assert [h.text for h in remark.recalled] == ["the brass orrery in the attic has a cracked saturn ring"]
    question = await engine.conversations.preview(GENERAL, "is the orrery saturn ring cracked again, brass is soft?",
                                                  author_name="dee")
    assert "my orrery with a saturn from the flea market keeps good time" in [h.text for h in question.recalled]
    looked_up = await engine.archive.recall(GENERAL, "the orrery saturn ring is cracked again, brass is soft")
    assert "my orrery with a saturn from the flea market keeps good time" in [h.text for h in looked_up]


def test_what_asks_and_what_only_remarks():
    for text in ("where does Odalys live?", "When did we go hiking", "do you remember the lantern",
                 "Caroline's birthday — remember it?", "いつ京都に行ったっけ", "猫の名前は何だった"):
        assert recall.asks(text), text
    for text in ("I went hiking today", "the lantern is in room 4.", "今日は晴れだね", "Whenever works for me."):
        assert not recall.asks(text), text


def test_a_question_reaches_further_than_a_remark_for_weaker_hits():
    from memory.recall import QUESTION, REMARK, Hit, rank

    weights = {"osprey": 2.0, "varnish": 2.0, "harbour": 2.0, "mara": 2.0}
    weak = Hit("message", 1, "the osprey needs a new coat this spring", 0.0, "ana", "here", 0.0)  # 1 of 4 words
    assert rank([weak], weights, coverage=REMARK.coverage) == []
    assert [h.key for h in rank([weak], weights, coverage=QUESTION.coverage)] == [1]
    assert QUESTION.limit > REMARK.limit


async def test_a_question_s_further_reach_stays_inside_what_the_conversation_may_see_and_who_was_forgotten(engine):
    for i, scope in enumerate(PLACES):
        await engine.conversations.hear(scope, f"ana's zephyrine lantern glows in room {i}", author_name="ana",
                                        author_id=1001, external_id=10 + i)
        await engine.conversations.hear(scope, f"the zephyrine went quiet ({i})", author_name="cyd", author_id=1003,
                                        external_id=20 + i)  # one word of the question's four: a weak hit
        await engine.conversations.hear(scope, f"a glowing lantern by the harbour ({i})", author_name="ben",
                                        external_id=30 + i)  # the question's other words: as rare as "zephyrine"
        for n in range(3):
            await engine.conversations.hear(scope, f"plain chatter number {n} about the weather", author_name="ben",
                                            external_id=100 * (i + 1) + n)
    await engine.forgetting.forget_person(1001, guild_id=GENERAL.guild_id)
    question = "what about the zephyrine lantern glowing in the harbour?"
    assert recall.asks(question)
    request = (await engine.conversations.preview(GENERAL, question, author_name="ben")).request
    said = " ".join(b.text for t in request.turns for b in t.blocks)
    assert "the zephyrine went quiet (1)" in said  # a weak hit in a shared channel: the question's reach
    assert "glows in room" not in said  # what the forgotten member said, anywhere
    for elsewhere in ("(2)", "(3)", "(4)"):  # a private channel, another server, a DM
        assert f"the zephyrine went quiet {elsewhere}" not in said and f"by the harbour {elsewhere}" not in said
    engine.assembler.keep_tails = True  # a remark's reach: the weak hit is not shown at all
    request = (await engine.conversations.preview(GENERAL, question, author_name="ben")).request
    assert "the zephyrine went quiet (1)" not in " ".join(b.text for t in request.turns for b in t.blocks)


async def test_a_question_brings_the_reply_its_best_message_hits_had_and_only_where_it_may_see(engine):
    """"What flowers are those?" "Peruvian lilies." The answer repeats none of the question's words."""
    for n, (scope, answer) in enumerate(((RANDOM, "Peruvian lilies, a gift from my aunt"),
                                         (SECRET, "Secret orchids from the greenhouse"),
                                         (OTHER_GUILD, "Plastic tulips from the market"))):
        await engine.conversations.hear(scope, "what are those orange flowers on your windowsill?", author_name="ana",
                                        external_id=10 * n + 1)
        await engine.conversations.hear(scope, answer, author_name="ben", external_id=10 * n + 2)
        for i in range(3):
            await engine.conversations.hear(scope, f"plain chatter number {i} about the weather", author_name="cyd",
                                            external_id=10 * n + 3 + i)
    await engine.conversations.hear(GENERAL, "good morning", author_name="ana", external_id=99)

    def said(request):
        return " ".join(b.text for t in request.turns for b in t.blocks)

    question = (await engine.conversations.preview(GENERAL, "which flowers were on the windowsill?",
                                                   author_name="ana")).request
    assert "orange flowers on your windowsill" in said(question)  # the message found
    assert "Peruvian lilies, a gift from my aunt" in said(question)  # and what was said back to it
    assert "Secret orchids" not in said(question) and "Plastic tulips" not in said(question)
    remark = (await engine.conversations.preview(GENERAL, "the flowers on the windowsill", author_name="ana")).request
    assert not recall.asks("the flowers on the windowsill")  # a remark's recall: the message found, not its reply
    assert "orange flowers on your windowsill" in said(remark) and "Peruvian lilies" not in said(remark)
    # The persona's recall tool looks something up: it brings the replies too; /recall shows the messages found.
    looked_up = "\n".join(await engine.tools.recall_text(GENERAL, "orange flowers windowsill", 5))
    assert "Peruvian lilies, a gift from my aunt" in looked_up
    assert "Secret orchids" not in looked_up and "Plastic tulips" not in looked_up
    assert all("Peruvian" not in h.text for h in await engine.archive.recall(GENERAL, "orange flowers windowsill"))


async def test_a_forgotten_member_s_reply_is_never_brought_back(engine):
    await engine.conversations.hear(RANDOM, "who painted the blue windowsill frame?", author_name="ana", external_id=1)
    await engine.conversations.hear(RANDOM, "I did, with cobalt from Porto", author_name="dee", author_id=1004,
                                    external_id=2)
    await engine.conversations.hear(RANDOM, "it turned out lovely", author_name="ben", external_id=3)
    for i in range(3):
        await engine.conversations.hear(RANDOM, f"plain chatter number {i} about the weather", author_name="cyd",
                                        external_id=4 + i)
    await engine.conversations.hear(GENERAL, "good morning", author_name="ana", external_id=99)
    looked_up = "\n".join(await engine.tools.recall_text(GENERAL, "painted windowsill frame", 5))
    assert "cobalt from Porto" in looked_up  # before: dee's answer is the reply
    await engine.forgetting.forget_person(1004, guild_id=GENERAL.guild_id)
    asked = await engine.conversations.preview(GENERAL, "who painted the windowsill frame?", author_name="ana")
    request = asked.request
    said = " ".join(b.text for t in request.turns for b in t.blocks)
    assert "blue windowsill frame" in said and "cobalt" not in said and "Porto" not in said
    assert "it turned out lovely" in said  # the next thing someone else said stands in
    looked_up = "\n".join(await engine.tools.recall_text(GENERAL, "painted windowsill frame", 5))
    assert "cobalt" not in looked_up and "Porto" not in looked_up


async def test_a_word_is_counted_once_for_everyone_asking_and_again_once_the_archive_grew():
    """Five hundred replies asking at once make one count; a word counted early in a burst is counted again once the
    messages this process stored grew the archive (its count would be stale: rare, then said everywhere)."""
    import asyncio

    from memory.recall import FREQUENCY_GROWTH, Frequencies

    class Archive:
        newest_seq = 0

        def __init__(self) -> None:
            self.asked: list[list[str]] = []
            self.today = 3

        async def match_counts(self, terms, cap):
            self.asked.append(list(terms))
            await asyncio.sleep(0.01)
            return 1_000, {t: self.today for t in terms}

    archive, frequencies = Archive(), Frequencies()
    found = await asyncio.gather(*(frequencies.counts(archive, ["today"]) for _ in range(500)))
    assert archive.asked == [["today"]] and found == [{"today": 3}] * 500
    archive.today = 400  # the burst said it everywhere
    archive.newest_seq = int(1_000 * FREQUENCY_GROWTH) - 1
    assert await frequencies.counts(archive, ["today"]) == {"today": 3}  # not grown enough: as counted
    archive.newest_seq = int(1_000 * FREQUENCY_GROWTH) + 1
    assert await frequencies.counts(archive, ["today"]) == {"today": 400} and len(archive.asked) == 2


async def test_new_words_asked_while_a_count_is_on_its_way_are_counted_together_in_the_next():
    """A burst of replies, each with a word said nowhere before, counts them in a few statements, each reply getting
    its own word's count; a caller given up on leaves the others' count alone, and a failed statement is each of
    its callers' error while the next round counts again."""
    import asyncio

    from memory.recall import Frequencies

    class Archive:
        newest_seq = 0

        def __init__(self) -> None:
            self.asked: list[list[str]] = []
            self.fail = False

        async def match_counts(self, terms, cap):
            self.asked.append(list(terms))
            await asyncio.sleep(0.01)
            if self.fail:
                raise RuntimeError("the database went away")
            return 1_000, {t: int(t[4:]) for t in terms}

    archive, frequencies = Archive(), Frequencies()
    first = asyncio.ensure_future(frequencies.counts(archive, ["word1"]))
    await asyncio.sleep(0.005)  # its statement on its way
    found = await asyncio.gather(first, *(frequencies.counts(archive, [f"word{n}"]) for n in range(2, 51)))
    assert found == [{f"word{n}": n} for n in range(1, 51)]
    assert archive.asked == [["word1"], [f"word{n}" for n in range(2, 51)]]

    given_up = asyncio.ensure_future(frequencies.counts(archive, ["word60"]))
    kept = asyncio.ensure_future(frequencies.counts(archive, ["word61"]))
    await asyncio.sleep(0)
    given_up.cancel()
    assert await kept == {"word61": 61}

    # the count's own task cancelled (the loop closing), its statement on its way and a round waiting behind it
    on_its_way = asyncio.ensure_future(frequencies.counts(archive, ["word80"]))
    await asyncio.sleep(0.005)
    behind = asyncio.ensure_future(frequencies.counts(archive, ["word81"]))
    await asyncio.sleep(0)
    callers = {on_its_way, behind, asyncio.current_task()}
    for task in asyncio.all_tasks() - callers:
        task.cancel()
    told = await asyncio.wait_for(asyncio.gather(on_its_way, behind, return_exceptions=True), 1)
    assert all(isinstance(e, asyncio.CancelledError) for e in told)
    assert await frequencies.counts(archive, ["word82"]) == {"word82": 82}

    archive.fail = True
    failed = await asyncio.gather(*(frequencies.counts(archive, [f"word{n}"]) for n in (70, 71, 72)),
                                  return_exceptions=True)
    assert all(isinstance(e, RuntimeError) for e in failed)
    archive.fail = False
    assert await frequencies.counts(archive, ["word70"]) == {"word70": 70}


async def test_counts_asked_as_each_count_ends_are_each_answered():
    """Callers arriving at every moment of the counts' rounds, one round ending as the next begins: each gets its
    count (a round begun while the last one's counter was ending was cancelled by its end, once)."""
    import asyncio
    import random

    from memory.recall import Frequencies

    rng = random.Random(1)

    class Archive:
        newest_seq = 0

        async def match_counts(self, terms, cap):
            for _ in range(rng.randint(0, 2)):
                await asyncio.sleep(0)
            return 1_000, {t: len(t) for t in terms}

    frequencies, archive = Frequencies(), Archive()

    async def caller(i: int) -> list[dict[str, int]]:
        found = []
        for j in range(30):
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
            found.append(await frequencies.counts(archive, [f"w{i}x{j}"]))
        return found

    answers = await asyncio.gather(*(caller(i) for i in range(40)))
    assert answers == [[{f"w{i}x{j}": len(f"w{i}x{j}")} for j in range(30)] for i in range(40)]

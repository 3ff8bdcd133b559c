"""Recall (DESIGN.md section 5): what the archive holds about the new message, for the volatile tail.

The new message (and the turn before it) is the query. Its meaningful words are looked up in
trigram full-text indexes over messages, chronicles and memory versions, within what this
conversation may see: its own scope, the shareable channels of its server; never another server,
a DM or a private conversation. A word found in too many messages says nothing and is dropped
(counting stops at a bound, so the cost does not grow with the archive); a word too short for
trigrams is looked for by a bounded scan of the newest messages. Hits already in the request are
skipped; the rest are ranked by how much of the query's information they carry.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Collection, Coroutine, Iterable
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cached_property
from typing import Any

from memory import dates, excerpts
from memory.records import MessageMatch, NoteMatch, Scope, Thread
from memory.stamped import OncePerStamp
from memory.store import Store
from memory.tokens import cached_tokens
from memory.words import CJK, STOPWORDS, words

MAX_TERMS = 10
COMMON_SHARE = 0.15  # a word in more than this share of messages is dropped from the query
COMMON_CAP = 500  # ... and counting its matches stops here, so a look-up stays bounded
SCAN_WINDOW = 20_000  # messages a short (under three characters) term is looked for in
DAY_MESSAGES = 24  # what was said on a day a question names, newest first, at most
CANDIDATES = 16  # messages ranked per look-up for a remark: 16 find as much as 24 on memory_quality, for less time
CANDIDATE_ROWS = 200  # matches the message look-up may rank, whatever the archive's size
MIN_COVERAGE = 0.3  # a hit must carry this share of the query's information (a look-up asked for) ...
REMARK_COVERAGE = 0.5  # ... or of a remark's, recalled unasked before every reply
HIT_CHARS = 400  # longer texts are shown (and judged) by their densest stretch of query words
MIN_LINE_TOKENS = 24  # less room than this left: no hit line fits
_SUFFIXES = ("ing", "ed", "es", "s", "ly")
FREQUENCY_ENTRIES = 50_000  # words whose match counts are remembered between look-ups
FREQUENCY_GROWTH = 1.1  # ... until the archive has grown by this factor
WARM_MESSAGES = 1_000  # at start-up, the words of this many newest messages are counted ahead
WARM_CHUNK = 10  # words counted per round trip while warming: a reply queued behind waits a few milliseconds
_KANA = re.compile(r"[\u3040-\u309f]+")
_KANJI = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Visibility:
    """What one conversation may recall."""

    persona: str
    scope_keys: tuple[str, ...]  # threads whose messages and chronicles are visible
    records: tuple[tuple[str, int], ...]  # (scope, scope_id) of visible memory records
    titles: dict[str, str] = field(default_factory=dict, compare=False)  # scope key -> "#general"


class Frequencies:
    """How many messages each word matches, remembered while the archive has not grown much.

    Counting a word's matches is most of a look-up's cost, and a conversation's words recur from
    turn to turn; a weight a little stale ranks just as well. The archive's size comes with the
    counts, so a look-up whose words are all known needs no database round trip for them.
    """

    def __init__(self, entries: int = FREQUENCY_ENTRIES):
        self.entries = entries
        self.total = 0  # messages in the archive, as of the last count
        self._known: OrderedDict[str, tuple[int, int]] = OrderedDict()  # word -> (count, archive size then)
        self._counting: dict[str, asyncio.Future[int]] = {}  # words being counted now: others wait for that count
        # the count on its way, and the round of words asked meanwhile (counted together next)
        self._counter: asyncio.Task[None] | None = None
        self._round: asyncio.Future[tuple[int, dict[str, int]]] | None = None
        self._round_terms: dict[str, None] = {}
        self._unsaved: dict[str, tuple[int, int]] = {}  # counted since the last save

    async def counts(self, store: Store, terms: list[str], unindexed: Collection[str] = (),
                     exact: set[str] | None = None) -> dict[str, int]:
        """Each term's match count, up to COMMON_CAP; `unindexed` (lowercased texts) are counted too. Those counted
        by this call, or by the count it waited for, are added to `exact` (the others may be a little stale).

        The archive's size is that of the last count, or the newest message this process stored since, if later: a
        word said in a burst of messages is counted again as the burst grows the archive."""
        size = max(self.total, store.newest_seq)
        known = {}
        for term in terms:
            entry = self._known.get(term)
            if entry is not None and size <= entry[1] * FREQUENCY_GROWTH:
                known[term] = entry[0]
                self._known.move_to_end(term)
        waiting = {t: self._counting[t] for t in terms if t not in known and t in self._counting}
        missing = [t for t in terms if t not in known and t not in waiting]
        counted: dict[str, int] = {}
        if missing or not (self.total or waiting):
            counted.update(await self._count(store, missing))
        for term, counting in waiting.items():
            await asyncio.wait([counting])
            if not counting.cancelled():
                counted[term] = counting.result()
        if failed := [t for t in waiting if t not in counted]:  # the count they waited for failed: their own
            counted.update(await self._count(store, failed))
        known.update(counted)
        if exact is not None:
            exact.update(counted)
        while len(self._known) > self.entries:
            self._known.popitem(last=False)
        return {t: min(COMMON_CAP, known[t] + sum(t in text for text in unindexed)) for t in terms}

    async def _count(self, store: Store, terms: list[str]) -> dict[str, int]:
        """Count `terms` (none: the archive's size alone); those asking for them meanwhile wait for this count.
        Terms asked while a count is on its way go together in the next: a busy server's burst of replies, each
        with a new word, counts them in a few statements, not one each (and not one after another on the search
        connections, each reply's recall waiting its turn: 200 ms at 500 channels on PostgreSQL)."""
        loop = asyncio.get_running_loop()
        counting = {t: loop.create_future() for t in terms}
        self._counting.update(counting)
        try:
            if self._round is None:
                self._round = loop.create_future()
            joined = self._round
            self._round_terms.update(dict.fromkeys(terms))
            if self._counter is None or self._counter.done():
                self._counter = asyncio.ensure_future(self._count_rounds(store))
                self._counter.add_done_callback(self._counter_ended)
            await asyncio.wait([joined])  # this caller's cancellation leaves the others' count alone
            total, counted = joined.result()  # the round's error, if its statement failed
        except BaseException:
            for future in counting.values():
                future.cancel()
            raise
        finally:
            for term, future in counting.items():
                if self._counting.get(term) is future:
                    del self._counting[term]
        mine = {t: counted[t] for t in terms}
        for term, n in mine.items():
            counting[term].set_result(n)
            if n:  # a word found nowhere yet may be said any moment: it is counted again next time
                self._known[term] = self._unsaved[term] = (n, total)
        while len(self._unsaved) > self.entries:  # never saved (no indexer runs): the oldest go
            del self._unsaved[next(iter(self._unsaved))]
        return mine

    async def _count_rounds(self, store: Store) -> None:
        """One statement per round, while words wait to be counted."""
        joined = None
        try:
            while self._round is not None:
                joined, terms = self._round, list(self._round_terms)
                self._round, self._round_terms = None, {}
                try:
                    self.total, counted = await store.match_counts(terms, COMMON_CAP)
                except Exception as exc:  # told to every caller of the round, each raising it
                    joined.set_exception(exc)
                else:
                    joined.set_result((self.total, counted))
        except asyncio.CancelledError:
            if joined is not None and not joined.done():
                joined.cancel()
            raise

    def _counter_ended(self, counter: asyncio.Task[None]) -> None:
        """Cancelled (the loop closing), even before it began: the round waiting for it is told at once, unless a
        counter started since has taken it on."""
        if counter.cancelled() and self._counter is counter and self._round is not None:
            self._round.cancel()
            self._round, self._round_terms = None, {}

    async def warm(self, store: Store, messages: int = WARM_MESSAGES) -> int:
        """Count ahead the words of the newest messages (a conversation's words recur); how many words.

        A process starts knowing no counts, and each new word costs its first look-up a fraction
        of a millisecond; warmed in the background, the first replies after a restart do not pay.
        """
        texts = await store.newest_texts(messages)
        terms = list(dict.fromkeys(t for text in texts for t in query_terms(text) if len(t) >= 3))
        await self._load(store, terms)
        for start in range(0, len(terms), WARM_CHUNK):
            await self.counts(store, terms[start:start + WARM_CHUNK])
        return len(terms)

    async def _load(self, store: Store, terms: list[str]) -> None:
        """The counts of `terms` an earlier run saved: counting again costs a word more the larger the archive
        (0.16 ms at 10 servers, 0.37 at 1,000). With the archive's size read first, `counts` counts again those
        it has outgrown, as it does any count."""
        await self._count(store, [])
        keys = {word_key(t): t for t in terms if t not in self._known}
        for key, entry in (await store.saved_counts(list(keys))).items():
            self._known[keys[key]] = entry

    async def save(self, store: Store) -> int:
        """Keep what was counted since the last save for the next start (by the words' hashes); how many."""
        unsaved, self._unsaved = self._unsaved, {}
        return await store.save_counts([(word_key(t), n, archive) for t, (n, archive) in unsaved.items()],
                                       stale_below=math.ceil(self.total / FREQUENCY_GROWTH))


def word_key(term: str) -> int:
    """A word's key among saved counts: a 64-bit hash, so the database keeps no word of what was counted."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big", signed=True)


@dataclass(frozen=True)
class Hit:
    kind: str  # message | chronicle | memory
    key: int  # message seq, thread id or record id
    text: str
    at: float
    who: str  # speaker, or what the text is
    where: str
    score: float


@dataclass
class Shown:
    """What the request already carries, so recall does not repeat it."""

    messages: set[int] = field(default_factory=set)
    records: set[int] = field(default_factory=set)
    chronicles: set[int] = field(default_factory=set)
    lines: dict[int, frozenset[str]] = field(default_factory=dict)  # a record shown in part: the lines shown
    memory_lines: set[int] = field(default_factory=set)  # memory lines an earlier turn recalled (their Hit keys)
    whole_from: tuple[int, int] | None = None  # (thread, seq): its messages from there on are all in the request
    texts: tuple[str, ...] = ()  # the stored ones' texts: where a word counted just now may all be

    def holds_all(self, term: str, count: int) -> bool:
        """Whether every one of a word's `count` matches (an exact count) is a message the request shows. For
        ASCII words alone: the database folds other letters by its locale, which may not be Python's."""
        return term.isascii() and sum(term in text for text in self._folded) >= count

    @cached_property
    def _folded(self) -> tuple[str, ...]:  # lower-cased once a word asks, not on every reply
        return tuple(text.lower() for text in self.texts)


Shared = list[tuple[int, int | None, str | None]]  # a server's shareable conversations: channel, thread, name


class Visibilities:
    """Each conversation's Visibility, rebuilt only when a server may have gained a conversation or sharing changed.

    What a server shares is read once for all its conversations (and once while read): a server of five hundred
    channels answering at once asked it a thousand times."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[tuple[int, int], Visibility]] = {}
        self._servers: OncePerStamp[tuple[str, int], Shared] = OncePerStamp()

    async def of(self, store: Store, root: Thread) -> Visibility:
        if root.guild_id is None:
            return await visibility(store, root)
        stamp = (store.sharing_version, store.conversations)
        found = self._known.get(root.id)
        if found is None or found[0] != stamp:
            persona, guild_id = root.persona, root.guild_id
            shared = await self._servers.get((persona, guild_id), stamp,
                                             lambda: store.visible_conversations(persona, guild_id))
            found = self._known[root.id] = (stamp, await visibility(store, root, shared))
        return found[1]


async def visibility(store: Store, root: Thread, shared: Shared | None = None) -> Visibility:
    """The rules of memory sharing (DESIGN.md section 6): own conversation, shareable channels of its server
    (`shared`: what the server shares, when already read)."""
    keys = {root.scope_key: "this conversation"}
    records = {("channel", root.channel_id or 0)}
    if root.guild_id is not None:
        records.add(("workspace", root.guild_id))
        known = shared if shared is not None else await store.visible_conversations(root.persona, root.guild_id)
        channel_ids = {root.channel_id}
        for channel_id, thread_id, name in known:
            if thread_id is None and channel_id != root.channel_id:
                keys[Scope.channel(root.guild_id, channel_id).key] = f"#{name or channel_id}"
                records.add(("channel", channel_id))
                channel_ids.add(channel_id)
        records.update(("thread", thread_id) for channel_id, thread_id, _ in known
                       if thread_id is not None and channel_id in channel_ids)
    return Visibility(root.persona, tuple(keys), tuple(sorted(records)), keys)


def query_terms(text: str) -> list[str]:
    """Meaningful words of a query, lightly stemmed (trigrams match the rest of the word), longest first."""
    terms: dict[str, None] = {}
    mixed = CJK.search(text) is not None  # most texts have no CJK: then no word is looked at for it
    for word in dict.fromkeys(words(text)):
        if mixed and CJK.search(word):
            for run in _KANA.split(word):  # kana are mostly particles between the words that matter
                if len(run) >= 2 or _KANJI.fullmatch(run):  # one kanji is a word: 猫, 海
                    terms.setdefault(run, None)
            continue
        if word in STOPWORDS or (len(word) < 3 and not word.isdigit()):
            continue
        terms.setdefault(_stem(word), None)
    return sorted(terms, key=len, reverse=True)[:MAX_TERMS]


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    if not word.endswith(_SUFFIXES):
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class Reach:
    """How far a look-up goes: candidates ranked per index, hits kept, and the share of the query a hit must carry."""

    candidates: int = CANDIDATES
    limit: int = 16
    coverage: float = MIN_COVERAGE
    replies: int = 0  # the best message hits whose replies are hits too (REPLY_SHARE)


SEARCH = Reach()  # a look-up asked for: the recall tool, /recall
# A remark is looked up unasked before every reply, and its hits are new text paid in full each turn (bench
# cache_efficiency: 155-210 tokens a turn at MIN_COVERAGE, a twentieth of a turn's cost): only what echoes it
# strongly is worth that. A question is where recall answers.
REMARK = Reach(coverage=REMARK_COVERAGE)
# A question is where recall answers, and has the room for it: twice the hits, and weaker ones (a question's
# words are seldom its answer's, so its evidence carries less of them). Twice the candidates found no more.
# Its best message hits bring the replies they had: an answer seldom repeats the question's words.
QUESTION = Reach(CANDIDATES, 32, 0.2, replies=8)
REPLY_SHARE = 0.5  # a reply found through the message it answers ranks at this share of that message's score


async def search(store: Store, seen: Visibility, text: str, shown: Shown, reach: Reach = SEARCH,
                 context: str = "", frequencies: Frequencies | None = None, unindexed_ok: int = 0,
                 now: float | None = None, sent: asyncio.Event | None = None) -> list[Hit]:
    """The best hits for a query text that the request does not already carry, best first.

    Words of `context` (the turn before the new message) only break ties between hits: they are
    not looked up, so they cost nothing. Up to `unindexed_ok` of the newest messages may be left
    out of the index (a reply passes its window's length: every one of its thread's among them is
    in the window); their words are still counted, or the conversation's own words would look rare.
    More, and the index is brought up to date first. A day the text names ("on 3 May", "yesterday", as of
    `now`) is looked up too: what was said that day counts as a match of a rare word. `reach`: how far to look.
    `sent` is set once the look-ups are in the database's hands (what the caller may do meanwhile).
    """
    days = dates.days_named(text, now) if now is not None else []
    own = query_terms(dates.without_day_numbers(text) if days else text)
    if not own and not days:
        return []
    pending = store.unindexed_texts()
    if pending is None or len(pending) > unindexed_ok:
        await store.index_messages()
        pending = []
    frequencies = frequencies or Frequencies()
    exact: set[str] = set()
    df = await frequencies.counts(store, [t for t in own if len(t) >= 3], pending, exact)
    total = max(1, frequencies.total)
    common = min(COMMON_CAP, max(50, int(total * COMMON_SHARE)))
    rare = {t: n for t, n in df.items() if n < common}
    # A word said for the first time (a name, a number) is in the new message alone: no message to look it up in
    # (a busy server's burst of new words looked each up, through every row the burst had added to the index)
    elsewhere = {t: n for t, n in rare.items() if not (t in exact and shown.holds_all(t, n))}
    short = [t for t in own if len(t) < 3]
    if not rare and not short and not days:
        return []
    # Every look-up at once: the indexes' and the days' in one round trip, a short word's scan beside them
    lookups = [*([_matched(store, seen, shown, rare, _candidate_terms(elsewhere), reach.candidates, days)]
                 if rare or days else []),
               *(_scanned(store, seen, shown, term) for term in short)]
    hits = [hit for found in await _handed_over(lookups, sent) for hit in found]
    # A word in no message may still be in a chronicle or a memory; one found nowhere cannot help rank.
    found = " ".join(f"{h.who} {h.text}".lower() for h in hits)
    weights = {t: math.log(1 + total / max(n, 1)) for t, n in rare.items() if n or t in found}
    weights.update({t: math.log(1 + total / 20) for t in short})  # unknown df: weigh like a fairly rare word
    named = {d: math.log(1 + total / DAY_MESSAGES) for d in days}  # a day's messages: as many as a rare word's
    if not weights and not named:
        return []
    tie = math.log(1 + total / COMMON_CAP) / 3  # what a context word adds: less than any word of the message
    ties = {t: tie for t in query_terms(context) if t not in weights}
    ranked = rank(hits, weights, ties, asks_for(text), 2 * tie, named, reach.coverage)[:reach.limit]
    if reach.replies:
        ranked = await _with_replies(store, seen, shown, ranked, reach.replies)
    return ranked[:reach.limit]


async def _handed_over(lookups: list[Coroutine[Any, Any, list[Hit]]], sent: asyncio.Event | None) -> list[list[Hit]]:
    """The look-ups' results, each started at once: their first steps hand their statements to the database, then
    `sent` lets the caller work (an assembly's layout) while the database does."""
    tasks = [asyncio.ensure_future(lookup) for lookup in lookups]
    try:
        await asyncio.sleep(0)
        if sent is not None:
            sent.set()
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


async def _with_replies(store: Store, seen: Visibility, shown: Shown, ranked: list[Hit], parents: int) -> list[Hit]:
    """The hits and what was said back to the best message hits: in conversation the answer follows the question,
    in words of its own ("What flowers are those?" "Peruvian lilies."). A reply ranks at REPLY_SHARE of its message's
    score."""
    found = [hit for hit in ranked if hit.kind == "message"][:parents]
    replies = await store.replies_to([hit.key for hit in found], seen.persona, seen.scope_keys) if found else {}
    have = {(hit.kind, hit.key) for hit in ranked}
    more = []
    for hit in found:
        row = replies.get(hit.key)
        if row is None or ("message", row.seq) in have or row.seq in shown.messages:
            continue
        have.add(("message", row.seq))
        reply = _message_hit(row, seen)
        more.append(replace(reply, text=excerpts.best(reply.text, {}, HIT_CHARS).text, score=hit.score * REPLY_SHARE))
    return _best_first(ranked + more) if more else ranked


async def _scanned(store: Store, seen: Visibility, shown: Shown, term: str) -> list[Hit]:
    """A word too short for trigrams, looked for in the newest messages."""
    rows = await store.scan_messages(term, seen.persona, seen.scope_keys, SCAN_WINDOW, CANDIDATES // 4)
    return [_message_hit(row, seen) for row in rows if row.seq not in shown.messages]


def _candidate_terms(df: dict[str, int]) -> list[str]:
    """The rarest words whose matches together stay within CANDIDATE_ROWS.

    They carry most of a query's weight, and ranking every match of a fairly common word would
    make a look-up's cost grow with the archive.
    """
    chosen: list[str] = []
    rows = 0
    for term in sorted((t for t in df if df[t]), key=df.__getitem__):
        if chosen and rows + df[term] > CANDIDATE_ROWS:
            break
        chosen.append(term)
        rows += df[term]
    return chosen


async def _matched(store: Store, seen: Visibility, shown: Shown, terms: Collection[str], message_terms: list[str],
                   candidates: int, days: list[date]) -> list[Hit]:
    """Hits of the full-text indexes (messages for the rarest words, chronicles and memory versions for all) and
    what was said on the days the text names, within what the conversation may see."""
    found = await store.recall_matches(list(terms), message_terms, seen.persona, seen.scope_keys, seen.records,
                                       candidates, candidates // 4, [dates.day_bounds(day) for day in days],
                                       DAY_MESSAGES, shown.whole_from)
    said = [row for rows in found.days for row in rows] + found.messages
    hits = [_message_hit(row, seen) for row in said if row.seq not in shown.messages]
    for row in found.notes:
        if row.source == "chronicle" and row.id not in shown.chronicles:
            hits.append(_chronicle_hit(row, seen))
        elif row.source == "record" and row.id not in shown.records:
            hits += [hit for hit in _record_hits(row, terms, shown.lines.get(row.id, frozenset()))
                     if hit.key not in shown.memory_lines]
    return hits


# What a question asks for, by its question words (English and Japanese), and how an answer to it looks: a
# "how much" is answered by a number, a "when" by a date or a time said relatively.
_ASKS_NUMBER = re.compile(r"\bhow (?:much|many|old|long|far|often)\b|いくら|何歳|何人|何個|何回", re.IGNORECASE)
_ASKS_TIME = re.compile(r"\bwhen\b|\bwhat (?:date|day|year|month|time)\b|\bwhich (?:date|day|year|month)\b"
                        r"|\bsince when\b|いつ|何日|何年|何月|何時", re.IGNORECASE)
_NUMBER = re.compile(r"\d")
_TIME = re.compile(r"\d|\b(?:yesterday|today|tomorrow|ago|last|next|morning|evening|tonight|weekend|"
                   r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|"
                   r"june|july|august|september|october|november|december)\b|昨日|今日|明日|先週|来週|曜日|月|年",
                   re.IGNORECASE)


_QUESTION = re.compile(r"[?？]|^\s*(?:what|when|where|who|whom|whose|which|why|how|do|does|did|is|are|was|were|"
                       r"have|has|can|could|would|will)\b|\bremember\b|覚えて|いつ|どこ|だれ|誰|なに|何|どう|か[。．]?\s*$",
                       re.IGNORECASE)


def asks(text: str) -> bool:
    """Whether a message asks something (where recall answers, not merely reminds)."""
    return bool(_QUESTION.search(text))


def asks_for(question: str) -> re.Pattern[str] | None:
    """How an answer to this question looks (a number, a time), when its question words say."""
    if _ASKS_TIME.search(question):
        return _TIME
    return _NUMBER if _ASKS_NUMBER.search(question) else None


def rank(hits: Iterable[Hit], weights: dict[str, float], ties: dict[str, float] | None = None,
         answer: re.Pattern[str] | None = None, answer_weight: float = 0.0,
         days: dict[date, float] | None = None, coverage: float = MIN_COVERAGE) -> list[Hit]:
    """Hits whose excerpt carries enough of the query's information, the most first; newer first among equals.

    Who said it counts as a match too: "what did Kai buy" is about Kai's own messages. `ties` add
    to a hit's score but not to what it must cover, and so does `answer_weight` for an excerpt that
    looks like an answer (`answer`: "how old" is answered by a number). A hit from a day the question names
    (`days`, each with its weight) matches that day. A hit must carry `coverage` of the query's weight. Each hit
    comes back as its excerpt.
    """
    days = days or {}
    ties = ties or {}
    whole = sum(weights.values()) + sum(days.values())
    best: dict[tuple[str, int], Hit] = {}
    for hit in hits:
        who = hit.who.lower()
        by_speaker = {t for t in weights if excerpts.contains(t, who)}
        shown = excerpts.best(hit.text, {t: w for t, w in weights.items() if t not in by_speaker}, HIT_CHARS)
        said_by = sum(w for t, w in weights.items() if t in by_speaker)  # in the query's order, not the set's
        score = shown.score + said_by + days.get(dates.day_of(hit.at), 0.0)
        if score < coverage * whole:
            continue
        lowered = shown.text.lower()
        score += sum(w for t, w in ties.items() if excerpts.contains(t, lowered))
        if answer is not None and answer.search(shown.text):
            score += answer_weight
        best.setdefault((hit.kind, hit.key), replace(hit, text=shown.text, score=score))
    return _best_first(best.values())


def _best_first(hits: Iterable[Hit]) -> list[Hit]:
    # Among equals, a message before a summary quoting it (it has the exact day and speaker), then newer first.
    return sorted(hits, key=lambda h: (-h.score, h.kind != "message", -h.at))


def _message_hit(row: MessageMatch, seen: Visibility) -> Hit:
    who = row.author_name or row.role
    where = seen.titles.get(row.scope_key, "elsewhere")
    if row.kind != "root":
        where = f"Stelis thread \"{row.label}\" in {where}"
    return Hit("message", row.seq, row.content, row.created_at, who, where, 0.0)


def _chronicle_hit(row: NoteMatch, seen: Visibility) -> Hit:
    where = seen.titles.get(row.scope_key or "", "elsewhere")
    return Hit("chronicle", row.id, row.text, row.at, f"chronicle of Stelis thread \"{row.label}\"",
               where, 0.0)


def _record_hits(row: NoteMatch, terms: Collection[str], shown: frozenset[str] = frozenset()) -> list[Hit]:
    """The lines of a memory version that match (and the request does not show), each on its own: a whole
    version is long and mixed."""
    kind = "short-term" if row.type == "short_term" else "long-term"
    where = {"workspace": "this server", "channel": "a channel", "thread": "a Discord thread"}.get(row.scope or "",
                                                                                                  "elsewhere")
    hits = []
    for n, line in enumerate(row.text.splitlines()):
        if line not in shown and any(t in line.lower() for t in terms):
            hits.append(Hit("memory", row.id * 10_000 + n, line, row.at,
                            f"{kind} memory v{row.version}", where, 0.0))
    return hits


RECALL_HEADER = "[Recall: from earlier, found for the message above]"
RECALL_GROUP = re.compile(r"^(.*\d{4}), (.+):$")  # a day and place line of the recall section


def render(hits: list[Hit], budget: int) -> tuple[str, list[Hit]]:
    """The recall section within `budget` tokens, and the hits it holds: chosen best first, shown under one
    line per day and place (a line of its own for each hit cost a seventh of recall's room in dates)."""
    if budget <= 0 or not hits:
        return "", []
    used = cached_tokens(RECALL_HEADER) + 2
    groups: dict[str, list[str]] = {}
    kept: list[Hit] = []
    said: list[str] = []
    for hit in hits:
        gist = _gist(hit.text)
        if any(gist in other or other in gist for other in said):
            continue  # a summary quoting a message already shown, or the other way round
        said.append(gist)
        group = f"{dates.day_line(hit.at)}, {hit.where}:"
        line = f"- {hit.who}: {_resolved(hit, hit.text)}"
        cost = cached_tokens(line) + 1 + (0 if group in groups else cached_tokens(group) + 1)
        if used + cost > budget:
            continue
        groups.setdefault(group, []).append(line)
        kept.append(hit)
        used += cost
        if budget - used < MIN_LINE_TOKENS:
            break
    if not kept:
        return "", []
    return "\n".join([RECALL_HEADER, *(x for group, lines in groups.items() for x in (group, *lines))]), kept


def _gist(text: str) -> str:
    """A text's words without speaker prefix or date notes, for spotting the same thing said twice."""
    text = re.sub(r"^[^:\n]{1,40}: ", "", text.strip())
    return " ".join(re.sub(r" \([^)]*\d{4}[^)]*\)", "", text).lower().split())


def _resolved(hit: Hit, text: str) -> str:
    return dates.resolve_relative(text, hit.at) if hit.kind == "message" else text

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

import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from memory import channels, dates
from memory.records import Thread
from memory.store import Store, phrase
from memory.tokens import count_tokens
from memory.words import CJK, STOPWORDS, words

MAX_TERMS = 10
COMMON_SHARE = 0.15  # a word in more than this share of messages is dropped from the query
COMMON_CAP = 1_500  # ... and counting its matches stops here, so a look-up stays bounded
SCAN_WINDOW = 20_000  # messages a short (under three characters) term is looked for in
CANDIDATES = 40
MIN_COVERAGE = 0.3  # a hit must carry this share of the query's information
HIT_CHARS = 600  # longer texts are shown around their first match
_SUFFIXES = ("ing", "ed", "es", "s", "ly")
_KANA = re.compile(r"[\u3040-\u309f]+")
_KANJI = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Visibility:
    """What one conversation may recall."""

    persona: str
    scope_keys: tuple[str, ...]  # threads whose messages and chronicles are visible
    records: tuple[tuple[str, int], ...]  # (scope, scope_id) of visible memory records
    titles: dict[str, str] = field(default_factory=dict, compare=False)  # scope key -> "#general"


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


async def visibility(store: Store, root: Thread) -> Visibility:
    """The rules of memory sharing (DESIGN.md section 6): own conversation, shareable channels of its server."""
    keys = {root.scope_key: "this conversation"}
    records = {("channel", root.channel_id or 0)}
    if root.guild_id is not None:
        records.add(("workspace", root.guild_id))
        channel_ids = {root.channel_id}
        for ch in await channels.shared_channels(store, root.persona, root.guild_id):
            if ch.channel_id == root.channel_id:
                continue
            shared_root = await store.find_thread(ch.thread_id)
            if shared_root is not None:
                keys[shared_root.scope_key] = f"#{ch.name or ch.channel_id}"
                records.add(("channel", ch.channel_id or 0))
                channel_ids.add(ch.channel_id)
        for thread_id in await channels.discord_threads(store, root.persona, root.guild_id, channel_ids):
            records.add(("thread", thread_id))
    return Visibility(root.persona, tuple(keys), tuple(sorted(records)), keys)


def query_terms(text: str) -> list[str]:
    """Meaningful words of a query, lightly stemmed (trigrams match the rest of the word), longest first."""
    terms: dict[str, None] = {}
    for word in words(text):
        if CJK.search(word):
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
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


async def search(store: Store, seen: Visibility, text: str, shown: Shown, limit: int = 16,
                 context: str = "") -> list[Hit]:
    """The best hits for a query text that the request does not already carry, best first.

    Words of `context` (the turn before the new message) help rank but weigh a third as much.
    """
    own = query_terms(text)
    terms = own + [t for t in query_terms(context) if t not in own]
    if not terms:
        return []
    total = max(1, await store.message_count_estimate())
    common = min(COMMON_CAP, max(50, int(total * COMMON_SHARE)))
    df = await store.match_counts("messages_fts", [t for t in terms if len(t) >= 3], common)
    rare = {t: n for t, n in df.items() if n < common}
    short = [t for t in terms if len(t) < 3]
    if not rare and not short:
        return []
    hits: list[Hit] = []
    if rare:
        hits += await _indexed(store, seen, shown, rare)
    for term in short:
        for row in await store.scan_messages(term, seen.persona, seen.scope_keys, SCAN_WINDOW, CANDIDATES // 4):
            if row["seq"] not in shown.messages:
                hits.append(_message_hit(row, seen))
    # A word in no message may still be in a chronicle or a memory; one found nowhere cannot help rank.
    found = " ".join(f"{h.who} {h.text}".lower() for h in hits)
    weights = {t: math.log(1 + total / max(n, 1)) for t, n in rare.items() if n or t in found}
    weights.update({t: math.log(1 + total / 20) for t in short})  # unknown df: weigh like a fairly rare word
    weights = {t: w * (1.0 if t in own else 1 / 3) for t, w in weights.items()}
    if not weights:
        return []
    return rank(hits, weights)[:limit]


async def _indexed(store: Store, seen: Visibility, shown: Shown, terms: Collection[str]) -> list[Hit]:
    """Hits of the full-text indexes: messages, chronicles and memory versions the request does not carry."""
    query = " OR ".join(phrase(t) for t in terms)
    hits = [_message_hit(row, seen)
            for row in await store.recall_messages(query, seen.persona, seen.scope_keys, CANDIDATES)
            if row["seq"] not in shown.messages]
    hits += [_chronicle_hit(row, seen)
             for row in await store.recall_chronicles(query, seen.persona, seen.scope_keys, CANDIDATES // 4)
             if row["id"] not in shown.chronicles]
    for row in await store.recall_records(query, seen.persona, seen.records, CANDIDATES // 4):
        if row["id"] not in shown.records:
            hits += _record_hits(row, terms)
    return hits


def rank(hits: Iterable[Hit], weights: dict[str, float]) -> list[Hit]:
    """Hits carrying enough of the query's information, the most first; newer first among equals.

    Who said it counts as a match too: "what did Kai buy" is about Kai's own messages.
    """
    whole = sum(weights.values())
    patterns = {t: _word_start(t) for t in weights}
    best: dict[tuple[str, int], Hit] = {}
    for hit in hits:
        lowered = f"{hit.who} {hit.text}".lower()
        score = sum(w for t, w in weights.items() if patterns[t].search(lowered))
        if score < MIN_COVERAGE * whole:
            continue
        scored = Hit(hit.kind, hit.key, hit.text, hit.at, hit.who, hit.where, score)
        best.setdefault((hit.kind, hit.key), scored)
    # Among equals, a message before a summary quoting it (it has the exact day and speaker), then newer first.
    return sorted(best.values(), key=lambda h: (-h.score, h.kind != "message", -h.at))


def _word_start(term: str) -> re.Pattern[str]:
    """A term matched where a word starts ("eat" in "eating", not in "weather"); CJK has no word starts."""
    if CJK.search(term):
        return re.compile(re.escape(term))
    return re.compile(r"(?<![^\W_])" + re.escape(term))


def _message_hit(row, seen: Visibility) -> Hit:
    who = row["author_name"] or row["role"]
    where = seen.titles.get(row["scope_key"], "elsewhere")
    if row["kind"] != "root":
        where = f"Stelis thread \"{row['label']}\" in {where}"
    return Hit("message", row["seq"], row["content"], row["created_at"], who, where, 0.0)


def _chronicle_hit(row, seen: Visibility) -> Hit:
    where = seen.titles.get(row["scope_key"], "elsewhere")
    return Hit("chronicle", row["id"], row["chronicle_summary"], row["completed_at"] or row["created_at"],
               f"chronicle of Stelis thread \"{row['label']}\"", where, 0.0)


def _record_hits(row, terms: Collection[str]) -> list[Hit]:
    """The lines of a memory version that match, each on its own: a whole version is long and mixed."""
    kind = "short-term" if row["type"] == "short_term" else "long-term"
    where = {"workspace": "this server", "channel": "a channel", "thread": "a Discord thread"}[row["scope"]]
    hits = []
    for n, line in enumerate(row["content"].splitlines()):
        if any(t in line.lower() for t in terms):
            hits.append(Hit("memory", row["id"] * 10_000 + n, line, row["created_at"],
                            f"{kind} memory v{row['version']}", where, 0.0))
    return hits


def render(hits: list[Hit], budget: int, terms: list[str]) -> tuple[str, list[Hit]]:
    """The recall section within `budget` tokens, and the hits it holds."""
    if budget <= 0 or not hits:
        return "", []
    header = "[Recall: from earlier, found for this message]"
    used = count_tokens(header) + 2
    lines, kept = [header], []
    said: list[str] = []
    for hit in hits:
        gist = _gist(hit.text)
        if any(gist in other or other in gist for other in said):
            continue  # a summary quoting a message already shown, or the other way round
        said.append(gist)
        line = f"- {dates.day_line(hit.at)}, {hit.who} ({hit.where}): {_clip(_resolved(hit), terms)}"
        cost = count_tokens(line) + 1
        if used + cost > budget:
            continue
        lines.append(line)
        kept.append(hit)
        used += cost
    return ("\n".join(lines), kept) if kept else ("", [])


def _gist(text: str) -> str:
    """A text's words without speaker prefix or date notes, for spotting the same thing said twice."""
    text = re.sub(r"^[^:\n]{1,40}: ", "", text.strip())
    return " ".join(re.sub(r" \([^)]*\d{4}[^)]*\)", "", text).lower().split())


def _resolved(hit: Hit) -> str:
    return dates.resolve_relative(hit.text, hit.at) if hit.kind == "message" else hit.text


def _clip(text: str, terms: list[str]) -> str:
    """The text on one line, cut around its first match when long."""
    text = " ".join(text.split())
    if len(text) <= HIT_CHARS:
        return text
    lowered = text.lower()
    at = min((i for t in terms if (i := lowered.find(t)) >= 0), default=0)
    start = max(0, at - HIT_CHARS // 3)
    return ("…" if start else "") + text[start:start + HIT_CHARS] + "…"

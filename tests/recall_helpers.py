"""Each of recall's look-ups alone, through the one the store offers (Store.recall_matches)."""

from __future__ import annotations

from memory.records import MessageMatch, NoteMatch
from memory.store import Store


async def matched_messages(store: Store, terms: list[str], persona: str, keys: tuple[str, ...],
                           limit: int) -> list[MessageMatch]:
    """The best `limit` messages matching any of the terms."""
    return (await store.recall_matches([], terms, persona, keys, (), limit, 0)).messages


async def matched_notes(store: Store, terms: list[str], persona: str, keys: tuple[str, ...],
                        scopes: tuple[tuple[str, int], ...], limit: int) -> list[NoteMatch]:
    """The best `limit` chronicles and versions matching any of the terms."""
    return (await store.recall_matches(terms, [], persona, keys, scopes, 0, limit)).notes


async def said_between(store: Store, persona: str, keys: tuple[str, ...], start: float, end: float,
                       limit: int, whole_from: tuple[int, int] | None = None) -> list[MessageMatch]:
    """The newest `limit` messages said in [start, end) (but for those `whole_from` says a request shows)."""
    (found,) = (await store.recall_matches([], [], persona, keys, (), 0, 0, [(start, end)], limit, whole_from)).days
    return found

"""The PostgreSQL test server itself (issue 15): it starts, speaks asyncpg, and trigram-indexes Japanese."""

from __future__ import annotations

import asyncpg


async def test_the_throwaway_server_indexes_japanese_by_trigrams(postgres_cluster):
    db = await asyncpg.connect(postgres_cluster.url)
    try:
        await db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        await db.execute("CREATE TABLE said (id serial PRIMARY KEY, content text NOT NULL)")
        await db.execute("CREATE INDEX said_trgm ON said USING gin (content gin_trgm_ops)")
        await db.executemany("INSERT INTO said (content) VALUES ($1)",
                             [("今日は星がきれい",), ("calculator_v2 ships Friday",), ("明日は雨",)])
        assert await db.fetchval("SELECT count(*) FROM show_trgm('星がきれい')") > 0  # not C: it splits kana
        found = await db.fetch("SELECT content FROM said WHERE content LIKE '%星がき%'")
        assert [r["content"] for r in found] == ["今日は星がきれい"]
        assert await db.fetchval("SHOW fsync") == "off"
    finally:
        await db.close()

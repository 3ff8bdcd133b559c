-- 3: short-term memory bookkeeping (seed 004). One row per remembered conversation; `due_at` is the
-- single indexed deadline (idle, threshold reached, or retry), so the due-scan is one range query.
CREATE TABLE memory_channels (
    thread_id           INTEGER PRIMARY KEY REFERENCES threads(id),
    persona             TEXT NOT NULL,
    guild_id            INTEGER,
    channel_id          INTEGER,
    discord_thread_id   INTEGER,
    name                TEXT,
    public              INTEGER NOT NULL DEFAULT 0,
    shareable           INTEGER,
    paused              INTEGER NOT NULL DEFAULT 0,
    last_message_at     REAL,
    pending_count       INTEGER NOT NULL DEFAULT 0,
    covered_seq         INTEGER,
    due_at              REAL,
    failures            INTEGER NOT NULL DEFAULT 0,
    long_term_pending   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_memory_channels_due ON memory_channels(due_at) WHERE due_at IS NOT NULL AND paused = 0;
CREATE INDEX idx_memory_channels_guild ON memory_channels(persona, guild_id);

CREATE TABLE memory_pins (
    id                  INTEGER PRIMARY KEY,
    persona             TEXT NOT NULL,
    scope               TEXT NOT NULL CHECK (scope IN ('workspace', 'channel', 'thread')),
    scope_id            INTEGER NOT NULL,
    fact                TEXT NOT NULL CHECK (length(fact) > 0),
    created_at          REAL NOT NULL,
    UNIQUE (persona, scope, scope_id, fact)
);

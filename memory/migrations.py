"""Ordered schema migrations; the database's PRAGMA user_version is the index of the last one applied.

Append new migrations at the end; never edit one that has shipped.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: threads, messages, memory records, branches, settings (DESIGN.md section 3).
    """
    CREATE TABLE branches (
        id                  TEXT PRIMARY KEY,
        persona             TEXT NOT NULL,
        branch_type         TEXT NOT NULL CHECK (branch_type IN ('user', 'task', 'social', 'free')),
        label               TEXT NOT NULL,
        status              TEXT NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'suspended', 'completed')),
        task_id             TEXT,
        partner_persona     TEXT,
        current_thread_id   INTEGER REFERENCES threads(id),
        scope_key           TEXT NOT NULL,
        guild_id            INTEGER,
        channel_id          INTEGER,
        discord_thread_id   INTEGER,
        created_at          REAL NOT NULL,
        suspended_at        REAL,
        completed_at        REAL
    );
    CREATE INDEX idx_branches_persona ON branches(persona);
    CREATE INDEX idx_branches_status ON branches(persona, status);
    CREATE INDEX idx_branches_partner ON branches(partner_persona);
    CREATE INDEX idx_branches_discord ON branches(discord_thread_id);

    CREATE TABLE threads (
        id                  INTEGER PRIMARY KEY,
        persona             TEXT NOT NULL,
        kind                TEXT NOT NULL CHECK (kind IN ('root', 'stelis', 'subagent')),
        parent_thread_id    INTEGER REFERENCES threads(id),
        depth               INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
        window_ratio        REAL NOT NULL DEFAULT 0.8 CHECK (window_ratio > 0 AND window_ratio <= 1),
        status              TEXT NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'completed', 'aborted')),
        label               TEXT,
        chronicle_summary   TEXT,
        chronicle_prompt    TEXT,
        branch_id           TEXT REFERENCES branches(id),
        scope_key           TEXT NOT NULL,
        guild_id            INTEGER,
        channel_id          INTEGER,
        discord_thread_id   INTEGER,
        run_id              TEXT,
        created_at          REAL NOT NULL,
        completed_at        REAL,
        CHECK ((kind = 'root') = (parent_thread_id IS NULL))
    );
    CREATE INDEX idx_threads_parent ON threads(parent_thread_id);
    CREATE INDEX idx_threads_status ON threads(status);
    CREATE INDEX idx_threads_discord ON threads(discord_thread_id);
    CREATE UNIQUE INDEX idx_threads_root_scope ON threads(persona, scope_key) WHERE kind = 'root';

    -- AUTOINCREMENT so a sequence is never reused, even after the newest row is deleted.
    CREATE TABLE messages (
        seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
        thread_id           INTEGER NOT NULL REFERENCES threads(id),
        role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
        author_id           INTEGER,
        author_name         TEXT,
        content             TEXT NOT NULL,
        metadata            TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
        token_count         INTEGER NOT NULL CHECK (token_count >= 0),
        external_id         INTEGER UNIQUE,
        created_at          REAL NOT NULL,
        edited_at           REAL,
        deleted_at          REAL
    );
    CREATE INDEX idx_messages_thread_seq ON messages(thread_id, seq);

    CREATE TABLE memory_records (
        id                  INTEGER PRIMARY KEY,
        persona             TEXT NOT NULL,
        scope               TEXT NOT NULL CHECK (scope IN ('workspace', 'channel', 'thread')),
        scope_id            INTEGER NOT NULL,
        type                TEXT NOT NULL CHECK (type IN ('short_term', 'long_term')),
        version             INTEGER NOT NULL CHECK (version >= 1),
        content             TEXT NOT NULL,
        first_seq           INTEGER,
        last_seq            INTEGER,
        metadata            TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
        created_at          REAL NOT NULL,
        UNIQUE (persona, scope, scope_id, type, version)
    );

    CREATE TABLE settings (
        scope               TEXT NOT NULL CHECK (scope IN ('guild', 'channel')),
        scope_id            INTEGER NOT NULL,
        key                 TEXT NOT NULL,
        value               TEXT NOT NULL CHECK (json_valid(value)),
        updated_at          REAL NOT NULL,
        PRIMARY KEY (scope, scope_id, key)
    );
    """,
    # 2: the cache-stable window (seed 003) and where each Stelis thread's anchor sits in its parent.
    """
    ALTER TABLE threads ADD COLUMN anchor_seq INTEGER;
    ALTER TABLE threads ADD COLUMN window_start_seq INTEGER;
    ALTER TABLE threads ADD COLUMN window_summary TEXT;
    ALTER TABLE threads ADD COLUMN window_summary_from INTEGER;
    ALTER TABLE threads ADD COLUMN window_summary_to INTEGER;
    CREATE INDEX idx_threads_active_internal ON threads(status, kind) WHERE status = 'active';
    """,
    # 3: short-term memory bookkeeping (seed 004). One row per remembered conversation; `due_at` is the
    # single indexed deadline (idle, threshold reached, or retry), so the due-scan is one range query.
    """
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
    """,
    # 4: recall (DESIGN.md section 5): trigram full-text indexes over messages, chronicles and memory
    # versions, kept in step by triggers (edits and deletes included); the memory snapshot a window
    # shows between cuts; the dates the rolling summary covers.
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='seq',
                                                 tokenize='trigram');
    INSERT INTO messages_fts (rowid, content)
        SELECT seq, content FROM messages WHERE deleted_at IS NULL AND content != '';
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
        WHEN new.deleted_at IS NULL AND new.content != '' BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
    END;
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, deleted_at ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) SELECT 'delete', old.seq, old.content
            WHERE old.deleted_at IS NULL AND old.content != '';
        INSERT INTO messages_fts (rowid, content) SELECT new.seq, new.content
            WHERE new.deleted_at IS NULL AND new.content != '';
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.deleted_at IS NULL AND old.content != '' BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    END;

    CREATE VIRTUAL TABLE records_fts USING fts5(content, content='memory_records', content_rowid='id',
                                                tokenize='trigram');
    INSERT INTO records_fts (rowid, content) SELECT id, content FROM memory_records;
    CREATE TRIGGER records_fts_insert AFTER INSERT ON memory_records BEGIN
        INSERT INTO records_fts (rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER records_fts_update AFTER UPDATE OF content ON memory_records BEGIN
        INSERT INTO records_fts (records_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO records_fts (rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER records_fts_delete AFTER DELETE ON memory_records BEGIN
        INSERT INTO records_fts (records_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;

    CREATE VIRTUAL TABLE chronicles_fts USING fts5(chronicle_summary, content='threads', content_rowid='id',
                                                   tokenize='trigram');
    INSERT INTO chronicles_fts (rowid, chronicle_summary)
        SELECT id, chronicle_summary FROM threads WHERE chronicle_summary IS NOT NULL;
    CREATE TRIGGER chronicles_fts_insert AFTER INSERT ON threads WHEN new.chronicle_summary IS NOT NULL BEGIN
        INSERT INTO chronicles_fts (rowid, chronicle_summary) VALUES (new.id, new.chronicle_summary);
    END;
    CREATE TRIGGER chronicles_fts_update AFTER UPDATE OF chronicle_summary ON threads BEGIN
        INSERT INTO chronicles_fts (chronicles_fts, rowid, chronicle_summary)
            SELECT 'delete', old.id, old.chronicle_summary WHERE old.chronicle_summary IS NOT NULL;
        INSERT INTO chronicles_fts (rowid, chronicle_summary)
            SELECT new.id, new.chronicle_summary WHERE new.chronicle_summary IS NOT NULL;
    END;

    ALTER TABLE threads ADD COLUMN memory_as_of INTEGER;
    ALTER TABLE threads ADD COLUMN window_summary_first_at REAL;
    ALTER TABLE threads ADD COLUMN window_summary_last_at REAL;
    """,
    # 5: people who asked not to be remembered (/memory optout), per persona.
    """
    CREATE TABLE optouts (
        persona             TEXT NOT NULL,
        user_id             INTEGER NOT NULL,
        created_at          REAL NOT NULL,
        PRIMARY KEY (persona, user_id)
    );
    CREATE INDEX idx_messages_author ON messages(author_id) WHERE author_id IS NOT NULL;
    """,
    # 6: the reconnect look-up (newest Discord id of a thread) from an index, flat in the thread's size.
    """
    CREATE INDEX idx_messages_thread_external ON messages(thread_id, external_id) WHERE external_id IS NOT NULL;
    """,
    # 7: a server's most recently active shared channels read in order, however many channels it has.
    """
    CREATE INDEX idx_memory_channels_activity ON memory_channels(persona, guild_id, last_message_at)
        WHERE discord_thread_id IS NULL;
    """,
    # 8: new messages are indexed for recall in batches (Store.index_messages, before any search), not
    # one by one as they are stored: a trigram index is ten times cheaper to fill in bulk. Edits and
    # erasures keep the indexed rows in step; rows not indexed yet are indexed as they are by then.
    """
    DROP TRIGGER messages_fts_insert;
    DROP TRIGGER messages_fts_update;
    DROP TRIGGER messages_fts_delete;
    CREATE TABLE fts_progress (name TEXT PRIMARY KEY, upto INTEGER NOT NULL);
    INSERT INTO fts_progress (name, upto) SELECT 'messages', COALESCE(MAX(seq), 0) FROM messages;
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, deleted_at ON messages
        WHEN old.seq <= (SELECT upto FROM fts_progress WHERE name = 'messages') BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) SELECT 'delete', old.seq, old.content
            WHERE old.deleted_at IS NULL AND old.content != '';
        INSERT INTO messages_fts (rowid, content) SELECT new.seq, new.content
            WHERE new.deleted_at IS NULL AND new.content != '';
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.deleted_at IS NULL AND old.content != ''
            AND old.seq <= (SELECT upto FROM fts_progress WHERE name = 'messages') BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    END;
    """,
    # 9: trimmed windows (memory/window.py): the head kept, the gap after it and the bridge summary over it.
    """
    ALTER TABLE threads ADD COLUMN window_gap_from INTEGER;
    ALTER TABLE threads ADD COLUMN window_gap_to INTEGER;
    ALTER TABLE threads ADD COLUMN window_bridge TEXT;
    ALTER TABLE threads ADD COLUMN window_bridge_first_at REAL;
    ALTER TABLE threads ADD COLUMN window_bridge_last_at REAL;
    ALTER TABLE threads ADD COLUMN window_trims INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE threads ADD COLUMN window_cached_after INTEGER;
    """,
]

LATEST_VERSION = len(MIGRATIONS)

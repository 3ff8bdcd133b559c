-- 1: threads, messages, memory records, branches, settings (DESIGN.md section 3).
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

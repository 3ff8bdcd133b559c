-- 11: playbook runs and their steps (issue: playbooks), what /playbooks runs shows: each node's profile,
-- model tier, tokens, cache reads and writes, duration and a short summary of its result.
CREATE TABLE playbook_runs (
    id          INTEGER PRIMARY KEY,
    playbook    TEXT NOT NULL,
    persona     TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    args        TEXT NOT NULL DEFAULT '{}',
    result      TEXT,
    error       TEXT,
    started_at  REAL NOT NULL,
    ended_at    REAL
);
CREATE INDEX idx_playbook_runs_scope ON playbook_runs(persona, scope_key, id);
CREATE TABLE playbook_steps (
    id              INTEGER PRIMARY KEY,
    run             INTEGER NOT NULL REFERENCES playbook_runs(id),
    node            TEXT NOT NULL,
    node_type       TEXT NOT NULL,
    profile         TEXT,
    tier            TEXT,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read      INTEGER NOT NULL DEFAULT 0,
    cache_write     INTEGER NOT NULL DEFAULT 0,
    duration_ms     REAL NOT NULL,
    summary         TEXT NOT NULL DEFAULT '',
    at              REAL NOT NULL
);
CREATE INDEX idx_playbook_steps_run ON playbook_steps(run, id);

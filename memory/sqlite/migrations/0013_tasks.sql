-- 13: tasks (seed 001): a title, a goal, steps and a status; each has its task branch, whose sessions
-- are the Stelis threads the work happens in.
CREATE TABLE tasks (
    id          INTEGER PRIMARY KEY,
    persona     TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    guild_id    INTEGER,
    branch_id   TEXT REFERENCES branches(id),
    title       TEXT NOT NULL,
    goal        TEXT NOT NULL,
    steps       TEXT NOT NULL DEFAULT '[]',
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'abandoned')),
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE INDEX idx_tasks_scope ON tasks(persona, guild_id, status);

-- 14: the autonomous pulse's decision log (seed 001): every pulse, skip, decision and interruption,
-- with the model calls and tokens a pulse spent (the daily budget is summed from it).
CREATE TABLE autonomy_log (
    id         INTEGER PRIMARY KEY,
    persona    TEXT NOT NULL,
    place      TEXT NOT NULL,
    at         REAL NOT NULL,
    kind       TEXT NOT NULL,
    branch_id  TEXT,
    detail     TEXT NOT NULL DEFAULT '',
    calls      INTEGER NOT NULL DEFAULT 0,
    tokens     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_autonomy_log_place ON autonomy_log(persona, place, at);

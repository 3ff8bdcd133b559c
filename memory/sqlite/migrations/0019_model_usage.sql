-- 19: what the model was asked to do, per day, server and model: calls and tokens (cache reads and writes apart),
-- for /usage and the dashboard. guild_id 0: no server (the console, a DM, background work of none).
CREATE TABLE model_usage (
    persona       TEXT NOT NULL,
    day           TEXT NOT NULL,
    guild_id      INTEGER NOT NULL,
    model         TEXT NOT NULL,
    calls         INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read    INTEGER NOT NULL DEFAULT 0,
    cache_write   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (persona, guild_id, day, model)
);

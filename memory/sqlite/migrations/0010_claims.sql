-- 10: work claimed by one worker at a time, with a lease (a memory update of a conversation), so the
-- rule lives in the store and a shared database can hand work to one process.
CREATE TABLE claims (
    key     TEXT PRIMARY KEY,
    owner   TEXT NOT NULL,
    until   REAL NOT NULL
);

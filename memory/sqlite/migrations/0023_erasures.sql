-- 23: messages erased whose memory (versions, summaries, chronicles, the server's memory) is not rewritten yet,
-- written in the purge's own transaction: a rewrite cut short (a crash, a database gone, the process stopped) is
-- done again at the next start, so no erased word outlives it.
CREATE TABLE erasures (
    seq         INTEGER PRIMARY KEY,
    thread_id   INTEGER NOT NULL
);

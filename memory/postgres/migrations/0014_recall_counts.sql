-- 14: how many messages each word matched when recall last counted it (by the word's hash: no word is kept), so a
-- start reads the counts it needs (SQLite's 27). A cache: a purge empties it and notes the archive's size then
-- (`recall_counts_erased`); a count taken before that, in any process, is never saved.
-- Counts the archive has outgrown (counted again before use) go as new ones are saved.
CREATE TABLE recall_counts (
    word        BIGINT PRIMARY KEY,
    matches     INTEGER NOT NULL,
    archive     BIGINT NOT NULL
);
CREATE INDEX idx_recall_counts_archive ON recall_counts(archive);
CREATE TABLE recall_counts_erased (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    archive     BIGINT NOT NULL
);
INSERT INTO recall_counts_erased (id, archive) VALUES (1, 0);

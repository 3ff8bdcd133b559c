-- 8: new messages are indexed for recall in batches (Store.index_messages, before any search), not
-- one by one as they are stored: a trigram index is ten times cheaper to fill in bulk. Edits and
-- erasures keep the indexed rows in step; rows not indexed yet are indexed as they are by then.
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

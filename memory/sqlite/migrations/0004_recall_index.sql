-- 4: recall (DESIGN.md section 5): trigram full-text indexes over messages, chronicles and memory
-- versions, kept in step by triggers (edits and deletes included); the memory snapshot a window
-- shows between cuts; the dates the rolling summary covers.
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

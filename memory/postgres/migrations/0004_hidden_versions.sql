-- 4: an edited memory version replaces the one it was written from, and a rollback hides what came after the
-- version it restores: the version that hid it, kept in history, shown nowhere else (prompts, recall, the next
-- version's context).
ALTER TABLE memory_records ADD COLUMN hidden_by INTEGER;

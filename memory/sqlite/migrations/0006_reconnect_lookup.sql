-- 6: the reconnect look-up (newest Discord id of a thread) from an index, flat in the thread's size.
CREATE INDEX idx_messages_thread_external ON messages(thread_id, external_id) WHERE external_id IS NOT NULL;

-- 20: what was said on a day in these conversations: looked up conversation by conversation, each a range of
-- its own messages by time (by time alone, a busy day read every conversation's messages of that day).
CREATE INDEX idx_messages_thread_created ON messages(thread_id, created_at);

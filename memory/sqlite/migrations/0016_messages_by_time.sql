-- 16: recall finds what was said on a day a question names ("what did we say on 3 May?"): messages by time.
CREATE INDEX idx_messages_created ON messages(created_at);

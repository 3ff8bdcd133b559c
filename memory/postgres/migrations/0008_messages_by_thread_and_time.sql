-- 8: what was said on a day in the conversations one may see, looked up thread by thread: the threads by their
-- scope key (not every thread of the persona, filtered), each a range of its own messages by time (not a
-- bitmap of the thread's every message and the whole day's, intersected). SQLite's 20 and 22.
CREATE INDEX idx_messages_thread_created ON messages(thread_id, created_at);
CREATE INDEX idx_threads_scope ON threads(persona, scope_key);
-- Building them reads the whole messages table once, writes waiting meanwhile: on a database of millions of
-- messages the first start after the upgrade takes a minute or more (the log says which migration runs).

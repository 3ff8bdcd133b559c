-- 22: the threads of the conversations one may see (recall's scope keys: the roots, their Stelis threads and
-- sessions), found by key: a day's messages are read thread by thread from them, not from a walk of every thread.
CREATE INDEX idx_threads_scope ON threads(persona, scope_key);

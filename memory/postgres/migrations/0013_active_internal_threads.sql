-- 13: the active threads a start sweeps are the internal ones: every conversation's root is active too, and an
-- index of them all was read whole at each start (SQLite's 26).
DROP INDEX idx_threads_active_internal;
CREATE INDEX idx_threads_active_internal ON threads(status, depth, id) WHERE status = 'active' AND kind <> 'root';

-- 26: the active threads a start sweeps are the internal ones: every conversation's root is active too, and an
-- index of them all was read whole at each start. A run's active threads by its run (PostgreSQL's 1).
DROP INDEX idx_threads_active_internal;
CREATE INDEX idx_threads_active_internal ON threads(status, depth, id) WHERE status = 'active' AND kind != 'root';
CREATE INDEX idx_threads_run ON threads(run_id) WHERE status = 'active';

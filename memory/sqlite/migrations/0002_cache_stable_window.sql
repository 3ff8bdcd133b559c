-- 2: the cache-stable window (seed 003) and where each Stelis thread's anchor sits in its parent.
ALTER TABLE threads ADD COLUMN anchor_seq INTEGER;
ALTER TABLE threads ADD COLUMN window_start_seq INTEGER;
ALTER TABLE threads ADD COLUMN window_summary TEXT;
ALTER TABLE threads ADD COLUMN window_summary_from INTEGER;
ALTER TABLE threads ADD COLUMN window_summary_to INTEGER;
CREATE INDEX idx_threads_active_internal ON threads(status, kind) WHERE status = 'active';

-- 9: trimmed windows (memory/window.py): the head kept, the gap after it and the bridge summary over it.
ALTER TABLE threads ADD COLUMN window_gap_from INTEGER;
ALTER TABLE threads ADD COLUMN window_gap_to INTEGER;
ALTER TABLE threads ADD COLUMN window_bridge TEXT;
ALTER TABLE threads ADD COLUMN window_bridge_first_at REAL;
ALTER TABLE threads ADD COLUMN window_bridge_last_at REAL;
ALTER TABLE threads ADD COLUMN window_trims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN window_cached_after INTEGER;

-- 16: a trim's bridge holds every message of the gap it stands for (a short-term version reads it in their place);
-- this is the first message whose words it may hold (a memory version it read for some of them reaches further
-- back). NULL: a bridge written before, which holds only the newest part of each run: its messages are read as said.
ALTER TABLE threads ADD COLUMN window_bridge_from BIGINT;

-- 28: a trim's bridge holds every message of the gap it stands for (a short-term version reads it in their place);
-- this is the first message whose words it holds, its gap's start (no memory version covers such a gap). NULL: any
-- other bridge, which holds only the newest part of each run: its messages are read as said.
ALTER TABLE threads ADD COLUMN window_bridge_from INTEGER;

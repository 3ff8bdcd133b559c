-- 5: a thread's revision, bumped in the transaction of any change to a message already stored in it (an edit,
-- an erasure, an anchor's final form, an import below its newest message). Caches of a thread's window key on
-- it, and it is read with the thread row, so a change made by another process is seen at the next read.
ALTER TABLE threads ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;

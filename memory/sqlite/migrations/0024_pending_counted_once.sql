-- 24: messages an older version stored but never counted towards a memory version (a crash between its two
-- transactions) are counted once, here, and due at once; this version stores and counts a message in one
-- transaction, so no later start need look again (it read every conversation at each start).
UPDATE memory_channels SET pending_count = missed.n, due_at = COALESCE(last_message_at, 0) FROM (
    SELECT c.thread_id, COUNT(m.seq) AS n FROM memory_channels c JOIN messages m
    ON m.thread_id = c.thread_id AND m.seq > COALESCE(c.covered_seq, 0) AND m.deleted_at IS NULL
    AND m.role IN ('user', 'assistant') AND NOT (m.role = 'assistant' AND m.author_name = c.persona)
    WHERE c.pending_count = 0 AND c.paused = 0 GROUP BY c.thread_id) AS missed
WHERE memory_channels.thread_id = missed.thread_id;

-- 2: processes sharing the database see each other's erasures. Every change to stored messages or memory
-- versions that another process may hold in a cache (an erasure, an edit, an anchor rewritten, a version
-- removed) moves this sequence on; a process that finds it moved reads its windows and layers again.
CREATE SEQUENCE shared_changes;

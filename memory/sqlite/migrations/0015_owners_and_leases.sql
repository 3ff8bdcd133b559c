-- 15: shared memory work (issue 15). A conversation's memory update is claimed on its own row with a lease
-- (owner, until), so workers sharing a database each take different conversations; a Stelis thread records
-- the process that opened it, and each process beats in `owners`, so a start-up sweep aborts only threads
-- whose process is gone.
ALTER TABLE memory_channels ADD COLUMN lease_owner TEXT;
ALTER TABLE memory_channels ADD COLUMN lease_until REAL;
ALTER TABLE threads ADD COLUMN owner TEXT;
CREATE TABLE owners (
    owner        TEXT PRIMARY KEY,
    heartbeat_at REAL NOT NULL
);

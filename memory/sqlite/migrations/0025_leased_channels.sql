-- 25: the conversations some process holds for memory work, apart: a start frees the leases a crash left without
-- reading every conversation.
CREATE INDEX idx_memory_channels_leased ON memory_channels(lease_owner) WHERE lease_owner IS NOT NULL;

-- 7: a server's most recently active shared channels read in order, however many channels it has.
CREATE INDEX idx_memory_channels_activity ON memory_channels(persona, guild_id, last_message_at)
    WHERE discord_thread_id IS NULL;

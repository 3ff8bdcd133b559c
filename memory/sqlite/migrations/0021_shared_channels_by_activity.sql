-- 21: a server's most recently active shared channels, from an index of the shared ones alone: among five
-- hundred private channels, the look-up walked all of them to find none.
CREATE INDEX idx_memory_channels_shared_activity ON memory_channels(persona, guild_id, last_message_at)
    WHERE discord_thread_id IS NULL AND COALESCE(shareable, public) = 1;

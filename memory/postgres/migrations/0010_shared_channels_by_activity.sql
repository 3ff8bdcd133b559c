-- 10: a server's most recently active shared channels, from an index of the shared ones alone (SQLite's 21):
-- among five hundred private channels each reply's look-up walked all of them to find none (a burst of five
-- hundred replies spent 62 ms of the database's time on it, the most of any read).
CREATE INDEX idx_memory_channels_shared_activity ON memory_channels(persona, guild_id, last_message_at)
    WHERE discord_thread_id IS NULL AND COALESCE(shareable, public) = 1;

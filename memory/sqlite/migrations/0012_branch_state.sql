-- 12: what the working memory shows of a branch (seed 001): where it stands in a line, and when it was
-- last active (the newest come first).
ALTER TABLE branches ADD COLUMN brief_state TEXT;
ALTER TABLE branches ADD COLUMN last_activity_at REAL;
CREATE INDEX idx_branches_guild_activity ON branches(persona, guild_id, last_activity_at);

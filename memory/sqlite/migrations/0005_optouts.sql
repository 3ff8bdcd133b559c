-- 5: people who asked not to be remembered (/memory optout), per persona.
CREATE TABLE optouts (
    persona             TEXT NOT NULL,
    user_id             INTEGER NOT NULL,
    created_at          REAL NOT NULL,
    PRIMARY KEY (persona, user_id)
);
CREATE INDEX idx_messages_author ON messages(author_id) WHERE author_id IS NOT NULL;

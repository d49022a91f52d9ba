-- Stored responses of POST /v1/responses (store = true), per API key, until expires_at.
-- input_items and response are JSON text: the conversation so far and the response object.
CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    input_items TEXT NOT NULL,
    response TEXT NOT NULL
);

CREATE INDEX responses_expires ON responses (expires_at);

-- Keys and the usage ledger. Portable SQL: the same text runs on SQLite and PostgreSQL.
-- Times are unix seconds (DOUBLE PRECISION); booleans are BOOLEAN (0/1 on SQLite).

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    display_prefix TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    rpm INTEGER,
    tpm INTEGER,
    admin BOOLEAN NOT NULL DEFAULT FALSE,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
);

CREATE TABLE usage_records (
    request_id TEXT PRIMARY KEY,
    key_id TEXT,
    model TEXT,
    endpoint TEXT NOT NULL,
    status INTEGER NOT NULL,
    error_code TEXT,
    streamed BOOLEAN NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    correction_prompt_tokens BIGINT NOT NULL,
    correction_completion_tokens BIGINT NOT NULL,
    schema_retries INTEGER NOT NULL,
    upstream_calls INTEGER NOT NULL,
    latency_ms DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION NOT NULL,
    estimated BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE INDEX usage_records_key_started ON usage_records (key_id, started_at);

CREATE INDEX usage_records_started ON usage_records (started_at);

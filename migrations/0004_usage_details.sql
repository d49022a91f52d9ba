-- Usage details: the parts of the prompt columns read from and written to the provider's
-- prompt cache, and the part of the completion columns spent reasoning (each over every
-- upstream call of the request). A database already past 0004 gets it too: the migrator
-- applies every version not yet recorded, whatever its place in the order.
ALTER TABLE usage_records ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN cache_creation_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN reasoning_tokens BIGINT NOT NULL DEFAULT 0;

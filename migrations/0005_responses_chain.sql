-- Stored responses by reference: a row keeps its own input and output and names the
-- response it continues (previous_id); size_bytes is the UTF-8 size of both JSON texts,
-- what a key's stored-bytes quota sums. Older rows hold their whole history and no link;
-- their size is taken in characters (LENGTH), near enough for the quota.
ALTER TABLE responses ADD COLUMN previous_id TEXT;
ALTER TABLE responses ADD COLUMN size_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE responses SET size_bytes = LENGTH(input_items) + LENGTH(response);
CREATE INDEX responses_key_size ON responses (key_id, size_bytes);
CREATE INDEX responses_previous ON responses (previous_id);

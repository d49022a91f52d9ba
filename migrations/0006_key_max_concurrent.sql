-- A key's own bound on upstream calls in flight at once (NULL: the server's default).
ALTER TABLE api_keys ADD COLUMN max_concurrent INTEGER;

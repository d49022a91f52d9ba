-- Tools the strict projection could not make strict (x-syntic-strict-refused), comma-separated.
ALTER TABLE usage_records ADD COLUMN strict_refused TEXT;

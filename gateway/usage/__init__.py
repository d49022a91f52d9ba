"""The usage ledger: one row per request, written in batches off the response path."""

"""API keys: generation, keyed hashing, lookup (cached), revocation."""

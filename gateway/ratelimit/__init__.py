"""Per-key rate limits: Redis (shared by a fleet) or per process."""

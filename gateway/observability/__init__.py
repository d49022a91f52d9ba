"""Health, readiness, metrics and the per-request log line."""

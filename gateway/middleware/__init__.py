"""ASGI layers, outermost first: request context and error envelope, edge limits, auth,
idempotency."""

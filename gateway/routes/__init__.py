"""Endpoints that are not a dialect: models, schema check, OpenAPI, unrouted answers."""

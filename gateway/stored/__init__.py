"""Stored responses of ``POST /v1/responses``: kept per API key for a retention period."""

from __future__ import annotations

from gateway.stored.store import DbResponseStore, ResponseStore, StoredResponse

__all__ = ["DbResponseStore", "ResponseStore", "StoredResponse"]

"""The OpenAI Responses dialect: ``POST /v1/responses`` and the stored responses."""

from __future__ import annotations

from gateway.dialects.responses.decode import decode_request
from gateway.dialects.responses.endpoint import create_response, response_by_id

__all__ = ["create_response", "decode_request", "response_by_id"]

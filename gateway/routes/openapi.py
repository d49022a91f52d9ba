"""The gateway's own API as a hand-written OpenAPI 3.1 document (``GET /openapi.json``).

Written by hand, not derived from code, so it says what clients may rely on; a test checks
that every route the app serves is documented here and every path here is served.
The component schemas are in ``gateway.routes.openapi_schemas``; this module holds the
paths and assembles the document.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.admin.openapi_doc import ADMIN_SCHEMAS, ADMIN_SECURITY_SCHEME, admin_paths
from gateway.routes.openapi_schemas import SCHEMAS
from gateway.routes.openapi_schemas import ref as _ref

_JSON = "application/json"


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Malformed request, or a schema outside the strict subset "
        "(`schema_not_strict`, `invalid_tool_schema`, `strict_not_supported`).",
        401: "Missing, unknown or revoked API key.",
        404: "Unknown model, or an unknown, expired or another key's stored response.",
        413: "Request body over the size limit.",
        422: "Output still invalid after one correction "
        "(`tool_arguments_invalid`, `json_output_invalid`); `param` is the JSON pointer.",
        429: "Rate limit exceeded; see `retry-after` and `x-ratelimit-*`.",
        502: "The upstream model failed.",
        503: "Overloaded, or the stored responses are unavailable.",
        504: "The upstream model timed out.",
    }
    return {
        str(s): {
            "description": text[s],
            "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
            "content": {_JSON: {"schema": _ref("ErrorEnvelope")}},
        }
        for s in statuses
    }


_RETRIES = {
    "x-syntic-schema-retries": {"$ref": "#/components/headers/SchemaRetries"},
    "x-syntic-strict-refused": {"$ref": "#/components/headers/StrictRefused"},
}
_REQ_ID = {"x-request-id": {"$ref": "#/components/headers/RequestId"}}
_BEARER: list[dict[str, list[str]]] = [{"bearer": []}, {"apiKey": []}]


def _post(
    op: str, summary: str, request: str, ok: dict[str, Any], errors: tuple[int, ...]
) -> dict[str, Any]:
    return {
        "post": {
            "operationId": op,
            "summary": summary,
            "security": _BEARER,
            "requestBody": {"required": True, "content": {_JSON: {"schema": _ref(request)}}},
            "responses": {"200": ok, **_errors(*errors)},
        }
    }


def _get(op: str, summary: str, responses: dict[str, Any], auth: bool) -> dict[str, Any]:
    return {
        "get": {
            "operationId": op,
            "summary": summary,
            "security": _BEARER if auth else [],
            "responses": responses,
        }
    }


_MODEL_ERRORS = (400, 401, 404, 413, 422, 429, 502, 503, 504)


def _stored_op(op: str, summary: str, ok: dict[str, Any]) -> dict[str, Any]:
    return {
        "operationId": op,
        "summary": summary,
        "security": _BEARER,
        "parameters": [
            {"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}
        ],
        "responses": {"200": ok, **_errors(401, 404, 503)},
    }


_SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def _completion_ok(schema: str) -> dict[str, Any]:
    return {
        "description": "The reply; with `stream: true`, server-sent events.",
        "headers": {**_REQ_ID, **_RETRIES},
        "content": {_JSON: {"schema": _ref(schema)}, **_SSE},
    }


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (built once)."""
    paths: dict[str, Any] = {
        "/v1/chat/completions": _post(
            "createChatCompletion",
            "OpenAI chat completions with strict tool arguments",
            "ChatCompletionRequest",
            _completion_ok("ChatCompletion"),
            _MODEL_ERRORS,
        ),
        "/v1/messages": _post(
            "createMessage",
            "Anthropic Messages with strict tool input",
            "MessagesRequest",
            _completion_ok("Message"),
            _MODEL_ERRORS,
        ),
        "/v1/messages/count_tokens": _post(
            "countMessageTokens",
            "Anthropic token counting (x-syntic-token-count: who counted)",
            "CountTokensRequest",
            _json(_ref("TokenCount"), "The prompt's input tokens."),
            (400, 401, 404, 413, 429, 502, 503, 504),
        ),
        "/v1/responses": _post(
            "createResponse",
            "OpenAI Responses with strict function tools (strict by default)",
            "ResponsesRequest",
            _completion_ok("Response"),
            _MODEL_ERRORS,
        ),
        "/v1/responses/{response_id}": {
            "get": _stored_op(
                "getResponse",
                "A stored response (the key that made it only)",
                _json(_ref("Response"), "The stored response."),
            ),
            "delete": _stored_op(
                "deleteResponse",
                "Delete a stored response",
                _json(_ref("ResponseDeleted"), "Deleted."),
            ),
        },
        "/v1/schemas/check": _post(
            "checkSchemas",
            "Pre-flight lint of tool and output schemas (no model call)",
            "SchemaCheckRequest",
            _json(_ref("SchemaCheckResult"), "The check."),
            (400, 401, 413, 429),
        ),
        "/v1/models": _get(
            "listModels",
            "The model catalogue with capabilities",
            {"200": _json(_ref("ModelList"), "The catalogue."), **_errors(401)},
            auth=True,
        ),
        "/healthz": _get(
            "healthz",
            "Liveness (no auth)",
            {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["status"],
                        "properties": {"status": {"const": "ok"}},
                    },
                    "Alive.",
                )
            },
            auth=False,
        ),
        "/readyz": _get(
            "readyz",
            "Readiness: database, models; Redis when configured (non-fatal) (no auth)",
            {
                "200": _json(_ref("Readiness"), "Ready."),
                "503": _json(_ref("Readiness"), "Not ready; `reasons` says why."),
            },
            auth=False,
        ),
        "/metrics": _get(
            "metrics",
            "Prometheus metrics (no auth: do not expose publicly)",
            {
                "200": {
                    "description": "Text exposition format 0.0.4.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
            auth=False,
        ),
        "/openapi.json": _get(
            "openapi",
            "This document",
            {"200": _json({"type": "object"}, "OpenAPI 3.1.")},
            auth=False,
        ),
    }
    paths.update(admin_paths())  # /admin/* and /console
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Syntic gateway",
            "version": "0.1.0",
            "description": "OpenAI- and Anthropic-compatible gateway that guarantees "
            "tool-call arguments match the tool's JSON schema when the tool says strict.",
        },
        "paths": paths,
        "components": {
            "schemas": {**SCHEMAS, **ADMIN_SCHEMAS},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "sk_live_..."},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "adminBearer": ADMIN_SECURITY_SCHEME,
            },
            "headers": {
                "RequestId": {"schema": {"type": "string"}, "description": "Also in the body."},
                "SchemaRetries": {
                    "schema": {"type": "string", "pattern": "^[0-9]+$"},
                    "description": "Correction calls made; sent when strict was requested.",
                },
                "StrictRefused": {
                    "schema": {"type": "string"},
                    "description": "Tools the strict projection (x-syntic-strictify: 1 or "
                    "the model's strictify) could not make strict, comma-separated.",
                },
            },
        },
    }


@cache
def _document_bytes() -> bytes:
    return orjson.dumps(openapi_document())


async def openapi_json(request: Request) -> Response:
    """``GET /openapi.json``."""
    return Response(_document_bytes(), media_type=_JSON)

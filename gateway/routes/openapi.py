"""The gateway's own API as a hand-written OpenAPI 3.1 document (``GET /openapi.json``).

Written by hand, not derived from code, so it says what clients may rely on; a test checks
that every route the app serves is documented here and every path here is served.
Request schemas are deliberately open (``additionalProperties`` allowed): the wire formats
are OpenAI's and Anthropic's, and the gateway passes unknown fields through. Response
schemas state the fields the gateway always sends.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.admin.openapi_doc import ADMIN_SCHEMAS, ADMIN_SECURITY_SCHEME, admin_paths

_JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


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


_SCHEMAS: dict[str, Any] = {
    "ErrorEnvelope": {
        "type": "object",
        "required": ["error", "request_id"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["type", "code", "message", "param"],
                "properties": {
                    "type": {"type": "string"},
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                },
            },
            "request_id": {"type": "string"},
        },
    },
    "JsonSchema": {
        "description": "A JSON Schema (Draft 2020-12, the strict subset for strict tools).",
        "type": ["object", "boolean"],
    },
    "OpenAITool": {
        "type": "object",
        "required": ["type", "function"],
        "properties": {
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "parameters": _ref("JsonSchema"),
                    "strict": {"type": "boolean", "default": False},
                },
            },
        },
    },
    "AnthropicTool": {
        "type": "object",
        "required": ["name", "input_schema"],
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "input_schema": _ref("JsonSchema"),
            "strict": {"type": "boolean"},
        },
    },
    "ResponseFormat": {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"enum": ["text", "json_object", "json_schema"]},
            "json_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "strict": {"type": "boolean"},
                    "schema": _ref("JsonSchema"),
                },
            },
        },
    },
    "OutputConfig": {
        "type": "object",
        "properties": {
            "format": {
                "type": "object",
                "required": ["type", "schema"],
                "properties": {"type": {"const": "json_schema"}, "schema": _ref("JsonSchema")},
            }
        },
    },
    "ChatCompletionRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string"},
            "messages": {"type": "array", "items": {"type": "object"}},
            "tools": {"type": "array", "maxItems": 128, "items": _ref("OpenAITool")},
            "tool_choice": {"type": ["string", "object"]},
            "response_format": _ref("ResponseFormat"),
            "stream": {"type": "boolean"},
            "max_tokens": {"type": "integer"},
            "temperature": {"type": "number"},
            "n": {
                "type": "integer",
                "minimum": 1,
                "maximum": 16,
                "description": "Choices: one upstream call each, each enforced on its own.",
            },
        },
    },
    "ChatCompletion": {
        "type": "object",
        "required": ["id", "object", "created", "model", "choices", "usage"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index", "message", "finish_reason"],
                    "properties": {
                        "index": {"type": "integer"},
                        "finish_reason": {"type": ["string", "null"]},
                        "message": {
                            "type": "object",
                            "required": ["role", "content"],
                            "properties": {
                                "role": {"const": "assistant"},
                                "content": {"type": ["string", "null"]},
                                "tool_calls": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["id", "type", "function"],
                                        "properties": {
                                            "id": {"type": "string"},
                                            "type": {"const": "function"},
                                            "function": {
                                                "type": "object",
                                                "required": ["name", "arguments"],
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "arguments": {
                                                        "type": "string",
                                                        "description": "JSON text; for a "
                                                        "strict tool it parses and matches "
                                                        "the tool's schema.",
                                                    },
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
            "usage": _ref("OpenAIUsage"),
        },
    },
    "OpenAIUsage": {
        "type": "object",
        "required": ["prompt_tokens", "completion_tokens", "total_tokens", "schema_retries"],
        "properties": {
            "prompt_tokens": {"type": "integer"},
            "completion_tokens": {"type": "integer"},
            "total_tokens": {"type": "integer"},
            "schema_retries": {"type": "integer", "description": "Correction calls made."},
        },
    },
    "MessagesRequest": {
        "type": "object",
        "required": ["model", "messages", "max_tokens"],
        "properties": {
            "model": {"type": "string"},
            "max_tokens": {"type": "integer"},
            "system": {"type": ["string", "array"]},
            "messages": {"type": "array", "items": {"type": "object"}},
            "tools": {"type": "array", "maxItems": 128, "items": _ref("AnthropicTool")},
            "tool_choice": {"type": "object"},
            "output_config": _ref("OutputConfig"),
            "stream": {"type": "boolean"},
        },
    },
    "Message": {
        "type": "object",
        "required": ["id", "type", "role", "model", "content", "stop_reason", "usage"],
        "properties": {
            "id": {"type": "string"},
            "type": {"const": "message"},
            "role": {"const": "assistant"},
            "model": {"type": "string"},
            "content": {"type": "array", "items": {"type": "object"}},
            "stop_reason": {"type": ["string", "null"]},
            "stop_sequence": {"type": ["string", "null"]},
            "usage": {
                "type": "object",
                "required": ["input_tokens", "output_tokens", "schema_retries"],
                "properties": {
                    "input_tokens": {"type": "integer"},
                    "output_tokens": {"type": "integer"},
                    "schema_retries": {"type": "integer"},
                },
            },
        },
    },
    "FunctionTool": {
        "type": "object",
        "required": ["type", "name"],
        "properties": {
            "type": {"const": "function"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "parameters": _ref("JsonSchema"),
            "strict": {"type": ["boolean", "null"], "default": True,
                       "description": "Omitted or null: strict (the Responses API's default)."},
        },
    },
    "ResponsesRequest": {
        "type": "object",
        "required": ["model", "input"],
        "description": "Fields outside this list are 400 `unknown_parameter`; hosted tools, "
        "`background`, `conversation`, `prompt` are 400 `unsupported_parameter`.",
        "properties": {
            "model": {"type": "string"},
            "input": {"type": ["string", "array"], "items": {"type": "object"},
                      "description": "Messages, `function_call` and `function_call_output` "
                      "items."},
            "instructions": {"type": ["string", "null"]},
            "tools": {"type": "array", "maxItems": 128, "items": _ref("FunctionTool")},
            "tool_choice": {"type": ["string", "object"]},
            "parallel_tool_calls": {"type": ["boolean", "null"]},
            "text": {
                "type": "object",
                "properties": {
                    "format": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"enum": ["text", "json_object", "json_schema"]},
                            "name": {"type": "string"},
                            "strict": {"type": ["boolean", "null"]},
                            "schema": _ref("JsonSchema"),
                        },
                    },
                },
            },
            "max_output_tokens": {"type": ["integer", "null"], "minimum": 1},
            "temperature": {"type": ["number", "null"]},
            "top_p": {"type": ["number", "null"]},
            "metadata": {"type": ["object", "null"], "maxProperties": 16,
                         "additionalProperties": {"type": "string", "maxLength": 512}},
            "stream": {"type": ["boolean", "null"]},
            "store": {"type": ["boolean", "null"], "default": True,
                      "description": "Keep the response for `responses_retention_s`."},
            "previous_response_id": {"type": ["string", "null"]},
            "include": {"type": ["array", "null"], "items": {"type": "string"}},
        },
    },
    "Response": {
        "type": "object",
        "required": ["id", "object", "created_at", "status", "model", "output", "usage",
                     "tools", "tool_choice", "parallel_tool_calls"],
        "properties": {
            "id": {"type": "string", "pattern": "^resp_"},
            "object": {"const": "response"},
            "created_at": {"type": "integer"},
            "status": {"enum": ["completed", "incomplete", "failed", "in_progress"]},
            "model": {"type": "string"},
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "id", "status"],
                    "properties": {
                        "type": {"enum": ["message", "function_call"]},
                        "id": {"type": "string"},
                        "status": {"type": "string"},
                        "content": {"type": "array", "items": {"type": "object"}},
                        "call_id": {"type": "string"},
                        "name": {"type": "string"},
                        "arguments": {
                            "type": "string",
                            "description": "JSON text; for a strict tool it parses and "
                            "matches the tool's schema.",
                        },
                    },
                },
            },
            "usage": {
                "type": ["object", "null"],
                "required": ["input_tokens", "output_tokens", "total_tokens", "schema_retries"],
                "properties": {
                    "input_tokens": {"type": "integer"},
                    "output_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"},
                    "schema_retries": {"type": "integer", "description": "Correction calls."},
                },
            },
            "incomplete_details": {"type": ["object", "null"]},
            "error": {"type": ["object", "null"]},
            "previous_response_id": {"type": ["string", "null"]},
            "store": {"type": "boolean"},
            "tools": {"type": "array", "items": _ref("FunctionTool")},
            "tool_choice": {"type": ["string", "object"]},
            "parallel_tool_calls": {"type": "boolean"},
        },
    },
    "ResponseDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "response"},
            "deleted": {"const": True},
        },
    },
    "ModelList": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "object", "capabilities"],
                    "properties": {
                        "id": {"type": "string"},
                        "object": {"const": "model"},
                        "capabilities": {
                            "type": "object",
                            "required": [
                                "strict_tools", "constrained", "json_schema_output", "streaming"
                            ],
                            "properties": {
                                "strict_tools": {"type": "boolean"},
                                "constrained": {"type": "boolean"},
                                "json_schema_output": {"type": "boolean"},
                                "streaming": {"type": "boolean"},
                            },
                        },
                    },
                },
            },
        },
    },
    "SchemaCheckRequest": {
        "type": "object",
        "description": "Any of tools (either wire format), response_format, output_config.",
        "properties": {
            "tools": {
                "type": "array",
                "maxItems": 128,
                "items": {"anyOf": [_ref("OpenAITool"), _ref("AnthropicTool")]},
            },
            "response_format": _ref("ResponseFormat"),
            "output_config": _ref("OutputConfig"),
        },
    },
    "Issue": {
        "type": "object",
        "required": ["code", "param", "message"],
        "properties": {
            "code": {"enum": ["schema_not_strict", "invalid_tool_schema"]},
            "param": {"type": "string"},
            "message": {"type": "string"},
        },
    },
    "SchemaCheckResult": {
        "type": "object",
        "required": ["ok", "schemas", "issues"],
        "properties": {
            "ok": {"type": "boolean", "description": "Every schema is strict-ready."},
            "issues": {"type": "array", "items": _ref("Issue")},
            "schemas": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["param", "name", "strict", "ok", "issues", "counts", "strictify"],
                    "properties": {
                        "param": {"type": "string"},
                        "name": {"type": ["string", "null"]},
                        "strict": {"type": "boolean"},
                        "ok": {"type": "boolean"},
                        "issues": {"type": "array", "items": _ref("Issue")},
                        "counts": {
                            "type": "object",
                            "additionalProperties": {
                                "type": "object",
                                "required": ["value", "limit"],
                                "properties": {
                                    "value": {"type": "integer"},
                                    "limit": {"type": "integer"},
                                },
                            },
                        },
                        "strictify": {
                            "description": "For a schema that is not strict-ready: the strict "
                            "projection, or why none exists.",
                            "oneOf": [
                                {"type": "null"},
                                {
                                    "type": "object",
                                    "required": ["ok", "schema", "changes", "refusals"],
                                    "properties": {
                                        "ok": {"type": "boolean"},
                                        "schema": {"type": ["object", "null"]},
                                        "changes": {"type": "array", "items": {"type": "string"}},
                                        "refusals": {"type": "array", "items": _ref("Issue")},
                                    },
                                },
                            ],
                        },
                    },
                },
            },
        },
    },
    "Readiness": {
        "type": "object",
        "required": ["status", "checks", "reasons"],
        "properties": {
            "status": {"enum": ["ready", "unavailable"]},
            "checks": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["ok", "ms", "reason"],
                    "properties": {
                        "ok": {"type": "boolean"},
                        "ms": {"type": "number"},
                        "reason": {"type": ["string", "null"]},
                    },
                },
            },
            "reasons": {"type": "array", "items": {"type": "string"},
                        "description": "Failed fatal checks (database, models): 503."},
            "degraded": {"type": "array", "items": {"type": "string"},
                         "description": "Failed non-fatal checks (Redis): still 200."},
            "redis": {"enum": ["ok", "degraded"],
                      "description": "Present when Redis is configured; degraded: "
                                     "unreachable, limits are per process."},
        },
    },
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
        "parameters": [{"name": "response_id", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
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
            "createChatCompletion", "OpenAI chat completions with strict tool arguments",
            "ChatCompletionRequest", _completion_ok("ChatCompletion"), _MODEL_ERRORS,
        ),
        "/v1/messages": _post(
            "createMessage", "Anthropic Messages with strict tool input",
            "MessagesRequest", _completion_ok("Message"), _MODEL_ERRORS,
        ),
        "/v1/responses": _post(
            "createResponse", "OpenAI Responses with strict function tools (strict by default)",
            "ResponsesRequest", _completion_ok("Response"), _MODEL_ERRORS,
        ),
        "/v1/responses/{response_id}": {
            "get": _stored_op("getResponse", "A stored response (the key that made it only)",
                              _json(_ref("Response"), "The stored response.")),
            "delete": _stored_op("deleteResponse", "Delete a stored response",
                                 _json(_ref("ResponseDeleted"), "Deleted.")),
        },
        "/v1/schemas/check": _post(
            "checkSchemas", "Pre-flight lint of tool and output schemas (no model call)",
            "SchemaCheckRequest", _json(_ref("SchemaCheckResult"), "The check."),
            (400, 401, 413, 429),
        ),
        "/v1/models": _get(
            "listModels", "The model catalogue with capabilities",
            {"200": _json(_ref("ModelList"), "The catalogue."), **_errors(401)}, auth=True,
        ),
        "/healthz": _get(
            "healthz", "Liveness (no auth)",
            {"200": _json({"type": "object", "required": ["status"],
                           "properties": {"status": {"const": "ok"}}}, "Alive.")},
            auth=False,
        ),
        "/readyz": _get(
            "readyz", "Readiness: database, models; Redis when configured (non-fatal) (no auth)",
            {"200": _json(_ref("Readiness"), "Ready."),
             "503": _json(_ref("Readiness"), "Not ready; `reasons` says why.")},
            auth=False,
        ),
        "/metrics": _get(
            "metrics", "Prometheus metrics (no auth: do not expose publicly)",
            {"200": {"description": "Text exposition format 0.0.4.",
                     "content": {"text/plain": {"schema": {"type": "string"}}}}},
            auth=False,
        ),
        "/openapi.json": _get(
            "openapi", "This document",
            {"200": _json({"type": "object"}, "OpenAPI 3.1.")}, auth=False,
        ),
    }  # fmt: skip
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
            "schemas": {**_SCHEMAS, **ADMIN_SCHEMAS},
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

"""The component schemas of the gateway's OpenAPI document (``gateway.routes.openapi``).

Request schemas are deliberately open (``additionalProperties`` allowed): the wire formats
are OpenAI's and Anthropic's, and the gateway passes unknown fields through. Response
schemas state the fields the gateway always sends.
"""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, str]:
    """A JSON reference to one of the document's component schemas."""
    return {"$ref": f"#/components/schemas/{name}"}


# Sent (true) only when the upstream reported no usage and the gateway estimated it.
_ESTIMATED = {"const": True, "description": "The gateway estimated these counts."}

SCHEMAS: dict[str, Any] = {
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
                    "parameters": ref("JsonSchema"),
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
            "input_schema": ref("JsonSchema"),
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
                    "schema": ref("JsonSchema"),
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
                "properties": {"type": {"const": "json_schema"}, "schema": ref("JsonSchema")},
            }
        },
    },
    "ChatCompletionRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string"},
            "messages": {"type": "array", "items": {"type": "object"}},
            "tools": {"type": "array", "maxItems": 128, "items": ref("OpenAITool")},
            "tool_choice": {"type": ["string", "object"]},
            "response_format": ref("ResponseFormat"),
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
            "usage": ref("OpenAIUsage"),
        },
    },
    "OpenAIUsage": {
        "type": "object",
        "required": ["prompt_tokens", "completion_tokens", "total_tokens", "schema_retries"],
        "properties": {
            "prompt_tokens": {"type": "integer"},
            "completion_tokens": {"type": "integer"},
            "total_tokens": {"type": "integer"},
            "prompt_tokens_details": {
                "type": "object",
                "properties": {
                    "cached_tokens": {"type": "integer"},
                    "cache_write_tokens": {"type": "integer"},
                },
            },
            "completion_tokens_details": {
                "type": "object",
                "properties": {"reasoning_tokens": {"type": "integer"}},
            },
            "schema_retries": {"type": "integer", "description": "Correction calls made."},
            "estimated": _ESTIMATED,
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
            "tools": {"type": "array", "maxItems": 128, "items": ref("AnthropicTool")},
            "tool_choice": {"type": "object"},
            "output_config": ref("OutputConfig"),
            "stream": {"type": "boolean"},
        },
    },
    "CountTokensRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string"},
            "system": {"type": ["string", "array"]},
            "messages": {"type": "array", "items": {"type": "object"}},
            "tools": {"type": "array", "maxItems": 128, "items": ref("AnthropicTool")},
            "tool_choice": {"type": "object"},
        },
    },
    "TokenCount": {
        "type": "object",
        "required": ["input_tokens"],
        "properties": {"input_tokens": {"type": "integer", "minimum": 0}},
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
                "required": [
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "output_tokens",
                    "schema_retries",
                ],
                "properties": {
                    "input_tokens": {
                        "type": "integer",
                        "description": "Input tokens not read from or written to the cache.",
                    },
                    "cache_creation_input_tokens": {"type": "integer"},
                    "cache_read_input_tokens": {"type": "integer"},
                    "output_tokens": {"type": "integer"},
                    "output_tokens_details": {
                        "type": "object",
                        "properties": {"thinking_tokens": {"type": "integer"}},
                    },
                    "schema_retries": {"type": "integer"},
                    "estimated": _ESTIMATED,
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
            "parameters": ref("JsonSchema"),
            "strict": {
                "type": ["boolean", "null"],
                "default": True,
                "description": "Omitted or null: strict (the Responses API's default).",
            },
        },
    },
    "ResponsesRequest": {
        "type": "object",
        "required": ["model", "input"],
        "description": "Fields outside this list are 400 `unknown_parameter`; hosted tools, "
        "`background`, `conversation`, `prompt` are 400 `unsupported_parameter`.",
        "properties": {
            "model": {"type": "string"},
            "input": {
                "type": ["string", "array"],
                "items": {"type": "object"},
                "description": "Messages, `function_call` and `function_call_output` items.",
            },
            "instructions": {"type": ["string", "null"]},
            "tools": {"type": "array", "maxItems": 128, "items": ref("FunctionTool")},
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
                            "schema": ref("JsonSchema"),
                        },
                    },
                },
            },
            "max_output_tokens": {"type": ["integer", "null"], "minimum": 1},
            "temperature": {"type": ["number", "null"]},
            "top_p": {"type": ["number", "null"]},
            "metadata": {
                "type": ["object", "null"],
                "maxProperties": 16,
                "additionalProperties": {"type": "string", "maxLength": 512},
            },
            "stream": {"type": ["boolean", "null"]},
            "store": {
                "type": ["boolean", "null"],
                "default": True,
                "description": "Keep the response for `responses_retention_s`.",
            },
            "previous_response_id": {"type": ["string", "null"]},
            "include": {"type": ["array", "null"], "items": {"type": "string"}},
        },
    },
    "Response": {
        "type": "object",
        "required": [
            "id",
            "object",
            "created_at",
            "status",
            "model",
            "output",
            "usage",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
        ],
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
                "required": [
                    "input_tokens",
                    "input_tokens_details",
                    "output_tokens",
                    "output_tokens_details",
                    "total_tokens",
                    "schema_retries",
                ],
                "properties": {
                    "input_tokens": {"type": "integer"},
                    "input_tokens_details": {
                        "type": "object",
                        "required": ["cached_tokens", "cache_write_tokens"],
                        "properties": {
                            "cached_tokens": {"type": "integer"},
                            "cache_write_tokens": {"type": "integer"},
                        },
                    },
                    "output_tokens": {"type": "integer"},
                    "output_tokens_details": {
                        "type": "object",
                        "required": ["reasoning_tokens"],
                        "properties": {"reasoning_tokens": {"type": "integer"}},
                    },
                    "total_tokens": {"type": "integer"},
                    "schema_retries": {"type": "integer", "description": "Correction calls."},
                    "estimated": _ESTIMATED,
                },
            },
            "incomplete_details": {"type": ["object", "null"]},
            "error": {"type": ["object", "null"]},
            "previous_response_id": {"type": ["string", "null"]},
            "store": {"type": "boolean"},
            "tools": {"type": "array", "items": ref("FunctionTool")},
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
                                "strict_tools",
                                "constrained",
                                "json_schema_output",
                                "streaming",
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
                "items": {"anyOf": [ref("OpenAITool"), ref("AnthropicTool")]},
            },
            "response_format": ref("ResponseFormat"),
            "output_config": ref("OutputConfig"),
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
            "issues": {"type": "array", "items": ref("Issue")},
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
                        "issues": {"type": "array", "items": ref("Issue")},
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
                                        "refusals": {"type": "array", "items": ref("Issue")},
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
            "reasons": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Failed fatal checks (database, models): 503.",
            },
            "degraded": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Failed non-fatal checks (Redis): still 200.",
            },
            "redis": {
                "enum": ["ok", "degraded"],
                "description": "Present when Redis is configured; degraded: "
                "unreachable, limits are per process.",
            },
        },
    },
}

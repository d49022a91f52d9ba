"""The admin API and console in the gateway's OpenAPI document.

Merged into the whole document by ``gateway.routes.openapi``.

Kept beside the handlers so a change to ``gateway.admin.api`` and its documentation land
together; ``gateway.routes.openapi`` adds ``admin_paths()`` and ``ADMIN_SCHEMAS`` to its own.
"""

from __future__ import annotations

from typing import Any

from gateway.admin.queries import REQUEST_COLUMNS
from gateway.keys.fields import MAX_LIMIT, MAX_NAME_CHARS

_JSON = "application/json"
_ADMIN: list[dict[str, list[str]]] = [{"adminBearer": []}]

ADMIN_SECURITY_SCHEME: dict[str, Any] = {
    "type": "http",
    "scheme": "bearer",
    "description": "An admin key, sk_admin_... (syntic keys create --admin). "
    "Customer keys get 403 permission_denied.",
}

_ERROR_TEXT = {
    400: "Malformed request or query parameter (`param` names it).",
    401: "Missing, unknown or revoked admin key.",
    403: "A customer key: the admin API needs an admin key (`permission_denied`).",
    404: "No such key.",
    413: "Request body over the size limit.",
    503: "The database is unavailable.",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _ok(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {_JSON: {"schema": schema}},
    }


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(s): {
            "description": _ERROR_TEXT[s],
            "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
            "content": {_JSON: {"schema": _ref("ErrorEnvelope")}},
        }
        for s in statuses
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


_TIME = {"type": "string", "description": "Unix seconds, ISO 8601, or relative (-1h, -7d)."}
_NUM = {"type": "number"}
_INT = {"type": "integer"}
_NULL_STR = {"type": ["string", "null"]}
_AGG_INTS = (
    "requests",
    "errors_4xx",
    "unprocessable_422",
    "errors_5xx",
    "streamed",
    "estimated",
    "prompt_tokens",
    "completion_tokens",
    "correction_prompt_tokens",
    "correction_completion_tokens",
    "first_attempt_tokens",
    "correction_tokens",
    "schema_retries",
    "corrected_requests",
    "upstream_calls",
    "cache_read_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
)
_AGG_NUMS = ("correction_rate", "unprocessable_rate", "latency_ms_avg")


def _agg(**extra: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {n: _INT for n in _AGG_INTS}
    props.update({n: _NUM for n in _AGG_NUMS})
    props.update(extra)
    return {"type": "object", "required": sorted(props), "properties": props}


def _rows_of(**group: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": _agg(**group)}


ADMIN_SCHEMAS: dict[str, Any] = {
    "AdminKey": {
        "type": "object",
        "description": "A key as listed: never its secret.",
        "required": [
            "id",
            "name",
            "kind",
            "display_prefix",
            "rpm",
            "tpm",
            "max_concurrent",
            "admin",
            "created_at",
            "revoked_at",
            "revoked",
        ],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "kind": {"enum": ["live", "test", "admin"]},
            "display_prefix": {"type": "string", "description": "e.g. sk_live_AbCd"},
            "rpm": {"type": ["integer", "null"]},
            "tpm": {"type": ["integer", "null"]},
            "max_concurrent": {
                "type": ["integer", "null"],
                "description": "Upstream calls in flight at once per replica; "
                "null: the server's max_concurrent_per_key.",
            },
            "admin": {"type": "boolean"},
            "created_at": _NUM,
            "revoked_at": {"type": ["number", "null"]},
            "revoked": {"type": "boolean"},
        },
    },
    "CreateKeyRequest": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_NAME_CHARS,
                "description": "No control characters.",
            },
            "rpm": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT},
            "tpm": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT},
            "max_concurrent": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_LIMIT},
            "test": {"type": "boolean", "default": False, "description": "An sk_test_ key."},
        },
    },
    "CreatedKey": {
        "type": "object",
        "required": ["key", "secret"],
        "properties": {
            "key": _ref("AdminKey"),
            "secret": {"type": "string", "description": "The key; shown this once only."},
        },
    },
    "KeyList": {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "array", "items": _ref("AdminKey")}},
    },
    "RevokedKey": {
        "type": "object",
        "required": ["key", "already_revoked", "propagation_s"],
        "properties": {
            "key": _ref("AdminKey"),
            "already_revoked": {"type": "boolean"},
            "propagation_s": {
                "type": "number",
                "description": "Other replicas refuse the key within this many seconds.",
            },
        },
    },
    "UsageAggregate": _agg(),
    "UsageReport": {
        "type": "object",
        "required": [
            "since",
            "until",
            "bucket",
            "bucket_seconds",
            "filters",
            "totals",
            "by_key",
            "by_model",
            "by_endpoint",
            "by_status",
            "by_error_code",
            "series",
        ],
        "properties": {
            "since": _NUM,
            "until": _NUM,
            "bucket": {"type": "string"},
            "bucket_seconds": _INT,
            "filters": {
                "type": "object",
                "required": ["key_id", "model"],
                "properties": {"key_id": _NULL_STR, "model": _NULL_STR},
            },
            "totals": _ref("UsageAggregate"),
            "by_key": _rows_of(key_id=_NULL_STR),
            "by_model": _rows_of(model=_NULL_STR),
            "by_endpoint": _rows_of(endpoint={"type": "string"}),
            "by_status": _rows_of(status=_INT),
            "by_error_code": _rows_of(error_code=_NULL_STR),
            "series": {
                "type": "object",
                "description": "Sparse: buckets without requests are omitted. `t` is the "
                "bucket start (unix seconds).",
                "required": ["total", "by_model", "by_key"],
                "properties": {
                    "total": _rows_of(t=_NUM),
                    "by_model": _rows_of(t=_NUM, model=_NULL_STR),
                    "by_key": _rows_of(t=_NUM, key_id=_NULL_STR),
                },
            },
        },
    },
    "LedgerRow": {
        "type": "object",
        "description": "One ledger row. The ledger stores no prompts or completions.",
        "required": list(REQUEST_COLUMNS),  # every column the endpoint selects
        "additionalProperties": False,
        "properties": {
            "request_id": {"type": "string"},
            "key_id": _NULL_STR,
            "model": _NULL_STR,
            "endpoint": {"type": "string"},
            "status": _INT,
            "error_code": _NULL_STR,
            "streamed": {"type": "boolean"},
            "prompt_tokens": _INT,
            "completion_tokens": _INT,
            "correction_prompt_tokens": _INT,
            "correction_completion_tokens": _INT,
            "schema_retries": _INT,
            "upstream_calls": _INT,
            "latency_ms": _NUM,
            "started_at": _NUM,
            "finished_at": _NUM,
            "estimated": {
                "type": "boolean",
                "description": "The upstream reported no usage: tokens estimated.",
            },
            "cache_read_tokens": {
                **_INT,
                "description": "Of the prompt tokens: read from the provider's cache.",
            },
            "cache_creation_tokens": {
                **_INT,
                "description": "Of the prompt tokens: written to the provider's cache.",
            },
            "reasoning_tokens": {
                **_INT,
                "description": "Of the completion tokens: spent reasoning.",
            },
        },
    },
    "RequestList": {
        "type": "object",
        "required": ["data", "next_before"],
        "properties": {
            "data": {"type": "array", "items": _ref("LedgerRow")},
            "next_before": {
                "type": ["number", "null"],
                "description": "Pass as `before` for the next (older) page.",
            },
        },
    },
}

_HTML = {"text/html": {"schema": {"type": "string"}}}


def admin_paths() -> dict[str, Any]:
    """The ``/admin/*`` and ``/console`` path items."""
    admin_errors = (401, 403, 503)
    return {
        "/admin/keys": {
            "get": {
                "operationId": "adminListKeys",
                "summary": "Every key (customer and admin), never a secret",
                "security": _ADMIN,
                "parameters": [_query("include_revoked", "Default true.", {"type": "boolean"})],
                "responses": {
                    "200": _ok(_ref("KeyList"), "The keys, oldest first."),
                    **_errors(*admin_errors),
                },
            },
            "post": {
                "operationId": "adminCreateKey",
                "summary": "Create a customer key (sk_live_ or sk_test_); works at once",
                "security": _ADMIN,
                "requestBody": {
                    "required": True,
                    "content": {_JSON: {"schema": _ref("CreateKeyRequest")}},
                },
                "responses": {
                    "201": _ok(_ref("CreatedKey"), "Created; the secret, once."),
                    **_errors(400, 413, *admin_errors),
                },
            },
        },
        "/admin/keys/{key_id}": {
            "delete": {
                "operationId": "adminRevokeKey",
                "summary": "Revoke a customer key (idempotent); seen by every replica "
                "within the key cache TTL",
                "security": _ADMIN,
                "parameters": [
                    {"name": "key_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": _ok(_ref("RevokedKey"), "Revoked."),
                    **_errors(400, 404, *admin_errors),
                },
            }
        },
        "/admin/usage": {
            "get": {
                "operationId": "adminUsage",
                "summary": "Usage aggregates and time series over a window",
                "security": _ADMIN,
                "parameters": [
                    _query("since", "Window start; default until - 24 h.", _TIME),
                    _query("until", "Window end (exclusive); default now.", _TIME),
                    _query(
                        "bucket",
                        "Series bucket width; default: at most 120 points.",
                        {"enum": ["1m", "5m", "15m", "1h", "6h", "1d"]},
                    ),
                    _query("key_id", "Only this key.", {"type": "string"}),
                    _query("model", "Only this model.", {"type": "string"}),
                ],
                "responses": {
                    "200": _ok(_ref("UsageReport"), "The report."),
                    **_errors(400, *admin_errors),
                },
            }
        },
        "/admin/requests": {
            "get": {
                "operationId": "adminRequests",
                "summary": "Recent ledger rows, newest first (no prompts)",
                "security": _ADMIN,
                "parameters": [
                    _query("key_id", "Only this key.", {"type": "string"}),
                    _query("model", "Only this model.", {"type": "string"}),
                    _query(
                        "error_code",
                        "Only this code; `none` for rows without one.",
                        {"type": "string"},
                    ),
                    _query("status", "Only this HTTP status.", _INT),
                    _query("before", "Rows started before this time (paging).", _TIME),
                    _query("limit", "1-500, default 100.", _INT),
                ],
                "responses": {
                    "200": _ok(_ref("RequestList"), "The rows."),
                    **_errors(400, *admin_errors),
                },
            }
        },
        "/admin/schemas/check": {
            "post": {
                "operationId": "adminCheckSchemas",
                "summary": "The same check as /v1/schemas/check, with an admin key",
                "security": _ADMIN,
                "requestBody": {
                    "required": True,
                    "content": {_JSON: {"schema": _ref("SchemaCheckRequest")}},
                },
                "responses": {
                    "200": _ok(_ref("SchemaCheckResult"), "The check."),
                    **_errors(400, 413, 401, 403),
                },
            }
        },
        "/console": {
            "get": {
                "operationId": "console",
                "summary": "The operator console (static page; data via the admin API)",
                "security": [],
                "responses": {"200": {"description": "HTML, strict CSP.", "content": _HTML}},
            }
        },
        "/console/{asset}": {
            "get": {
                "operationId": "consoleAsset",
                "summary": "A console script or stylesheet shipped in the package",
                "security": [],
                "parameters": [
                    {"name": "asset", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "The file.",
                        "content": {
                            "text/javascript": {"schema": {"type": "string"}},
                            "text/css": {"schema": {"type": "string"}},
                        },
                    },
                    "404": {
                        "description": "No such file.",
                        "content": {_JSON: {"schema": _ref("ErrorEnvelope")}},
                    },
                },
            }
        },
    }

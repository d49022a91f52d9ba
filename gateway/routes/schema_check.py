"""``POST /v1/schemas/check``: a free pre-flight check of tool and output schemas.

Authenticated and rate limited (requests per minute, no tokens) like every ``/v1`` route;
never calls a model. Accepts the schema-bearing
parts of either wire format and reports, per schema, every lint issue (``code``, ``param``,
``message``) with the same ``param`` paths a real request would get, the limits counted,
and, for a schema that is not strict-ready, the ``strictify`` projection or its refusals.
A strict-ready schema goes through the request path's caches (the gateway's verdict cache
and the validator's compiled-schema cache), so a following request with it starts warm.

Request (any of)::

    {"tools": [{"type": "function", "function": {"name", "parameters", "strict"}}   # OpenAI
               | {"name", "input_schema", "strict"}],                              # Anthropic
     "response_format": {"type": "json_schema", "json_schema": {"name", "strict", "schema"}},
     "output_config": {"format": {"type": "json_schema", "schema": {...}}}}

Response::

    {"ok": false,
     "schemas": [{"param": "tools[0].function.parameters", "name": "create_refund",
                  "strict": true, "ok": false,
                  "issues": [{"code": "schema_not_strict", "param": "...", "message": "..."}],
                  "counts": {"properties": {"value": 4, "limit": 5000}, ...},
                  "strictify": {"ok": true, "schema": {...}, "changes": [...], "refusals": []}}],
     "issues": [...every issue above, in order...]}
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

import validator
from gateway.enforcement.check import SchemaRejected, client_enforced_locally
from gateway.errors import InvalidRequest
from gateway.settings import Settings
from gateway.web import parse_json_body, request_context

# Schemas bigger than this (serialized bytes) are linted off the event loop.
_INLINE_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class SchemaInput:
    """One schema found in the request, with the path a real request would report."""

    param: str
    name: str | None
    strict: bool
    schema: Any
    dialect: validator.Dialect = "openai"  # Anthropic-shaped input: the Messages rules


def _issue(i: validator.Issue) -> dict[str, Any]:
    return {"code": i.code, "param": i.param, "message": i.message}


def _obj(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{param} must be an object.", param=param)
    return value


def _tool_inputs(tools: Any, max_tools: int) -> list[SchemaInput]:
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be an array.", param="tools")
    if len(tools) > max_tools:
        raise InvalidRequest(f"At most {max_tools} tools per request.", param="tools")
    found: list[SchemaInput] = []
    for i, raw in enumerate(tools):
        tool = _obj(raw, f"tools[{i}]")
        if "function" in tool or tool.get("type") == "function":
            fn = _obj(tool.get("function"), f"tools[{i}].function")
            param = f"tools[{i}].function.parameters"
            if "parameters" not in fn:
                raise InvalidRequest(f"{param} is required.", param=param)
            found.append(SchemaInput(param, _name(fn), fn.get("strict") is True, fn["parameters"]))
        elif "input_schema" in tool:
            param = f"tools[{i}].input_schema"
            found.append(
                SchemaInput(
                    param,
                    _name(tool),
                    tool.get("strict") is True,
                    tool["input_schema"],
                    "anthropic",
                )
            )
        else:
            raise InvalidRequest(
                f"tools[{i}] is neither an OpenAI function tool ('function.parameters') "
                "nor an Anthropic tool ('input_schema').",
                param=f"tools[{i}]",
            )
    return found


def _name(d: dict[str, Any]) -> str | None:
    name = d.get("name")
    return name if isinstance(name, str) else None


def _response_format_input(value: Any) -> SchemaInput:
    rf = _obj(value, "response_format")
    if rf.get("type") != "json_schema":
        raise InvalidRequest(
            "response_format.type must be 'json_schema' to be checked.",
            param="response_format.type",
        )
    js = _obj(rf.get("json_schema"), "response_format.json_schema")
    param = "response_format.json_schema.schema"
    if "schema" not in js:
        raise InvalidRequest(f"{param} is required.", param=param)
    return SchemaInput(param, _name(js), js.get("strict") is True, js["schema"])


def _output_config_input(value: Any) -> SchemaInput:
    fmt = _obj(_obj(value, "output_config").get("format"), "output_config.format")
    if fmt.get("type") != "json_schema":
        raise InvalidRequest(
            "output_config.format.type must be 'json_schema'.", param="output_config.format.type"
        )
    param = "output_config.format.schema"
    if "schema" not in fmt:
        raise InvalidRequest(f"{param} is required.", param=param)
    # Anthropic's structured output is always enforced.
    return SchemaInput(param, None, True, fmt["schema"], "anthropic")


def schema_inputs(body: Any, max_tools: int) -> list[SchemaInput]:
    """Every schema in a check request, in request order; 400 on a malformed request."""
    payload = _obj(body, "body")
    found: list[SchemaInput] = []
    if "tools" in payload:
        found.extend(_tool_inputs(payload["tools"], max_tools))
    if payload.get("response_format") is not None:
        found.append(_response_format_input(payload["response_format"]))
    if payload.get("output_config") is not None:
        found.append(_output_config_input(payload["output_config"]))
    if not found:
        raise InvalidRequest(
            "Nothing to check: send 'tools', 'response_format' or 'output_config'.",
            param="tools",
        )
    return found


def check_schema(item: SchemaInput) -> dict[str, Any]:
    """Lint one schema; strictify it when it is not strict-ready (synchronous, CPU only)."""
    report = validator.lint_report(
        item.schema,
        path=item.param,
        dialect=item.dialect,
        enforced_locally=client_enforced_locally(item.dialect),
    )
    entry: dict[str, Any] = {
        "param": item.param,
        "name": item.name,
        "strict": item.strict,
        "ok": report.ok,
        **report.to_json(),
        "strictify": None,
    }
    if not report.ok:
        projected = validator.strictify(item.schema, path=item.param)
        entry["strictify"] = {
            "ok": projected.ok,
            "schema": projected.schema,
            "changes": list(projected.changes),
            "refusals": [_issue(i) for i in projected.refusals],
        }
    return entry


class Resolver(Protocol):
    """The request path's verdict cache (``gateway.enforcement.LintCache``)."""

    async def resolve(
        self, schema: Any, path: str, dialect: validator.Dialect = "openai"
    ) -> validator.CompiledSchema: ...


async def _warm(entry: dict[str, Any], item: SchemaInput, cache: Resolver | None) -> None:
    """Compile a strict-ready schema through the caches a real request uses, so the next
    request with it starts warm; a compile-time refusal becomes an issue."""
    try:
        if cache is not None:
            await cache.resolve(item.schema, item.param, item.dialect)
        else:
            await validator.compile_async(item.schema)
    except SchemaRejected as exc:
        entry["ok"] = False
        entry["issues"].extend(_issue(i) for i in exc.issues)
    except validator.SchemaError as exc:
        entry["ok"] = False
        entry["issues"].extend(
            _issue(validator.Issue(i.code, item.param, i.message)) for i in exc.issues
        )


async def check_schemas(
    items: list[SchemaInput], *, offload: bool, cache: Resolver | None = None
) -> dict[str, Any]:
    """The response body for a check of ``items``."""
    entries: list[dict[str, Any]] = []
    for item in items:
        entry = await asyncio.to_thread(check_schema, item) if offload else check_schema(item)
        if entry["ok"]:
            await _warm(entry, item, cache)
        entries.append(entry)
    return {
        "ok": all(e["ok"] for e in entries),
        "schemas": entries,
        "issues": [i for e in entries for i in e["issues"]],
    }


async def schemas_check(request: Request) -> Response:
    """``POST /v1/schemas/check`` (see module docstring)."""
    settings: Settings = request.app.state.settings
    service = getattr(request.app.state, "service", None)
    if service is not None:
        # Free, but not unmetered: it costs CPU, so it counts against the key's requests
        # per minute (no tokens), like any other request.
        await service.admit(request_context(request.scope), 0)
    raw = await request.body()
    body = parse_json_body(raw, settings.max_json_depth, param="body")
    items = schema_inputs(body, settings.max_tools)
    lint_cache = getattr(service, "lint_cache", None)
    cache: Resolver | None = lint_cache if hasattr(lint_cache, "resolve") else None
    result = await check_schemas(items, offload=len(raw) > _INLINE_BYTES, cache=cache)
    return Response(orjson.dumps(result), media_type="application/json")

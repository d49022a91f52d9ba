"""The scripted upstream's steps rendered in the Anthropic Messages wire format.

Plugs into ``ScriptedUpstream``'s renderer table under the path suffix ``/messages``::

    up = ScriptedUpstream(renderers={**OPENAI_RENDERERS, **ANTHROPIC_RENDERERS})

A ``Call``'s ``arguments`` text becomes ``tool_use.input``: the parsed object when it is a
JSON object, otherwise (broken JSON, an array, ...) the raw text as a JSON *string*, which is
as close as this wire format can get to "the model sent garbage" in a non-streamed reply.
Streamed, the arguments text is sent verbatim as ``input_json_delta`` fragments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from tests.support.scripted_upstream import (
    HttpError,
    RecordedRequest,
    Renderer,
    Reply,
    Thinking,
    pieces,
    placed,
    sse,
)

_STOP = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}

# What Anthropic's constrained decoding refuses with a 400, by instance type (its
# documented JSON Schema limits; e.g. "For 'integer' type, properties maximum, minimum
# are not supported").
_UNSUPPORTED = {
    "integer": ("exclusiveMaximum", "exclusiveMinimum", "maximum", "minimum", "multipleOf"),
    "number": ("exclusiveMaximum", "exclusiveMinimum", "maximum", "minimum", "multipleOf"),
    "string": ("maxLength", "minLength"),
    "array": ("maxItems",),
}


def _strict_refusal(schema: Any) -> str | None:
    """Anthropic's message for the first keyword its strict mode refuses, or None."""
    if isinstance(schema, list):
        return next((m for m in map(_strict_refusal, schema) if m is not None), None)
    if not isinstance(schema, dict):
        return None
    types = schema.get("type")
    for kind in types if isinstance(types, list) else [types]:
        found = sorted(k for k in _UNSUPPORTED.get(str(kind), ()) if k in schema)
        if kind == "array" and schema.get("minItems", 0) not in (0, 1):
            found = sorted([*found, "minItems"])
        if found:
            noun = "property" if len(found) == 1 else "properties"
            verb = "is" if len(found) == 1 else "are"
            return f"For '{kind}' type, {noun} {', '.join(found)} {verb} not supported"
    # Subschemas, and maps of them (properties, $defs): a map has no "type" of its own.
    return _strict_refusal(list(schema.values()))


def input_usage(step: Reply) -> dict[str, int]:
    """The input half of ``anthropic.types.Usage``: ``input_tokens`` are the uncached ones,
    the cache's apart."""
    prompt = step.usage[0]
    if step.details is None:
        return {"input_tokens": prompt}
    d = step.details
    return {
        "input_tokens": prompt - d.cache_read - d.cache_write,
        "cache_creation_input_tokens": d.cache_write,
        "cache_read_input_tokens": d.cache_read,
    }


def output_usage(step: Reply) -> dict[str, Any]:
    """The output half: ``output_tokens`` (thinking included) and their breakdown."""
    out: dict[str, Any] = {"output_tokens": step.usage[1]}
    if step.details is not None and step.details.reasoning:
        out["output_tokens_details"] = {"thinking_tokens": step.details.reasoning}
    return out


def stop_reason(step: Reply) -> str:
    if step.refusal is not None:
        return "refusal"
    return _STOP.get(step.finish, step.finish)


def _text(step: Reply) -> str | None:
    """The text block: a refusal's words are text here (``stop_reason`` says the rest)."""
    return step.content if step.refusal is None else (step.content or "") + step.refusal


def thinking_block(thought: Thinking) -> dict[str, Any]:
    if thought.redacted:
        return {"type": "redacted_thinking", "data": thought.text}
    return {"type": "thinking", "thinking": thought.text, "signature": thought.signature}


def tool_input(arguments: str) -> Any:
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    return value if isinstance(value, dict) else arguments


def _streamed(block: dict[str, Any], fragment: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A block as it streams: a server tool's use opens with an empty ``input`` that
    ``input_json_delta``s fill; any other block opens whole."""
    if block.get("type") != "server_tool_use":
        return (block, [])
    text = orjson.dumps(block.get("input") or {}).decode()
    return (
        {**block, "input": {}},
        [{"type": "input_json_delta", "partial_json": p} for p in pieces(text, fragment)],
    )


class AnthropicRenderer:
    """``message`` JSON bodies and Messages SSE streams for scripted ``Reply`` steps."""

    def _ids(self, step: Reply, seq: int) -> tuple[str, list[str]]:
        mid = step.id or f"msg_scripted_{seq}"
        return mid, [c.id or f"toolu_{seq}_{i}" for i, c in enumerate(step.tool_calls)]

    def render(self, step: Reply, request: RecordedRequest, seq: int) -> bytes:
        mid, call_ids = self._ids(step, seq)
        content: list[dict[str, Any]] = [thinking_block(t) for t in step.thinking]
        if _text(step):
            content.append({"type": "text", "text": _text(step)})
        for cid, call in zip(call_ids, step.tool_calls, strict=True):
            content.append(
                {
                    "type": "tool_use",
                    "id": cid,
                    "name": call.name,
                    "input": tool_input(call.arguments),
                }
            )
        content = placed(content, step.items)
        body: dict[str, Any] = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": (request.body or {}).get("model", "scripted"),
            "content": content,
            "stop_reason": stop_reason(step),
            "stop_sequence": None,
            "usage": {**input_usage(step), **output_usage(step)},
        }
        if step.container is not None:
            body["container"] = step.container
        if not step.report_usage:
            del body["usage"]
        return orjson.dumps(body)

    def render_stream(self, step: Reply, request: RecordedRequest, seq: int) -> list[bytes]:
        mid, call_ids = self._ids(step, seq)
        message: dict[str, Any] = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": (request.body or {}).get("model", "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**input_usage(step), "output_tokens": 1},
        }
        if not step.report_usage:
            del message["usage"]
        events = [
            sse({"type": "message_start", "message": message}, "message_start"),
            sse({"type": "ping"}, "ping"),
        ]
        index = 0

        def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
            nonlocal index
            events.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": start},
                    "content_block_start",
                )
            )
            events.extend(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": d},
                    "content_block_delta",
                )
                for d in deltas
            )
            events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1

        # Each part as (its start, its deltas), in order, the items at their places.
        parts: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        for thought in step.thinking:
            if thought.redacted:
                parts.append((thinking_block(thought), []))
                continue
            parts.append(
                (
                    {"type": "thinking", "thinking": "", "signature": ""},
                    [
                        {"type": "thinking_delta", "thinking": p}
                        for p in pieces(thought.text, step.fragment)
                    ]
                    + [{"type": "signature_delta", "signature": thought.signature}],
                )
            )
        text = _text(step)
        if text:
            parts.append(
                (
                    {"type": "text", "text": ""},
                    [{"type": "text_delta", "text": p} for p in pieces(text, step.fragment)],
                )
            )
        for cid, call in zip(call_ids, step.tool_calls, strict=True):
            parts.append(
                (
                    {"type": "tool_use", "id": cid, "name": call.name, "input": {}},
                    [
                        {"type": "input_json_delta", "partial_json": p}
                        for p in pieces(call.arguments, step.fragment)
                        if p
                    ],
                )
            )
        for start, deltas in placed(parts, step.items, lambda raw: _streamed(raw, step.fragment)):
            block(start, deltas)
        # Cumulative; the input counts stay message_start's (a field left out keeps it).
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(step), "stop_sequence": None},
            "usage": output_usage(step),
        }
        if step.container is not None:
            delta["delta"]["container"] = step.container
        if not step.report_usage:
            del delta["usage"]
        events.append(sse(delta, "message_delta"))
        events.append(sse({"type": "message_stop"}, "message_stop"))
        return events

    def refusal(self, request: RecordedRequest) -> bytes | None:
        """As Anthropic: a strict tool or an ``output_config`` schema outside the subset
        its constrained decoding takes is a 400 for the whole request."""
        body = request.body if isinstance(request.body, dict) else {}
        places: list[tuple[str, Any]] = [
            (f"tools.{i}.custom", tool.get("input_schema"))
            for i, tool in enumerate(body.get("tools") or [])
            if isinstance(tool, dict) and tool.get("strict") is True
        ]
        output = (body.get("output_config") or {}).get("format")
        if isinstance(output, dict):
            places.append(("output_config.format.schema", output.get("schema")))
        for where, schema in places:
            message = _strict_refusal(schema)
            if message is not None:
                return orjson.dumps(
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": f"{where}: {message}",
                        },
                    }
                )
        return None

    def error_body(self, step: HttpError) -> bytes:
        if step.body is not None:
            return step.body if isinstance(step.body, bytes) else orjson.dumps(step.body)
        return orjson.dumps(
            {
                "type": "error",
                "error": {"type": "api_error", "message": f"scripted error {step.status}"},
            }
        )


ANTHROPIC_RENDERERS: Mapping[str, Renderer] = {"/messages": AnthropicRenderer()}


def anthropic_e2e_models(base_url: str) -> list[dict[str, Any]]:
    """A catalogue with both upstream wire formats behind the same scripted server:
    ``oa-*`` speak chat completions, ``an-*`` speak Messages (``provider = "anthropic"``)."""
    from tests.support.gateway_proc import model_table

    return [
        model_table("oa-strict", base_url),
        model_table("an-strict", base_url, provider="anthropic"),
        model_table("oa-plain", base_url, strict_tools=False),
        model_table("an-plain", base_url, provider="anthropic", strict_tools=False),
        model_table("an-constrained", base_url, provider="anthropic", constrained=True),
        model_table("oa-constrained", base_url, constrained=True),
        model_table("oa-strictify", base_url, strictify=True),
        model_table("an-strictify", base_url, provider="anthropic", strictify=True),
    ]

"""Anthropic Messages request JSON -> canonical ``ChatRequest``.

Shape errors raise ``InvalidRequest`` with ``param`` naming the exact place, e.g.
``messages[1].content[0].type``. Schemas are not linted here: ``DecodedRequest`` carries
the param prefix of every strict schema (``tools[i].input_schema``,
``output_config.format.schema`` / ``output_format.schema``) so the service lints them with
the client's own spelling.

Example::

    decoded = decode_request({"model": "m", "max_tokens": 64,
                              "messages": [{"role": "user", "content": "hi"}]})
    decoded.request.messages[0].text  # 'hi'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.bounds import NO_MEMBERS, Members
from gateway.canonical import (
    ChatRequest,
    ContentPart,
    ForcedTool,
    Header,
    ImagePart,
    JsonSchemaFormat,
    Message,
    Origin,
    Reasoning,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from gateway.canonical.record import record
from gateway.dialects.fields import (
    At,
    array,
    bool_field,
    invalid,
    model_field,
    non_empty_string,
    number,
    obj,
    optional_string,
    string,
    tool_name_field,
)
from gateway.dialects.notes import Notes

__all__ = ["DecodedRequest", "decode_request"]


@record
class DecodedRequest:
    """The canonical request plus where each schema came from in the client's JSON.

    ``tool_params[i]`` is where ``request.tools[i]`` is (``tools[3]``: server tools may
    come before it);
    ``format_param`` that of the strict output schema (``None`` without one).
    """

    request: ChatRequest
    tool_params: tuple[str, ...]
    format_param: str | None = None


_OTHER_BLOCKS = "messages[].content[] (other block types)"
_THINKING = "messages[].content[] (thinking, redacted_thinking)"
_REFERENCE = "messages[].content[].content[] (tool_reference)"
_SERVER_TOOLS = "tools[] (server and Anthropic-defined tools)"
_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema", "strict", "cache_control"})
_TOOL_FIELDS = frozenset(
    {"defer_loading", "input_examples", "eager_input_streaming", "allowed_callers"}
)


def _cache(block: Mapping[str, Any], at: At, notes: Notes) -> None:
    if "cache_control" in block:
        notes.field("cache_control", block["cache_control"], (at, "cache_control"))


def _image(block: Mapping[str, Any], at: At, notes: Notes) -> ImagePart | None:
    source = obj(block.get("source"), at, "source")
    at = (at, "source")
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(
            media_type=string(source.get("media_type"), at, "media_type"),
            data=string(source.get("data"), at, "data"),
        )
    if kind == "url":
        return ImagePart(url=non_empty_string(source.get("url"), at, "url"))
    if kind == "file":  # the Files API: only an Anthropic upstream can read it
        notes.field(_OTHER_BLOCKS, kind, (at, "type"))
        return None
    raise invalid("Image source type must be 'base64', 'url' or 'file'.", at, "type")


def _other_block(kind: object, at: At, notes: Notes) -> None:
    """A block the canonical request has no place for: the policy rules on it."""
    if not isinstance(kind, str):
        raise invalid(f"Unsupported content block type {kind!r}.", at, "type")
    notes.field(_OTHER_BLOCKS, kind, (at, "type"))


def _block(raw: object, at: At, notes: Notes) -> tuple[Mapping[str, Any], object]:
    """A content block and its type (its ``cache_control`` noted)."""
    block = obj(raw, at)
    _cache(block, at, notes)
    return block, block.get("type")


def _plain_parts(
    value: object, at: At, notes: Notes, *, result: bool = False
) -> tuple[ContentPart, ...]:
    """Text and image blocks (a string is one text block); in a tool result
    (``result``), a ``tool_reference`` block too."""
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(array(value, at)):
        p = (at, j)
        block, kind = _block(raw, p, notes)
        if kind == "text":
            parts.append(TextPart(string(block.get("text"), p, "text")))
        elif kind == "image":
            if (image := _image(block, p, notes)) is not None:
                parts.append(image)
        elif kind == "tool_reference" and result:
            notes.field(_REFERENCE, kind, (p, "type"))
        else:
            _other_block(kind, p, notes)
    return tuple(parts)


def _user_turn(content: object, at: At, notes: Notes) -> list[Message]:
    """A user turn: ``tool_result`` blocks become tool messages, the rest user messages,
    keeping the client's order."""
    if isinstance(content, str):
        return [Message(role="user", content=(TextPart(content),))]
    out: list[Message] = []
    pending: list[ContentPart] = []

    def flush() -> None:
        if pending:
            out.append(Message(role="user", content=tuple(pending)))
            pending.clear()

    for j, raw in enumerate(array(content, at)):
        p = (at, j)
        block, kind = _block(raw, p, notes)
        if kind == "text":
            pending.append(TextPart(string(block.get("text"), p, "text")))
        elif kind == "image":
            if (image := _image(block, p, notes)) is not None:
                pending.append(image)
        elif kind == "tool_result":
            flush()
            is_error = bool_field(block.get("is_error"), p, "is_error") or False
            result = block.get("content", "")
            out.append(
                Message(
                    role="tool",
                    content=_plain_parts(result, (p, "content"), notes, result=True),
                    tool_call_id=non_empty_string(block.get("tool_use_id"), p, "tool_use_id"),
                    is_error=is_error,
                )
            )
        else:
            _other_block(kind, p, notes)
    flush()
    return out


def _assistant_turn(content: object, at: At, notes: Notes) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", content=(TextPart(content),))
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for j, raw in enumerate(array(content, at)):
        p = (at, j)
        block, kind = _block(raw, p, notes)
        if kind == "text":
            parts.append(TextPart(string(block.get("text"), p, "text")))
        elif kind == "tool_use":
            tool_input = obj(block.get("input"), p, "input")
            calls.append(
                ToolCall(
                    id=non_empty_string(block.get("id"), p, "id"),
                    name=non_empty_string(block.get("name"), p, "name"),
                    raw_arguments=orjson.dumps(tool_input).decode(),
                )
            )
        elif kind in ("thinking", "redacted_thinking"):
            # Replayed reasoning: kept whole (its signature) for an Anthropic upstream, which
            # wants it back before a tool_use; the policy drops it, named, for other wires.
            sealed = "signature" if kind == "thinking" else "data"
            string(block.get(sealed), p, sealed)
            text = string(block.get("thinking"), p, "thinking") if kind == "thinking" else ""
            reasoning.append(Reasoning("anthropic", dict(block), text))
            notes.field(_THINKING, kind, (p, "type"))
        else:
            _other_block(kind, p, notes)
    return Message(
        role="assistant",
        content=tuple(parts),
        tool_calls=tuple(calls),
        reasoning=tuple(reasoning),
    )


def _system(value: object, param: str, notes: Notes) -> tuple[TextPart, ...]:
    parts = _plain_parts(value, param, notes)
    if any(isinstance(p, ImagePart) for p in parts):
        raise invalid(f"{param} accepts text blocks only.", param)
    return parts  # type: ignore[return-value]


def _messages(body: Mapping[str, Any], notes: Notes) -> list[Message]:
    """The conversation; a ``system`` message among ``messages`` (Claude Code sends one)
    is folded into the system prompt, which is where the other wires take it."""
    system: list[TextPart] = []
    if body.get("system") is not None:
        system.extend(_system(body["system"], "system", notes))
    raw_messages = array(body.get("messages"), "messages")
    if not raw_messages:
        raise invalid("messages must not be empty.", "messages")
    out: list[Message] = []
    for i, raw in enumerate(raw_messages):
        at = ("messages", i)
        msg = obj(raw, at)
        role = msg.get("role")
        if "content" not in msg:
            param = f"messages[{i}].content"
            raise invalid(f"{param} is required.", param)
        if role == "user":
            out.extend(_user_turn(msg["content"], (at, "content"), notes))
        elif role == "assistant":
            out.append(_assistant_turn(msg["content"], (at, "content"), notes))
        elif role == "system":
            notes.field("messages[] (role system)", role, (at, "role"))
            system.extend(_system(msg["content"], f"messages[{i}].content", notes))
        else:
            raise invalid("role must be 'user', 'assistant' or 'system'.", at, "role")
    if system:
        out.insert(0, Message(role="system", content=tuple(system)))
    return out


def _custom_tool(tool: Mapping[str, Any], p: str, notes: Notes) -> ToolSpec:
    name = tool_name_field(non_empty_string(tool.get("name"), p, "name"), p, "name")
    description = optional_string(tool.get("description"), p, "description")
    strict = bool_field(tool.get("strict"), p, "strict") or False
    schema = dict(obj(tool.get("input_schema"), p, "input_schema"))
    _cache(tool, p, notes)
    notes.unknown_keys(tool, _TOOL_KEYS, "tools[]", fields=_TOOL_FIELDS, at=p)
    return ToolSpec(name=name, parameters=schema, description=description, strict=strict)


def _tools(
    body: Mapping[str, Any], notes: Notes
) -> tuple[tuple[ToolSpec, ...], tuple[str, ...], tuple[str, ...]]:
    """Custom tools, their schemas' param prefixes, and the names of the other tools
    (server and Anthropic-defined ones: a ``bash`` tool is called by name)."""
    raw_tools = body.get("tools")
    if raw_tools is None:
        return (), (), ()
    specs: list[ToolSpec] = []
    params: list[str] = []
    others: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(array(raw_tools, "tools")):
        p = f"tools[{i}]"  # kept: it is where the service lints the schema
        tool = obj(raw, p)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            notes.field(_SERVER_TOOLS, string(kind, p, "type"), (p, "type"))
            if isinstance(tool.get("name"), str):
                others.append(tool["name"])
            continue
        spec = _custom_tool(tool, p, notes)
        if spec.name in seen:
            raise invalid(f"Duplicate tool name {spec.name!r}.", p, "name")
        seen.add(spec.name)
        specs.append(spec)
        params.append(p)
    return tuple(specs), tuple(params), tuple(others)


def _tool_choice(body: Mapping[str, Any]) -> tuple[ToolChoice | None, bool | None]:
    raw = body.get("tool_choice")
    if raw is None:
        return None, None
    choice = obj(raw, "tool_choice")
    disable = bool_field(
        choice.get("disable_parallel_tool_use"), "tool_choice.disable_parallel_tool_use"
    )
    parallel = None if disable is None else not disable
    kind = choice.get("type")
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        return ForcedTool(non_empty_string(choice.get("name"), "tool_choice.name")), parallel
    raise invalid("tool_choice.type must be one of auto, any, tool, none.", "tool_choice.type")


def _output_format(
    body: Mapping[str, Any], notes: Notes
) -> tuple[JsonSchemaFormat | None, str | None]:
    config = body.get("output_config")
    fmt: object = None
    prefix = ""
    if config is not None:
        settings = obj(config, "output_config")
        for key, value in settings.items():
            if key == "effort":
                notes.field("output_config.effort", value)
            elif key != "format":
                notes.unknown(f"output_config.{key}")
        fmt = settings.get("format")
        prefix = "output_config.format"
    if fmt is None and body.get("output_format") is not None:
        fmt = body["output_format"]
        prefix = "output_format"
    if fmt is None:
        return None, None
    spec = obj(fmt, prefix)
    if spec.get("type") != "json_schema":
        raise invalid(f"{prefix}.type must be 'json_schema'.", prefix, "type")
    schema = dict(obj(spec.get("schema"), prefix, "schema"))
    return JsonSchemaFormat(schema=schema, strict=True), f"{prefix}.schema"


def _max_tokens(body: Mapping[str, Any]) -> int:
    value = body.get("max_tokens")
    if value is None:
        raise invalid("max_tokens is required.", "max_tokens")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid("max_tokens must be a positive integer.", "max_tokens")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    raw = body.get("stop_sequences")
    if raw is None:
        return ()
    return tuple(string(s, "stop_sequences", i) for i, s in enumerate(array(raw, "stop_sequences")))


def decode_request(
    body: object, headers: tuple[Header, ...] = (), encoded: Members = NO_MEMBERS
) -> DecodedRequest:
    """Decode an Anthropic Messages request body (already parsed JSON) into canonical form.

    Raises ``InvalidRequest`` (400) with ``param`` for any shape error. Every other field
    follows the field policy (``gateway.dialects.policy``): the body rides along as
    ``origin`` for an Anthropic upstream, with the policy's verdict for the others.
    """
    if type(body) is not dict:
        raise invalid("body must be an object.", "body")
    req: Mapping[str, Any] = body
    notes = Notes("messages")
    notes.top(req)
    if headers:
        notes.headers(headers)
    model = model_field(non_empty_string(req.get("model"), "model"))
    max_tokens = _max_tokens(req)
    messages = _messages(req, notes)
    tools, tool_params, other_tools = _tools(req, notes)
    tool_choice, parallel = _tool_choice(req)
    if isinstance(tool_choice, ForcedTool) and all(t.name != tool_choice.name for t in tools):
        if tool_choice.name not in other_tools:
            raise invalid(
                f"tool_choice names unknown tool {tool_choice.name!r}.", "tool_choice.name"
            )
        tool_choice = None  # forcing a server tool: only its own upstream can
    response_format, format_param = _output_format(req, notes)
    metadata = dict(obj(req.get("metadata") or {}, "metadata"))
    user = optional_string(metadata.get("user_id"), "metadata.user_id")
    stream = bool_field(req.get("stream"), "stream") or False
    moved = any(p != f"tools[{i}]" for i, p in enumerate(tool_params))
    origin = Origin(
        "messages",
        req,
        headers,
        messages=len(messages),
        tool_names=other_tools,
        tool_paths=tool_params if moved else (),
        screens=notes.screens(),
        encoded=encoded,
    )
    request = ChatRequest(
        model=model,
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,
        response_format=response_format,
        max_tokens=max_tokens,
        temperature=number(req.get("temperature"), "temperature"),
        top_p=number(req.get("top_p"), "top_p"),
        stop=_stop(req),
        stream=stream,
        parallel_tool_calls=parallel,
        user=user,
        metadata=metadata,
        origin=origin,
    )
    return DecodedRequest(request=request, tool_params=tool_params, format_param=format_param)

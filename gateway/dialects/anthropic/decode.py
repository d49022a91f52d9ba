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
from typing import Any, cast

import orjson

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
from gateway.dialects.fields import model_field, tool_name_field
from gateway.dialects.policy import Notes
from gateway.errors import InvalidRequest

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


def _bad(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def _obj(value: object, param: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _bad(f"{param} must be an object.", param)
    return cast(Mapping[str, Any], value)


def _list(value: object, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(f"{param} must be an array.", param)
    return value


def _str(value: object, param: str, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        raise _bad(f"{param} must be a {'' if allow_empty else 'non-empty '}string.", param)
    return value


def _opt_num(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"{key} must be a number.", key)
    return float(value)


def _opt_bool(body: Mapping[str, Any], key: str, param: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _bad(f"{param} must be a boolean.", param)
    return value


_OTHER_BLOCKS = "messages[].content[] (other block types)"
_THINKING = "messages[].content[] (thinking, redacted_thinking)"
_REFERENCE = "messages[].content[].content[] (tool_reference)"
_SERVER_TOOLS = "tools[] (server and Anthropic-defined tools)"
_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema", "strict", "cache_control"})
_TOOL_FIELDS = frozenset(
    {"defer_loading", "input_examples", "eager_input_streaming", "allowed_callers"}
)


def _cache(block: Mapping[str, Any], param: str, notes: Notes) -> None:
    if "cache_control" in block:
        notes.field("cache_control", block["cache_control"], f"{param}.cache_control")


def _image(block: Mapping[str, Any], param: str, notes: Notes) -> ImagePart | None:
    source = _obj(block.get("source"), f"{param}.source")
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(
            media_type=_str(source.get("media_type"), f"{param}.source.media_type"),
            data=_str(source.get("data"), f"{param}.source.data"),
        )
    if kind == "url":
        return ImagePart(url=_str(source.get("url"), f"{param}.source.url", allow_empty=False))
    if kind == "file":  # the Files API: only an Anthropic upstream can read it
        notes.field(_OTHER_BLOCKS, kind, f"{param}.source.type")
        return None
    raise _bad("Image source type must be 'base64', 'url' or 'file'.", f"{param}.source.type")


def _other_block(kind: object, param: str, notes: Notes) -> None:
    """A block the canonical request has no place for: the policy rules on it."""
    if not isinstance(kind, str):
        raise _bad(f"Unsupported content block type {kind!r}.", f"{param}.type")
    notes.field(_OTHER_BLOCKS, kind, f"{param}.type")


def _plain_parts(
    value: object, param: str, notes: Notes, *, result: bool = False
) -> tuple[ContentPart, ...]:
    """Text and image blocks (a string is one text block); in a tool result
    (``result``), a ``tool_reference`` block too."""
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(_list(value, param)):
        p = f"{param}[{j}]"
        block = _obj(raw, p)
        kind = block.get("type")
        _cache(block, p, notes)
        if kind == "text":
            parts.append(TextPart(_str(block.get("text"), f"{p}.text")))
        elif kind == "image":
            if (image := _image(block, p, notes)) is not None:
                parts.append(image)
        elif kind == "tool_reference" and result:
            notes.field(_REFERENCE, kind, f"{p}.type")
        else:
            _other_block(kind, p, notes)
    return tuple(parts)


def _user_turn(content: object, param: str, notes: Notes) -> list[Message]:
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

    for j, raw in enumerate(_list(content, param)):
        p = f"{param}[{j}]"
        block = _obj(raw, p)
        kind = block.get("type")
        _cache(block, p, notes)
        if kind == "text":
            pending.append(TextPart(_str(block.get("text"), f"{p}.text")))
        elif kind == "image":
            if (image := _image(block, p, notes)) is not None:
                pending.append(image)
        elif kind == "tool_result":
            flush()
            is_error = _opt_bool(block, "is_error", f"{p}.is_error") or False
            result = block.get("content", "")
            out.append(
                Message(
                    role="tool",
                    content=_plain_parts(result, f"{p}.content", notes, result=True),
                    tool_call_id=_str(
                        block.get("tool_use_id"), f"{p}.tool_use_id", allow_empty=False
                    ),
                    is_error=is_error,
                )
            )
        else:
            _other_block(kind, p, notes)
    flush()
    return out


def _assistant_turn(content: object, param: str, notes: Notes) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", content=(TextPart(content),))
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for j, raw in enumerate(_list(content, param)):
        p = f"{param}[{j}]"
        block = _obj(raw, p)
        kind = block.get("type")
        _cache(block, p, notes)
        if kind == "text":
            parts.append(TextPart(_str(block.get("text"), f"{p}.text")))
        elif kind == "tool_use":
            tool_input = _obj(block.get("input"), f"{p}.input")
            calls.append(
                ToolCall(
                    id=_str(block.get("id"), f"{p}.id", allow_empty=False),
                    name=_str(block.get("name"), f"{p}.name", allow_empty=False),
                    raw_arguments=orjson.dumps(tool_input).decode(),
                )
            )
        elif kind in ("thinking", "redacted_thinking"):
            # Replayed reasoning: kept whole (its signature) for an Anthropic upstream, which
            # wants it back before a tool_use; the policy drops it, named, for other wires.
            sealed = "signature" if kind == "thinking" else "data"
            _str(block.get(sealed), f"{p}.{sealed}")
            text = _str(block.get("thinking"), f"{p}.thinking") if kind == "thinking" else ""
            reasoning.append(Reasoning("anthropic", dict(block), text))
            notes.field(_THINKING, kind, f"{p}.type")
        else:
            _other_block(kind, p, notes)
    return Message(
        role="assistant", content=tuple(parts), tool_calls=tuple(calls),
        reasoning=tuple(reasoning),
    )


def _system(value: object, param: str, notes: Notes) -> tuple[TextPart, ...]:
    parts = _plain_parts(value, param, notes)
    if any(isinstance(p, ImagePart) for p in parts):
        raise _bad(f"{param} accepts text blocks only.", param)
    return parts  # type: ignore[return-value]


def _messages(body: Mapping[str, Any], notes: Notes) -> list[Message]:
    """The conversation; a ``system`` message among ``messages`` (Claude Code sends one)
    is folded into the system prompt, which is where the other wires take it."""
    system: list[TextPart] = []
    if body.get("system") is not None:
        system.extend(_system(body["system"], "system", notes))
    raw_messages = _list(body.get("messages"), "messages")
    if not raw_messages:
        raise _bad("messages must not be empty.", "messages")
    out: list[Message] = []
    for i, raw in enumerate(raw_messages):
        p = f"messages[{i}]"
        msg = _obj(raw, p)
        role = msg.get("role")
        if "content" not in msg:
            raise _bad(f"{p}.content is required.", f"{p}.content")
        if role == "user":
            out.extend(_user_turn(msg["content"], f"{p}.content", notes))
        elif role == "assistant":
            out.append(_assistant_turn(msg["content"], f"{p}.content", notes))
        elif role == "system":
            notes.field("messages[] (role system)", role, f"{p}.role")
            system.extend(_system(msg["content"], f"{p}.content", notes))
        else:
            raise _bad("role must be 'user', 'assistant' or 'system'.", f"{p}.role")
    if system:
        out.insert(0, Message(role="system", content=tuple(system)))
    return out


def _custom_tool(
    tool: Mapping[str, Any], p: str, notes: Notes
) -> ToolSpec:
    name = tool_name_field(_str(tool.get("name"), f"{p}.name", allow_empty=False), f"{p}.name")
    description = tool.get("description")
    if description is not None:
        _str(description, f"{p}.description")
    strict = _opt_bool(tool, "strict", f"{p}.strict") or False
    schema = dict(_obj(tool.get("input_schema"), f"{p}.input_schema"))
    _cache(tool, p, notes)
    if not _TOOL_KEYS.issuperset(tool):
        for key in tool:
            if key in _TOOL_FIELDS:
                notes.field(f"tools[].{key}", tool[key], f"{p}.{key}")
            elif key not in _TOOL_KEYS:
                notes.unknown(f"tools[].{key}")
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
    for i, raw in enumerate(_list(raw_tools, "tools")):
        p = f"tools[{i}]"
        tool = _obj(raw, p)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            if not isinstance(kind, str):
                raise _bad(f"{p}.type must be a string.", f"{p}.type")
            notes.field(_SERVER_TOOLS, kind, f"{p}.type")
            if isinstance(tool.get("name"), str):
                others.append(tool["name"])
            continue
        spec = _custom_tool(tool, p, notes)
        if spec.name in seen:
            raise _bad(f"Duplicate tool name {spec.name!r}.", f"{p}.name")
        seen.add(spec.name)
        specs.append(spec)
        params.append(p)
    return tuple(specs), tuple(params), tuple(others)


def _tool_choice(body: Mapping[str, Any]) -> tuple[ToolChoice | None, bool | None]:
    raw = body.get("tool_choice")
    if raw is None:
        return None, None
    choice = _obj(raw, "tool_choice")
    disable = _opt_bool(
        choice, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use"
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
        return ForcedTool(_str(choice.get("name"), "tool_choice.name", allow_empty=False)), parallel
    raise _bad("tool_choice.type must be one of auto, any, tool, none.", "tool_choice.type")


def _output_format(
    body: Mapping[str, Any], notes: Notes
) -> tuple[JsonSchemaFormat | None, str | None]:
    config = body.get("output_config")
    fmt: object = None
    prefix = ""
    if config is not None:
        settings = _obj(config, "output_config")
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
    spec = _obj(fmt, prefix)
    if spec.get("type") != "json_schema":
        raise _bad(f"{prefix}.type must be 'json_schema'.", f"{prefix}.type")
    schema = dict(_obj(spec.get("schema"), f"{prefix}.schema"))
    return JsonSchemaFormat(schema=schema, strict=True), f"{prefix}.schema"


def _max_tokens(body: Mapping[str, Any]) -> int:
    value = body.get("max_tokens")
    if value is None:
        raise _bad("max_tokens is required.", "max_tokens")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad("max_tokens must be a positive integer.", "max_tokens")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    raw = body.get("stop_sequences")
    if raw is None:
        return ()
    return tuple(
        _str(s, f"stop_sequences[{i}]") for i, s in enumerate(_list(raw, "stop_sequences"))
    )


def decode_request(body: object, headers: tuple[Header, ...] = ()) -> DecodedRequest:
    """Decode an Anthropic Messages request body (already parsed JSON) into canonical form.

    Raises ``InvalidRequest`` (400) with ``param`` for any shape error. Every other field
    follows the field policy (``gateway.dialects.policy``): the body rides along as
    ``origin`` for an Anthropic upstream, with the policy's verdict for the others.
    """
    req = _obj(body, "body")
    notes = Notes("messages")
    notes.top(req)
    if headers:
        notes.headers(headers)
    model = model_field(_str(req.get("model"), "model", allow_empty=False))
    max_tokens = _max_tokens(req)
    messages = _messages(req, notes)
    tools, tool_params, other_tools = _tools(req, notes)
    tool_choice, parallel = _tool_choice(req)
    if isinstance(tool_choice, ForcedTool) and all(t.name != tool_choice.name for t in tools):
        if tool_choice.name not in other_tools:
            raise _bad(
                f"tool_choice names unknown tool {tool_choice.name!r}.", "tool_choice.name"
            )
        tool_choice = None  # forcing a server tool: only its own upstream can
    response_format, format_param = _output_format(req, notes)
    metadata = dict(_obj(req.get("metadata") or {}, "metadata"))
    user = metadata.get("user_id")
    if user is not None:
        _str(user, "metadata.user_id")
    stream = _opt_bool(req, "stream", "stream") or False
    moved = any(p != f"tools[{i}]" for i, p in enumerate(tool_params))
    origin = Origin("messages", req, headers, messages=len(messages), tool_names=other_tools,
                    tool_paths=tool_params if moved else (), screens=notes.screens())
    request = ChatRequest(
        model=model,
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,
        response_format=response_format,
        max_tokens=max_tokens,
        temperature=_opt_num(req, "temperature"),
        top_p=_opt_num(req, "top_p"),
        stop=_stop(req),
        stream=stream,
        parallel_tool_calls=parallel,
        user=user,
        metadata=metadata,
        origin=origin,
    )
    return DecodedRequest(request=request, tool_params=tool_params, format_param=format_param)

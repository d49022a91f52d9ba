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
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from gateway.canonical.record import record
from gateway.dialects.fields import model_field, tool_name_field
from gateway.errors import InvalidRequest

__all__ = ["DecodedRequest", "decode_request"]


@record
class DecodedRequest:
    """The canonical request plus where each schema came from in the client's JSON.

    ``tool_params[i]`` is the param prefix of ``request.tools[i].parameters``;
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


def _image(block: Mapping[str, Any], param: str) -> ImagePart:
    source = _obj(block.get("source"), f"{param}.source")
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(
            media_type=_str(source.get("media_type"), f"{param}.source.media_type"),
            data=_str(source.get("data"), f"{param}.source.data"),
        )
    if kind == "url":
        return ImagePart(url=_str(source.get("url"), f"{param}.source.url", allow_empty=False))
    raise _bad("Image source type must be 'base64' or 'url'.", f"{param}.source.type")


def _plain_parts(value: object, param: str) -> tuple[ContentPart, ...]:
    """Content made of text and image blocks only (a string is one text block)."""
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(_list(value, param)):
        p = f"{param}[{j}]"
        block = _obj(raw, p)
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(_str(block.get("text"), f"{p}.text")))
        elif kind == "image":
            parts.append(_image(block, p))
        else:
            raise _bad(f"Unsupported content block type {kind!r} here.", f"{p}.type")
    return tuple(parts)


def _user_turn(content: object, param: str) -> list[Message]:
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
        if kind == "text":
            pending.append(TextPart(_str(block.get("text"), f"{p}.text")))
        elif kind == "image":
            pending.append(_image(block, p))
        elif kind == "tool_result":
            flush()
            is_error = _opt_bool(block, "is_error", f"{p}.is_error") or False
            result = block.get("content", "")
            out.append(
                Message(
                    role="tool",
                    content=_plain_parts(result, f"{p}.content"),
                    tool_call_id=_str(
                        block.get("tool_use_id"), f"{p}.tool_use_id", allow_empty=False
                    ),
                    is_error=is_error,
                )
            )
        else:
            raise _bad(f"Unsupported content block type {kind!r} in a user message.", f"{p}.type")
    flush()
    return out


def _assistant_turn(content: object, param: str) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", content=(TextPart(content),))
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for j, raw in enumerate(_list(content, param)):
        p = f"{param}[{j}]"
        block = _obj(raw, p)
        kind = block.get("type")
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
            # Replayed reasoning from an earlier turn: there is no canonical place for it and
            # other providers cannot take it, so it is dropped rather than refused.
            continue
        else:
            raise _bad(
                f"Unsupported content block type {kind!r} in an assistant message.", f"{p}.type"
            )
    return Message(role="assistant", content=tuple(parts), tool_calls=tuple(calls))


def _messages(body: Mapping[str, Any]) -> list[Message]:
    out: list[Message] = []
    system = body.get("system")
    if system is not None:
        parts = _plain_parts(system, "system")
        if any(isinstance(p, ImagePart) for p in parts):
            raise _bad("system accepts text blocks only.", "system")
        if parts:
            out.append(Message(role="system", content=parts))
    raw_messages = _list(body.get("messages"), "messages")
    if not raw_messages:
        raise _bad("messages must not be empty.", "messages")
    for i, raw in enumerate(raw_messages):
        p = f"messages[{i}]"
        msg = _obj(raw, p)
        role = msg.get("role")
        if "content" not in msg:
            raise _bad(f"{p}.content is required.", f"{p}.content")
        if role == "user":
            out.extend(_user_turn(msg["content"], f"{p}.content"))
        elif role == "assistant":
            out.append(_assistant_turn(msg["content"], f"{p}.content"))
        else:
            raise _bad("role must be 'user' or 'assistant'.", f"{p}.role")
    return out


def _tools(body: Mapping[str, Any]) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    raw_tools = body.get("tools")
    if raw_tools is None:
        return (), ()
    specs: list[ToolSpec] = []
    params: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(_list(raw_tools, "tools")):
        p = f"tools[{i}]"
        tool = _obj(raw, p)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise _bad(f"Unsupported tool type {kind!r}; only custom tools.", f"{p}.type")
        name = tool_name_field(_str(tool.get("name"), f"{p}.name", allow_empty=False), f"{p}.name")
        if name in seen:
            raise _bad(f"Duplicate tool name {name!r}.", f"{p}.name")
        seen.add(name)
        description = tool.get("description")
        if description is not None:
            _str(description, f"{p}.description")
        strict = _opt_bool(tool, "strict", f"{p}.strict") or False
        schema = dict(_obj(tool.get("input_schema"), f"{p}.input_schema"))
        specs.append(ToolSpec(name=name, parameters=schema, description=description, strict=strict))
        params.append(f"{p}.input_schema")
    return tuple(specs), tuple(params)


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


def _output_format(body: Mapping[str, Any]) -> tuple[JsonSchemaFormat | None, str | None]:
    config = body.get("output_config")
    fmt: object = None
    prefix = ""
    if config is not None:
        fmt = _obj(config, "output_config").get("format")
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

    Raises ``InvalidRequest`` (400) with ``param`` for any shape error. Unknown top-level
    fields (e.g. ``thinking``, ``top_k``) are accepted and ignored.
    """
    req = _obj(body, "body")
    model = model_field(_str(req.get("model"), "model", allow_empty=False))
    max_tokens = _max_tokens(req)
    messages = _messages(req)
    tools, tool_params = _tools(req)
    tool_choice, parallel = _tool_choice(req)
    if isinstance(tool_choice, ForcedTool) and all(t.name != tool_choice.name for t in tools):
        raise _bad(f"tool_choice names unknown tool {tool_choice.name!r}.", "tool_choice.name")
    response_format, format_param = _output_format(req)
    metadata = dict(_obj(req.get("metadata") or {}, "metadata"))
    user = metadata.get("user_id")
    if user is not None:
        _str(user, "metadata.user_id")
    stream = _opt_bool(req, "stream", "stream") or False
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
        origin=Origin("messages", req, headers, messages=len(messages)),
    )
    return DecodedRequest(request=request, tool_params=tool_params, format_param=format_param)

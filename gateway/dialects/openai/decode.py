"""Chat-completions request JSON -> canonical ``ChatRequest``.

Shape errors raise ``InvalidRequest`` (400) with ``param`` naming the exact field, e.g.
``messages[2].role`` or ``tools[0].function.name``. Schemas are kept untouched (the
enforcement check lints them). Every other field follows the field policy
(``gateway.dialects.policy``): the body rides along as ``origin`` for a chat-completions
upstream, and the policy's verdict for the other upstreams with it; ``stream_options`` is
in ``metadata["openai.stream_options"]`` for the gateway's own stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.canonical import (
    ChatRequest,
    ContentPart,
    ForcedTool,
    Header,
    ImagePart,
    JsonSchemaFormat,
    Message,
    Origin,
    ResponseFormat,
    Role,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from gateway.dialects.fields import bool_field as _bool
from gateway.dialects.fields import int_field as _int
from gateway.dialects.fields import model_field, tool_name_field
from gateway.dialects.policy import Notes
from gateway.errors import InvalidRequest

STREAM_OPTIONS_KEY = "openai.stream_options"
# ``n``: each choice is one upstream call (and its corrections), so the bound is a cost cap.
MAX_CHOICES = 16

_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})
_DETAIL = "messages[].content[].image_url.detail"
_OTHER_PARTS = "messages[].content[] (input_audio, file)"
_ROLES: Mapping[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def _bad(message: str, param: str | None) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def _str(value: Any, param: str, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _bad(f"{param} must be a string.", param)
    return value


def _number(value: Any, param: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _bad(f"{param} must be a number.", param)
    return float(value)


def _object(value: Any, param: str) -> Mapping[str, Any]:
    # orjson gives dicts: skip the ABC instance check for them (per request).
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _bad(f"{param} must be an object.", param)
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(f"{param} must be an array.", param)
    return value


def _content(value: Any, param: str, notes: Notes) -> tuple[ContentPart, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(_list(value, param)):
        p = f"{param}[{j}]"
        part = _object(raw, p)
        kind = part.get("type")
        if kind == "text":
            parts.append(TextPart(_str(part.get("text"), f"{p}.text") or ""))
        elif kind == "image_url":
            image = _object(part.get("image_url"), f"{p}.image_url")
            detail = _str(image.get("detail"), f"{p}.image_url.detail", required=False)
            notes.field(_DETAIL, detail, f"{p}.image_url.detail")
            parts.append(
                ImagePart(url=_str(image.get("url"), f"{p}.image_url.url"), detail=detail)
            )
        elif isinstance(kind, str):  # audio, files, a type of tomorrow: the vendor judges
            notes.field(_OTHER_PARTS, kind, f"{p}.type")
        else:
            raise _bad(f"Unsupported content part type {kind!r}.", f"{p}.type")
    return tuple(parts)


def _tool_calls(value: Any, param: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    calls = []
    for j, raw in enumerate(_list(value, param)):
        p = f"{param}[{j}]"
        call = _object(raw, p)
        fn = _object(call.get("function"), f"{p}.function")
        calls.append(
            ToolCall(
                id=_str(call.get("id"), f"{p}.id") or "",
                name=_str(fn.get("name"), f"{p}.function.name") or "",
                raw_arguments=_str(fn.get("arguments", ""), f"{p}.function.arguments") or "",
            )
        )
    return tuple(calls)


def _message(raw: Any, i: int, notes: Notes) -> Message:
    # The param paths are only spelled out on the way to an error (this runs per message).
    msg = _object(raw, f"messages[{i}]") if type(raw) is not dict else raw
    role = _ROLES.get(msg.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise _bad(
            "Role must be one of system, developer, user, assistant, tool.",
            f"messages[{i}].role",
        )
    raw_content = msg.get("content")
    if type(raw_content) is str:
        content: tuple[ContentPart, ...] = (TextPart(raw_content),)
    else:
        content = _content(raw_content, f"messages[{i}].content", notes)
    name = msg.get("name")
    if name is not None:
        if type(name) is not str:
            _str(name, f"messages[{i}].name")
        notes.field("messages[].name", name, f"messages[{i}].name")
    if role == "tool":
        call_id = _str(msg.get("tool_call_id"), f"messages[{i}].tool_call_id")
        return Message(role=role, content=content, tool_call_id=call_id, name=name)
    if role == "assistant":
        calls = _tool_calls(msg.get("tool_calls"), f"messages[{i}].tool_calls")
        return Message(role=role, content=content, tool_calls=calls, name=name)
    return Message(role=role, content=content, name=name)


def _tool(raw: Any, i: int, notes: Notes) -> ToolSpec | None:
    """A function tool; ``None`` for another kind (the policy rules on it)."""
    # As in _message: the param paths are only built for an error.
    tool = _object(raw, f"tools[{i}]") if type(raw) is not dict else raw
    kind = tool.get("type", "function")
    if kind != "function":
        if not isinstance(kind, str):
            raise _bad(f"tools[{i}].type must be a string.", f"tools[{i}].type")
        notes.field("tools[] (custom)", kind, f"tools[{i}].type")
        return None
    fn = tool.get("function")
    if type(fn) is not dict:
        fn = _object(fn, f"tools[{i}].function")
    name = fn.get("name")
    if type(name) is not str:
        _str(name, f"tools[{i}].function.name")
    if not name:
        raise _bad("Tool name must not be empty.", f"tools[{i}].function.name")
    tool_name_field(name, f"tools[{i}].function.name")
    parameters = fn.get("parameters")
    if parameters is None:
        parameters = _EMPTY_PARAMETERS
    elif not isinstance(parameters, dict):
        raise _bad(f"tools[{i}].function.parameters must be an object.",
                   f"tools[{i}].function.parameters")
    description = fn.get("description")
    if description is not None and type(description) is not str:
        _str(description, f"tools[{i}].function.description")
    strict = fn.get("strict")
    if strict is not None and type(strict) is not bool:
        _bool(strict, f"tools[{i}].function.strict")
    if not _FUNCTION_KEYS.issuperset(fn):
        for key in fn:
            if key not in _FUNCTION_KEYS:
                notes.unknown(f"tools[].function.{key}")
    return ToolSpec(
        name=name, parameters=parameters, description=description, strict=strict is True
    )


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...], notes: Notes) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        raise _bad("tool_choice must be auto, none, required or a function.", "tool_choice")
    choice = _object(value, "tool_choice")
    if choice.get("type", "function") != "function":
        notes.field("tool_choice (custom, allowed_tools)", choice.get("type"), "tool_choice.type")
        return None
    fn = _object(choice.get("function"), "tool_choice.function")
    name = _str(fn.get("name"), "tool_choice.function.name") or ""
    if not any(t.name == name for t in tools):
        raise _bad(
            f"tool_choice names {name!r}, which is not in tools.", "tool_choice.function.name"
        )
    return ForcedTool(name)


def _response_format(value: Any) -> ResponseFormat | None:
    if value is None:
        return None
    rf = _object(value, "response_format")
    kind = rf.get("type")
    if kind in ("text", "json_object"):
        return kind  # type: ignore[no-any-return]
    if kind != "json_schema":
        raise _bad("response_format.type must be text, json_object or json_schema.",
                   "response_format.type")
    js = _object(rf.get("json_schema"), "response_format.json_schema")
    schema = js.get("schema")
    if not isinstance(schema, dict):
        raise _bad("response_format.json_schema.schema must be an object.",
                   "response_format.json_schema.schema")
    return JsonSchemaFormat(
        schema=schema,
        name=_str(js.get("name", "output"), "response_format.json_schema.name") or "output",
        strict=bool(_bool(js.get("strict"), "response_format.json_schema.strict")),
        description=_str(js.get("description"), "response_format.json_schema.description",
                         required=False),
    )


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(_str(s, f"stop[{i}]") or "" for i, s in enumerate(_list(value, "stop")))


def decode_chat_request(data: Any, headers: tuple[Header, ...] = ()) -> ChatRequest:
    """Validate the request shape and build the canonical request (raises 400); the body
    and the vendor ``headers`` ride along as its ``origin``."""
    body = _object(data, "body") if type(data) is dict or isinstance(data, Mapping) else None
    if body is None:
        raise _bad("The request body must be a JSON object.", None)
    notes = Notes("chat")
    notes.top(body)
    if headers:
        notes.headers(headers)
    model = model_field(_str(body.get("model"), "model") or "")
    raw_messages = body.get("messages")
    if raw_messages is None:
        raise _bad("messages is required.", "messages")
    messages = tuple(
        _message(m, i, notes) for i, m in enumerate(_list(raw_messages, "messages"))
    )
    if not messages:
        raise _bad("messages must not be empty.", "messages")
    raw_tools = body.get("tools")
    tools: tuple[ToolSpec, ...] = ()
    tool_paths: tuple[str, ...] = ()
    if raw_tools is not None:
        found = [(i, t) for i, raw in enumerate(_list(raw_tools, "tools"))
                 if (t := _tool(raw, i, notes)) is not None]
        tools = tuple(t for _, t in found)
        if len(tools) != len(raw_tools):  # another kind of tool between them
            tool_paths = tuple(f"tools[{i}]" for i, _ in found)
    n = _int(body.get("n"), "n", 1) or 1
    if n > MAX_CHOICES:
        raise _bad(f"n must be at most {MAX_CHOICES}.", "n")
    max_tokens = _int(body.get("max_completion_tokens"), "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int(body.get("max_tokens"), "max_tokens", 1)
    metadata: dict[str, Any] = {}
    if body.get("stream_options") is not None:
        metadata[STREAM_OPTIONS_KEY] = dict(_object(body["stream_options"], "stream_options"))
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools, notes),
        response_format=_response_format(body.get("response_format")),
        max_tokens=max_tokens,
        temperature=_number(body.get("temperature"), "temperature"),
        top_p=_number(body.get("top_p"), "top_p"),
        stop=_stop(body.get("stop")),
        stream=bool(_bool(body.get("stream"), "stream")),
        parallel_tool_calls=_bool(body.get("parallel_tool_calls"), "parallel_tool_calls"),
        user=_str(body.get("user"), "user", required=False),
        metadata=metadata,
        n=n,
        origin=Origin("chat", body, headers, messages=len(messages), tool_paths=tool_paths,
                      screens=notes.screens()),
    )

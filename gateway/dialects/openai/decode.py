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
from itertools import count, repeat
from typing import Any

from gateway.bounds import NO_MEMBERS, Members, valid_tool_name
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
from gateway.dialects.fields import (
    At,
    array,
    bool_field,
    int_field,
    invalid,
    model_field,
    number,
    obj,
    optional_string,
    spell,
    string,
    tool_name_field,
)
from gateway.dialects.notes import Notes

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
# The fields past messages and tools that decode_chat_request reads.
_SETTINGS = frozenset(
    {
        "n",
        "max_completion_tokens",
        "max_tokens",
        "stream_options",
        "tool_choice",
        "response_format",
        "temperature",
        "top_p",
        "stop",
        "stream",
        "parallel_tool_calls",
        "user",
    }
)


def _content(value: Any, at: At, notes: Notes) -> tuple[ContentPart, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(array(value, at)):
        p = (at, j)
        part = obj(raw, p)
        kind = part.get("type")
        if kind == "text":
            parts.append(TextPart(string(part.get("text"), p, "text")))
        elif kind == "image_url":
            image = obj(part.get("image_url"), p, "image_url")
            detail = optional_string(image.get("detail"), p, "image_url.detail")
            notes.field(_DETAIL, detail, (p, "image_url.detail"))
            parts.append(ImagePart(url=string(image.get("url"), p, "image_url.url"), detail=detail))
        elif isinstance(kind, str):  # audio, files, a type of tomorrow: the vendor judges
            notes.field(_OTHER_PARTS, kind, (p, "type"))
        else:
            raise invalid(f"Unsupported content part type {kind!r}.", p, "type")
    return tuple(parts)


# Per message, per call and per tool, the common JSON type of a field is tested inline
# and the shared check (which raises, or takes what the quick test does not) is called
# only otherwise: these run per element of an agent's long conversation.


def _tool_calls(value: Any, at: At) -> tuple[ToolCall, ...]:
    calls = []
    for j, raw in enumerate(value if type(value) is list else array(value, at)):
        call = raw if type(raw) is dict else obj(raw, (at, j))
        fn = call.get("function")
        if type(fn) is not dict:
            fn = obj(fn, (at, j), "function")
        call_id, name, arguments = call.get("id"), fn.get("name"), fn.get("arguments", "")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            call_id = string(call_id, (at, j), "id")
            name = string(name, (at, j), "function.name")
            arguments = string(arguments, (at, j), "function.arguments")
        calls.append(ToolCall(call_id, name, arguments))  # positional: see _message
    return tuple(calls)


def _message(raw: Any, i: int, notes: Notes) -> Message:
    at = ("messages", i)
    msg = raw if type(raw) is dict else obj(raw, at)
    role = msg.get("role")
    role = _ROLES.get(role) if type(role) is str else None  # a list or object: no role
    if role is None:
        raise invalid("Role must be one of system, developer, user, assistant, tool.", at, "role")
    raw_content = msg.get("content")
    if type(raw_content) is str:
        content: tuple[ContentPart, ...] = (TextPart(raw_content),)
    elif raw_content is None:  # an assistant's turn of tool calls only
        content = ()
    else:
        content = _content(raw_content, (at, "content"), notes)
    name = msg.get("name")
    if name is not None:
        notes.field("messages[].name", string(name, at, "name"), (at, "name"))
    # Positional (role, content, tool_calls, tool_call_id, name): a class called with
    # keywords builds a dict per call.
    if role == "tool":
        call_id = msg.get("tool_call_id")
        if type(call_id) is not str:
            call_id = string(call_id, at, "tool_call_id")
        return Message(role, content, (), call_id, name)
    if role == "assistant":
        raw_calls = msg.get("tool_calls")
        calls = () if raw_calls is None else _tool_calls(raw_calls, (at, "tool_calls"))
        return Message(role, content, calls, None, name)
    return Message(role, content, (), None, name)


def _tool(raw: Any, i: int, notes: Notes) -> ToolSpec | None:
    """A function tool; ``None`` for another kind (the policy rules on it)."""
    # The common tool (a function with a valid name, an object of parameters and no other
    # keys) is taken here at once; any other, valid or not, by the checks one by one.
    fn = raw.get("function") if type(raw) is dict else None
    if type(fn) is dict and raw.get("type", "function") == "function":
        name, parameters = fn.get("name"), fn.get("parameters")
        description, strict = fn.get("description"), fn.get("strict")
        if (
            type(name) is str
            and valid_tool_name(name)
            and type(parameters) is dict
            and (description is None or type(description) is str)
            and (strict is None or type(strict) is bool)
            # No other key: as many keys as the known ones found (a null one is not
            # counted, so a function with one goes the slow way).
            and len(fn) == 2 + (description is not None) + (strict is not None)
        ):
            return ToolSpec(name, parameters, description, strict is True)
    return _checked_tool(raw, i, notes)


def _checked_tool(raw: Any, i: int, notes: Notes) -> ToolSpec | None:
    at = ("tools", i)
    tool = raw if type(raw) is dict else obj(raw, at)
    kind = tool.get("type", "function")
    if kind != "function":
        notes.field("tools[] (custom)", string(kind, at, "type"), (at, "type"))
        return None
    fn = tool.get("function")
    if type(fn) is not dict:
        fn = obj(fn, at, "function")
    fa = (at, "function")
    name = fn.get("name")
    if type(name) is not str:
        name = string(name, fa, "name")
    if not name:
        raise invalid("Tool name must not be empty.", fa, "name")
    tool_name_field(name, fa, "name")
    parameters = fn.get("parameters")
    if parameters is None:
        parameters = _EMPTY_PARAMETERS
    elif type(parameters) is not dict:
        raise invalid(f"{spell(fa, 'parameters')} must be an object.", fa, "parameters")
    description, strict = fn.get("description"), fn.get("strict")
    if description is not None and type(description) is not str:
        description = string(description, fa, "description")
    if strict is not None and type(strict) is not bool:
        bool_field(strict, fa, "strict")
    notes.unknown_keys(fn, _FUNCTION_KEYS, "tools[].function")
    return ToolSpec(name, parameters, description, strict is True)  # positional: per tool


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...], notes: Notes) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        raise invalid("tool_choice must be auto, none, required or a function.", "tool_choice")
    choice = obj(value, "tool_choice")
    if choice.get("type", "function") != "function":
        notes.field("tool_choice (custom, allowed_tools)", choice.get("type"), "tool_choice.type")
        return None
    fn = obj(choice.get("function"), "tool_choice.function")
    name = string(fn.get("name"), "tool_choice.function.name")
    if not any(t.name == name for t in tools):
        raise invalid(
            f"tool_choice names {name!r}, which is not in tools.", "tool_choice.function.name"
        )
    return ForcedTool(name)


def _response_format(value: Any) -> ResponseFormat | None:
    if value is None:
        return None
    rf = obj(value, "response_format")
    kind = rf.get("type")
    if kind in ("text", "json_object"):
        return kind  # type: ignore[no-any-return]
    if kind != "json_schema":
        raise invalid(
            "response_format.type must be text, json_object or json_schema.", "response_format.type"
        )
    at = "response_format.json_schema"
    js = obj(rf.get("json_schema"), at)
    schema = js.get("schema")
    if not isinstance(schema, dict):
        raise invalid(f"{at}.schema must be an object.", at, "schema")
    return JsonSchemaFormat(
        schema=schema,
        name=string(js.get("name", "output"), at, "name") or "output",
        strict=bool(bool_field(js.get("strict"), at, "strict")),
        description=optional_string(js.get("description"), at, "description"),
    )


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(string(s, "stop", i) for i, s in enumerate(array(value, "stop")))


def decode_chat_request(
    data: Any, headers: tuple[Header, ...] = (), encoded: Members = NO_MEMBERS
) -> ChatRequest:
    """Validate the request shape and build the canonical request (raises 400); the body,
    the vendor ``headers`` and the body's ``encoded`` members ride along as its ``origin``."""
    if type(data) is not dict and not isinstance(data, Mapping):
        raise invalid("The request body must be a JSON object.", None)
    body: Mapping[str, Any] = data
    notes = Notes("chat")
    notes.top(body)
    if headers:
        notes.headers(headers)
    model = model_field(string(body.get("model"), "model"))
    raw_messages = body.get("messages")
    if raw_messages is None:
        raise invalid("messages is required.", "messages")
    messages = tuple(map(_message, array(raw_messages, "messages"), count(), repeat(notes)))
    if not messages:
        raise invalid("messages must not be empty.", "messages")
    raw_tools = body.get("tools")
    tools: tuple[ToolSpec, ...] = ()
    tool_paths: tuple[str, ...] = ()
    if raw_tools is not None:
        specs = list(map(_tool, array(raw_tools, "tools"), count(), repeat(notes)))
        tools = tuple(filter(None, specs))
        if len(tools) != len(specs):  # another kind of tool between them
            tool_paths = tuple(f"tools[{i}]" for i, t in enumerate(specs) if t is not None)
    if _SETTINGS.isdisjoint(body):  # the common body: every setting at its default
        return ChatRequest(
            model,
            messages,
            tools,
            origin=_origin(body, headers, len(messages), tools, tool_paths, notes, encoded),
        )
    n = int_field(body.get("n"), "n", 1) or 1
    if n > MAX_CHOICES:
        raise invalid(f"n must be at most {MAX_CHOICES}.", "n")
    max_tokens = int_field(body.get("max_completion_tokens"), "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = int_field(body.get("max_tokens"), "max_tokens", 1)
    metadata: dict[str, Any] = {}
    if body.get("stream_options") is not None:
        metadata[STREAM_OPTIONS_KEY] = dict(obj(body["stream_options"], "stream_options"))
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools, notes),
        response_format=_response_format(body.get("response_format")),
        max_tokens=max_tokens,
        temperature=number(body.get("temperature"), "temperature"),
        top_p=number(body.get("top_p"), "top_p"),
        stop=_stop(body.get("stop")),
        stream=bool(bool_field(body.get("stream"), "stream")),
        parallel_tool_calls=bool_field(body.get("parallel_tool_calls"), "parallel_tool_calls"),
        user=optional_string(body.get("user"), "user"),
        metadata=metadata,
        n=n,
        origin=_origin(body, headers, len(messages), tools, tool_paths, notes, encoded),
    )


def _origin(
    body: Mapping[str, Any],
    headers: tuple[Header, ...],
    messages: int,
    tools: tuple[ToolSpec, ...],
    tool_paths: tuple[str, ...],
    notes: Notes,
    encoded: Members,
) -> Origin:
    # Positional (wire, body, headers, messages, tool_names, tool_paths, screens, tools,
    # encoded): a class called with keywords builds a dict per call. The tools only when
    # each is the body's ``tools[i]`` (no other kind of tool between them).
    decoded = () if tool_paths else tools
    screens = notes.screens()
    return Origin("chat", body, headers, messages, (), tool_paths, screens, decoded, encoded)

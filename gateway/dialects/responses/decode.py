"""Responses request JSON (``POST /v1/responses``) -> ``ResponsesRequest``.

Shape errors raise ``InvalidRequest`` (400) with ``param`` naming the exact field, e.g.
``input[2].content[0].type`` or ``tools[0].name``. Every other field follows the field
policy (``gateway.dialects.policy``): the body goes to a Responses upstream as the client
sent it (``background``, ``conversation`` and ``prompt`` are refused everywhere: the
gateway answers in the request and keeps the conversation itself), and the policy's
verdict for the other upstreams rides along. A ``null`` value counts as absent, as the
API treats it.

A function tool without ``strict`` is strict (the Responses API's default); a
``text.format`` of type ``json_schema`` is strict only when it says so. Schemas are kept
untouched (the enforcement check lints them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

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
    ResponseFormat,
    Screen,
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
    int_field,
    invalid,
    model_field,
    number_between,
    obj,
    optional_string,
    spell,
    string,
    tool_name_field,
)
from gateway.dialects.notes import Notes

# A function tool without parameters takes an empty object (strict-ready as it stands).
EMPTY_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}
# The API's bounds on ``metadata``.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512

_FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_FUNCTION_FIELDS = frozenset({"defer_loading", "allowed_callers", "output_schema"})
_FORMAT_KEYS = frozenset({"type", "name", "schema", "strict", "description"})
_TEXT_KEYS = frozenset({"format", "verbosity"})
_REASONING_KEYS = frozenset({"effort", "summary", "generate_summary"})
_STREAM_OPTION_KEYS = frozenset({"include_obfuscation"})
_HOSTED = "tools[] (hosted and custom tools)"
_OTHER_ITEMS = "input[] (other item types)"
_FILES = "input[].content[] (input_file, file_id)"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


@record
class ResponsesRequest:
    """A decoded ``/v1/responses`` request: the canonical request built from this
    request's own input (``history`` prepended by ``chat``), and what the response echoes
    or stores. ``items`` are the request's input items as wire JSON (a string input as one
    user message), kept for ``previous_response_id``."""

    model: str
    items: tuple[dict[str, Any], ...]
    instructions: str | None
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice | None
    text_format: ResponseFormat | None
    max_output_tokens: int | None
    temperature: float | None
    top_p: float | None
    parallel_tool_calls: bool | None
    user: str | None
    stream: bool
    store: bool
    previous_response_id: str | None
    metadata: dict[str, str]
    reasoning_effort: str | None = None
    # The client's body, vendor headers and the field policy's verdict, for
    # ``ChatRequest.origin``.
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: tuple[Header, ...] = ()
    tool_paths: tuple[str, ...] = ()
    # ``(function name, namespace)`` of each function tool inside a namespace tool: the
    # answer's call names its namespace, whichever upstream made it.
    namespaces: tuple[tuple[str, str], ...] = ()
    screens: Mapping[str, Screen] = field(default_factory=dict)
    encoded: Members = field(default_factory=dict, compare=False, repr=False)  # ``Origin.encoded``

    def chat(self, history: Sequence[dict[str, Any]] = ()) -> ChatRequest:
        """The canonical request: ``instructions``, then ``history`` (a stored response's
        input and output items), then this request's input. Its ``origin`` is the client's
        body with the history inlined: ``previous_response_id`` names a response the
        gateway stored, which no upstream has."""
        messages: list[Message] = []
        if self.instructions:
            messages.append(Message(role="system", content=(TextPart(self.instructions),)))
        append_items(messages, history, "previous_response_id")
        append_items(messages, self.items, "input")
        return ChatRequest(
            model=self.model,
            messages=tuple(messages),
            tools=self.tools,
            tool_choice=self.tool_choice,
            response_format=self.text_format,
            max_tokens=self.max_output_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stream=self.stream,
            parallel_tool_calls=self.parallel_tool_calls,
            user=self.user,
            origin=Origin(
                "responses",
                self._upstream_body(history),
                self.headers,
                messages=len(messages),
                tool_paths=self.tool_paths,
                screens=self.screens,
                encoded=self.encoded,
            ),
        )

    def _upstream_body(self, history: Sequence[dict[str, Any]]) -> Mapping[str, Any]:
        if not history and self.previous_response_id is None:
            return self.body
        body = {k: v for k, v in self.body.items() if k != "previous_response_id"}
        body["input"] = [*history, *self.items]
        return body


# -- input items ------------------------------------------------------------------------


def _parts(value: Any, at: At, *, assistant: bool, notes: Notes | None) -> tuple[ContentPart, ...]:
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(array(value, at)):
        p = (at, j)
        part = obj(raw, p)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(TextPart(string(part.get("text"), p, "text")))
        elif kind == "refusal" and assistant:
            parts.append(TextPart(string(part.get("refusal"), p, "refusal")))
        elif kind == "input_image" and not assistant:
            url = part.get("image_url")
            detail = optional_string(part.get("detail"), p, "detail")
            if url is None:  # by file_id: only the API that holds the file can read it
                if notes is not None:
                    notes.field(_FILES, "file_id", (p, "file_id"))
                continue
            if notes is not None:
                notes.field("input[].content[].detail", detail, (p, "detail"))
            parts.append(ImagePart(url=string(url, p, "image_url"), detail=detail))
        elif kind == "input_file":
            if notes is not None:
                notes.field(_FILES, kind, (p, "type"))
        else:
            raise invalid(f"Unsupported content part type {kind!r}.", p, "type")
    return tuple(parts)


def _message_item(item: Mapping[str, Any], at: At, notes: Notes | None) -> Message:
    role = item.get("role")
    role = _ROLES.get(role) if type(role) is str else None  # a list or object: no role
    if role is None:
        raise invalid("role must be one of user, assistant, system, developer.", at, "role")
    if "content" not in item:
        raise invalid(f"{spell(at, 'content')} is required.", at, "content")
    content = _parts(item["content"], (at, "content"), assistant=role == "assistant", notes=notes)
    if role == "system" and any(isinstance(c, ImagePart) for c in content):
        raise invalid("A system or developer message takes text only.", at, "content")
    return Message(role=role, content=content)  # type: ignore[arg-type]


def _call_item(item: Mapping[str, Any], at: At) -> ToolCall:
    call_id = string(item.get("call_id"), at, "call_id")
    name = string(item.get("name"), at, "name")
    if not call_id or not name:
        p = spell(at)
        raise invalid(f"{p}.call_id and {p}.name must not be empty.", at, "call_id")
    namespace = optional_string(item.get("namespace"), at, "namespace")
    return ToolCall(
        id=call_id,
        name=name,
        raw_arguments=string(item.get("arguments"), at, "arguments"),
        namespace=namespace,
    )


def _output_item(item: Mapping[str, Any], at: At, notes: Notes | None) -> Message:
    output = item.get("output")
    content: tuple[ContentPart, ...] = (
        (TextPart(output),)
        if isinstance(output, str)
        else _parts(output, (at, "output"), assistant=False, notes=notes)
    )
    return Message(
        role="tool", content=content, tool_call_id=string(item.get("call_id"), at, "call_id")
    )


def append_items(
    out: list[Message], items: Sequence[Any], param: str, notes: Notes | None = None
) -> None:
    """Input items -> canonical messages, appended to ``out``. Consecutive function calls
    (and the assistant text before them) become one assistant turn, as chat completions
    and Messages both need. ``notes``: where items the canonical request has no place for
    are recorded (None: items the gateway stored itself)."""
    for i, raw in enumerate(items):
        p = (param, i)
        item = obj(raw, p)
        kind = item.get("type", "message")
        last = out[-1] if out else None
        thought = last is not None and _reasoning_only(last)
        if kind == "message":
            message = _message_item(item, p, notes)
            if thought and message.role == "assistant":
                assert last is not None
                out[-1] = Message(
                    role="assistant", content=message.content, reasoning=last.reasoning
                )
                continue
            if thought:
                out.pop()  # reasoning without its following item: no upstream takes it
            out.append(message)
        elif kind == "function_call":
            call = _call_item(item, p)
            if last is not None and last.role == "assistant":
                out[-1] = Message(
                    role="assistant",
                    content=last.content,
                    tool_calls=(*last.tool_calls, call),
                    reasoning=last.reasoning,
                )
            else:
                out.append(Message(role="assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            if thought:
                out.pop()
            out.append(_output_item(item, p, notes))
        elif kind == "reasoning":
            # Kept whole (id, encrypted_content) for a Responses upstream, which needs it
            # back between tool calls; the policy drops it, named, for other wires.
            reasoning = _reasoning_item(item, p)
            if notes is not None:
                notes.field("input[] (reasoning)", kind, (p, "type"))
            if thought:
                assert last is not None
                out[-1] = Message(role="assistant", reasoning=(*last.reasoning, reasoning))
            else:
                out.append(Message(role="assistant", reasoning=(reasoning,)))
        elif not isinstance(kind, str):
            raise invalid(f"{spell(p, 'type')} must be a string.", p, "type")
        elif notes is not None:
            # Hosted tools' items, custom calls: the policy rules (forwarded same-wire).
            notes.field(_OTHER_ITEMS, kind, (p, "type"))
    if out and _reasoning_only(out[-1]):
        out.pop()


def _reasoning_only(message: Message) -> bool:
    return bool(message.reasoning) and not message.content and not message.tool_calls


def _reasoning_item(item: Mapping[str, Any], at: At) -> Reasoning:
    string(item.get("id"), at, "id")
    summary = array(item.get("summary", []), at, "summary")
    sa = (at, "summary")
    text = "".join(
        string(obj(s, sa, j).get("text"), (sa, j), "text") for j, s in enumerate(summary)
    )
    optional_string(item.get("encrypted_content"), at, "encrypted_content")
    return Reasoning("responses", dict(item), text)


def _items(value: Any, notes: Notes) -> tuple[dict[str, Any], ...]:
    if isinstance(value, str):
        return ({"type": "message", "role": "user", "content": value},)
    items = array(value, "input")
    if not items:
        raise invalid("input must not be empty.", "input")
    checked: list[Message] = []
    append_items(checked, items, "input", notes)  # shape errors now, with input[i] params
    return tuple(dict(item) for item in items)  # each checked an object above


# -- tools and formats -----------------------------------------------------------------


def _function(tool: Mapping[str, Any], at: At, notes: Notes) -> ToolSpec:
    notes.unknown_keys(tool, _FUNCTION_KEYS, "tools[]", fields=_FUNCTION_FIELDS, at=at, nulls=True)
    name = string(tool.get("name"), at, "name")
    if not name:
        raise invalid("Tool name must not be empty.", at, "name")
    tool_name_field(name, at, "name")
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = EMPTY_PARAMETERS
    elif type(parameters) is not dict:
        raise invalid(f"{spell(at, 'parameters')} must be an object.", at, "parameters")
    strict = bool_field(tool.get("strict"), at, "strict")
    return ToolSpec(
        name=name,
        parameters=parameters,
        description=optional_string(tool.get("description"), at, "description"),
        strict=True if strict is None else strict,
    )


_Tools = tuple[tuple[ToolSpec, ...], tuple[str, ...], tuple[tuple[str, str], ...]]


def _tools(value: Any, notes: Notes) -> _Tools:
    """Function tools, a namespace's among them (flattened: the model calls them by
    name), where each is in the body when that is not ``tools[i]``, and the namespace of
    each namespaced one (``(name, namespace)``); other tools are the policy's to rule on."""
    if value is None:
        return (), (), ()
    out: list[ToolSpec] = []
    paths: list[str] = []
    namespaces: list[tuple[str, str]] = []
    for i, raw in enumerate(array(value, "tools")):
        p = f"tools[{i}]"
        tool = obj(raw, p)
        kind = tool.get("type")
        if kind == "function":
            out.append(_function(tool, p, notes))
            paths.append(p)
        elif kind == "namespace":
            notes.field("tools[] (namespace)", kind, (p, "type"))
            inner = array(tool.get("tools"), p, "tools")
            space = optional_string(tool.get("name"), p, "name")
            for j, sub in enumerate(inner):
                q = f"{p}.tools[{j}]"
                fn = obj(sub, q)
                if fn.get("type") == "function":
                    out.append(_function(fn, q, notes))
                    paths.append(q)
                    if space:
                        namespaces.append((out[-1].name, space))
                else:
                    notes.field(_HOSTED, fn.get("type"), (q, "type"))
        elif isinstance(kind, str):
            notes.field(_HOSTED, kind, (p, "type"))
        else:
            raise invalid(f"{p}.type must be a string.", p, "type")
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise invalid(f"Duplicate function name {dup!r} (namespaces included).", "tools")
    moved = any(p != f"tools[{i}]" for i, p in enumerate(paths))
    return tuple(out), tuple(paths) if moved else (), tuple(namespaces)


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...], notes: Notes) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        raise invalid("tool_choice must be auto, none, required or a function.", "tool_choice")
    choice = obj(value, "tool_choice")
    if choice.get("type") != "function":
        notes.field(
            "tool_choice (hosted, allowed_tools)", choice.get("type") or "?", "tool_choice.type"
        )
        return None
    name = string(choice.get("name"), "tool_choice.name")
    if not any(t.name == name for t in tools):
        raise invalid(f"tool_choice names {name!r}, which is not in tools.", "tool_choice.name")
    return ForcedTool(name)


def _text_format(value: Any, notes: Notes) -> ResponseFormat | None:
    if value is None:
        return None
    text = obj(value, "text")
    notes.unknown_keys(text, _TEXT_KEYS, "text", nulls=True)
    notes.field("text.verbosity", text.get("verbosity"))
    if text.get("format") is None:
        return None
    fmt = obj(text["format"], "text.format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return kind  # type: ignore[no-any-return]
    if kind != "json_schema":
        raise invalid(
            "text.format.type must be text, json_object or json_schema.", "text.format.type"
        )
    notes.unknown_keys(fmt, _FORMAT_KEYS, "text.format", nulls=True)
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise invalid("text.format.schema must be an object.", "text.format.schema")
    return JsonSchemaFormat(
        schema=schema,
        name=string(fmt.get("name"), "text.format.name"),
        strict=bool(bool_field(fmt.get("strict"), "text.format.strict")),
        description=optional_string(fmt.get("description"), "text.format.description"),
    )


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    meta = obj(value, "metadata")
    if len(meta) > MAX_METADATA_PAIRS:
        raise invalid(f"metadata takes at most {MAX_METADATA_PAIRS} pairs.", "metadata")
    for key, item in meta.items():
        if len(key) > MAX_METADATA_KEY:
            raise invalid(f"metadata keys are at most {MAX_METADATA_KEY} characters.", "metadata")
        if not isinstance(item, str) or len(item) > MAX_METADATA_VALUE:
            raise invalid(
                f"metadata values are strings of at most {MAX_METADATA_VALUE} characters.",
                "metadata",
                key,
            )
    return dict(meta)


def _include(value: Any) -> None:
    if value is None:
        return
    for i, item in enumerate(array(value, "include")):
        string(item, "include", i)


def _reasoning(value: Any, notes: Notes) -> str | None:
    if value is None:
        return None
    reasoning = obj(value, "reasoning")
    notes.unknown_keys(reasoning, _REASONING_KEYS, "reasoning", nulls=True)
    notes.field("reasoning.summary", reasoning.get("summary"))
    notes.field("reasoning.generate_summary", reasoning.get("generate_summary"))
    effort = optional_string(reasoning.get("effort"), "reasoning.effort")
    notes.field("reasoning.effort", effort)
    return effort


def decode_request(
    data: Any, headers: tuple[Header, ...] = (), encoded: Members = NO_MEMBERS
) -> ResponsesRequest:
    """Validate the request shape and decode it (raises 400)."""
    if not isinstance(data, Mapping):
        raise invalid("The request body must be a JSON object.", None)
    notes = Notes("responses")
    notes.top(data)
    if headers:
        notes.headers(headers)
    _include(data.get("include"))
    options = data.get("stream_options")
    if options is not None:
        notes.unknown_keys(
            obj(options, "stream_options"), _STREAM_OPTION_KEYS, "stream_options", nulls=True
        )
    model = model_field(string(data.get("model"), "model"))
    if data.get("input") is None:
        raise invalid("input is required.", "input")
    tools, tool_paths, namespaces = _tools(data.get("tools"), notes)
    store = bool_field(data.get("store"), "store")
    items = _items(data["input"], notes)
    text_format = _text_format(data.get("text"), notes)
    effort = _reasoning(data.get("reasoning"), notes)
    return ResponsesRequest(
        model=model,
        items=items,
        instructions=optional_string(data.get("instructions"), "instructions"),
        tools=tools,
        tool_choice=_tool_choice(data.get("tool_choice"), tools, notes),
        text_format=text_format,
        max_output_tokens=int_field(data.get("max_output_tokens"), "max_output_tokens", 1),
        temperature=number_between(data.get("temperature"), "temperature", 0.0, 2.0),
        top_p=number_between(data.get("top_p"), "top_p", 0.0, 1.0),
        parallel_tool_calls=bool_field(data.get("parallel_tool_calls"), "parallel_tool_calls"),
        user=optional_string(data.get("user"), "user"),
        stream=bool(bool_field(data.get("stream"), "stream")),
        store=True if store is None else store,
        previous_response_id=optional_string(
            data.get("previous_response_id"), "previous_response_id"
        ),
        metadata=_metadata(data.get("metadata")),
        reasoning_effort=effort,
        body=data,
        headers=headers,
        tool_paths=tool_paths,
        namespaces=namespaces,
        screens=notes.screens(),
        encoded=encoded,
    )

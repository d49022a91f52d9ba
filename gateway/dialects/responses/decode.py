"""Responses request JSON (``POST /v1/responses``) -> ``ResponsesRequest``.

Shape errors raise ``InvalidRequest`` (400) with ``param`` naming the exact field, e.g.
``input[2].content[0].type`` or ``tools[0].name``. A field the gateway does not know is
``unknown_parameter``; a field it knows but cannot honour (``background``, hosted tools,
``conversation``...) is ``unsupported_parameter``: neither is ever dropped silently. A
``null`` value counts as absent, as the API treats it.

A function tool without ``strict`` is strict (the Responses API's default); a
``text.format`` of type ``json_schema`` is strict only when it says so. Schemas are kept
untouched (the enforcement check lints them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
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
    TextPart,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from gateway.canonical.record import record
from gateway.dialects.fields import bool_field as _bool
from gateway.dialects.fields import int_field as _int
from gateway.dialects.fields import model_field, tool_name_field
from gateway.errors import InvalidRequest
from gateway.upstream.openai_codec import PASSTHROUGH_KEY

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

_SUPPORTED = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
    "max_output_tokens", "temperature", "top_p", "metadata", "stream", "store",
    "previous_response_id", "include", "user", "stream_options", "truncation",
    "reasoning", "service_tier", "top_logprobs",
})  # fmt: skip
# Known to the API, not honoured here: refused with their name rather than ignored.
_UNSUPPORTED = frozenset({
    "background", "background_options", "conversation", "prompt", "max_tool_calls",
    "context_management", "moderation", "image", "access_programs", "prompt_cache_key",
    "prompt_cache_options", "prompt_cache_retention", "safety_identifier",
})  # fmt: skip
# Output the gateway never produces: asking to include it changes nothing.
_INCLUDABLE = frozenset({
    "file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
    "code_interpreter_call.outputs", "computer_call_output.output.image_url",
    "message.input_image.image_url", "reasoning.encrypted_content",
})  # fmt: skip
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
    # The client's body and vendor headers, for ``ChatRequest.origin``.
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: tuple[Header, ...] = ()

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
        metadata: dict[str, Any] = {}
        if self.reasoning_effort is not None:
            metadata[PASSTHROUGH_KEY] = {"reasoning_effort": self.reasoning_effort}
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
            metadata=metadata,
            origin=Origin("responses", self._upstream_body(history), self.headers,
                          messages=len(messages)),
        )

    def _upstream_body(self, history: Sequence[dict[str, Any]]) -> Mapping[str, Any]:
        if not history and self.previous_response_id is None:
            return self.body
        body = {k: v for k, v in self.body.items() if k != "previous_response_id"}
        body["input"] = [*history, *self.items]
        return body


def _bad(message: str, param: str | None, code: str | None = None) -> InvalidRequest:
    return InvalidRequest(message, param=param, code=code)


def _str(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise _bad(f"{param} must be a string.", param)
    return value


def _opt_str(value: Any, param: str) -> str | None:
    return None if value is None else _str(value, param)


def _number(value: Any, param: str, low: float, high: float) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise _bad(f"{param} must be a number between {low:g} and {high:g}.", param)
    return float(value)


def _object(value: Any, param: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(f"{param} must be an object.", param)
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(f"{param} must be an array.", param)
    return value


def _unsupported(param: str, what: str) -> InvalidRequest:
    return _bad(f"{what} is not supported by this gateway.", param, "unsupported_parameter")


def _check_keys(obj: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    for key in obj:
        if key not in known and obj[key] is not None:
            param = f"{prefix}.{key}" if prefix else key
            raise _bad(f"Unknown parameter: '{param}'.", param, "unknown_parameter")


# -- input items ------------------------------------------------------------------------


def _parts(value: Any, param: str, *, assistant: bool) -> tuple[ContentPart, ...]:
    if isinstance(value, str):
        return (TextPart(value),)
    parts: list[ContentPart] = []
    for j, raw in enumerate(_list(value, param)):
        p = f"{param}[{j}]"
        part = _object(raw, p)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(TextPart(_str(part.get("text"), f"{p}.text")))
        elif kind == "refusal" and assistant:
            parts.append(TextPart(_str(part.get("refusal"), f"{p}.refusal")))
        elif kind == "input_image" and not assistant:
            url = part.get("image_url")
            if url is None:
                raise _unsupported(f"{p}.file_id", "An image by file_id")
            parts.append(ImagePart(url=_str(url, f"{p}.image_url")))
        elif kind == "input_file":
            raise _unsupported(f"{p}.type", "An input_file part")
        else:
            raise _bad(f"Unsupported content part type {kind!r}.", f"{p}.type")
    return tuple(parts)


def _message_item(item: Mapping[str, Any], p: str) -> Message:
    role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise _bad("role must be one of user, assistant, system, developer.", f"{p}.role")
    if "content" not in item:
        raise _bad(f"{p}.content is required.", f"{p}.content")
    content = _parts(item["content"], f"{p}.content", assistant=role == "assistant")
    if role == "system" and any(isinstance(c, ImagePart) for c in content):
        raise _bad("A system or developer message takes text only.", f"{p}.content")
    return Message(role=role, content=content)  # type: ignore[arg-type]


def _call_item(item: Mapping[str, Any], p: str) -> ToolCall:
    call_id = _str(item.get("call_id"), f"{p}.call_id")
    name = _str(item.get("name"), f"{p}.name")
    if not call_id or not name:
        raise _bad(f"{p}.call_id and {p}.name must not be empty.", f"{p}.call_id")
    return ToolCall(id=call_id, name=name, raw_arguments=_str(item.get("arguments"),
                                                             f"{p}.arguments"))


def _output_item(item: Mapping[str, Any], p: str) -> Message:
    output = item.get("output")
    content: tuple[ContentPart, ...] = (
        (TextPart(output),) if isinstance(output, str)
        else _parts(output, f"{p}.output", assistant=False)
    )
    return Message(role="tool", content=content,
                   tool_call_id=_str(item.get("call_id"), f"{p}.call_id"))


def append_items(out: list[Message], items: Sequence[Any], param: str) -> None:
    """Input items -> canonical messages, appended to ``out``. Consecutive function calls
    (and the assistant text before them) become one assistant turn, as chat completions
    and Messages both need."""
    for i, raw in enumerate(items):
        p = f"{param}[{i}]"
        item = _object(raw, p)
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message_item(item, p))
        elif kind == "function_call":
            call = _call_item(item, p)
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = Message(role="assistant", content=last.content,
                                  tool_calls=(*last.tool_calls, call))
            else:
                out.append(Message(role="assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            out.append(_output_item(item, p))
        elif kind == "reasoning":
            # Replayed reasoning from another provider's turn: no canonical place for it and
            # no upstream here can take it back, so it is dropped rather than refused.
            continue
        else:
            raise _unsupported(f"{p}.type", f"An input item of type {kind!r}")


def _items(value: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(value, str):
        return ({"type": "message", "role": "user", "content": value},)
    items = _list(value, "input")
    if not items:
        raise _bad("input must not be empty.", "input")
    checked: list[Message] = []
    append_items(checked, items, "input")  # shape errors now, with input[i] params
    return tuple(dict(_object(item, f"input[{i}]")) for i, item in enumerate(items))


# -- tools and formats -----------------------------------------------------------------


def _tool(raw: Any, i: int) -> ToolSpec:
    p = f"tools[{i}]"
    tool = _object(raw, p)
    kind = tool.get("type")
    if kind != "function":
        raise _unsupported(f"{p}.type", f"A tool of type {kind!r}")
    _check_keys(tool, frozenset({"type", "name", "description", "parameters", "strict"}), p)
    name = _str(tool.get("name"), f"{p}.name")
    if not name:
        raise _bad("Tool name must not be empty.", f"{p}.name")
    tool_name_field(name, f"{p}.name")
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = EMPTY_PARAMETERS
    elif not isinstance(parameters, dict):
        raise _bad(f"{p}.parameters must be an object.", f"{p}.parameters")
    strict = _bool(tool.get("strict"), f"{p}.strict")
    return ToolSpec(
        name=name,
        parameters=parameters,
        description=_opt_str(tool.get("description"), f"{p}.description"),
        strict=True if strict is None else strict,
    )


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        raise _bad("tool_choice must be auto, none, required or a function.", "tool_choice")
    choice = _object(value, "tool_choice")
    if choice.get("type") != "function":
        raise _unsupported("tool_choice.type", f"tool_choice of type {choice.get('type')!r}")
    name = _str(choice.get("name"), "tool_choice.name")
    if not any(t.name == name for t in tools):
        raise _bad(f"tool_choice names {name!r}, which is not in tools.", "tool_choice.name")
    return ForcedTool(name)


def _text_format(value: Any) -> ResponseFormat | None:
    if value is None:
        return None
    text = _object(value, "text")
    _check_keys(text, frozenset({"format", "verbosity"}), "text")
    if text.get("verbosity") not in (None, "medium"):
        raise _unsupported("text.verbosity", "A verbosity other than medium")
    if text.get("format") is None:
        return None
    fmt = _object(text["format"], "text.format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return kind  # type: ignore[no-any-return]
    if kind != "json_schema":
        raise _bad("text.format.type must be text, json_object or json_schema.",
                   "text.format.type")
    _check_keys(fmt, frozenset({"type", "name", "schema", "strict", "description"}),
                "text.format")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise _bad("text.format.schema must be an object.", "text.format.schema")
    return JsonSchemaFormat(
        schema=schema,
        name=_str(fmt.get("name"), "text.format.name"),
        strict=bool(_bool(fmt.get("strict"), "text.format.strict")),
        description=_opt_str(fmt.get("description"), "text.format.description"),
    )


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    meta = _object(value, "metadata")
    if len(meta) > MAX_METADATA_PAIRS:
        raise _bad(f"metadata takes at most {MAX_METADATA_PAIRS} pairs.", "metadata")
    for key, item in meta.items():
        if len(key) > MAX_METADATA_KEY:
            raise _bad(f"metadata keys are at most {MAX_METADATA_KEY} characters.", "metadata")
        if not isinstance(item, str) or len(item) > MAX_METADATA_VALUE:
            raise _bad(f"metadata values are strings of at most {MAX_METADATA_VALUE} "
                       "characters.", f"metadata.{key}")
    return dict(meta)


def _include(value: Any) -> None:
    if value is None:
        return
    for i, item in enumerate(_list(value, "include")):
        if _str(item, f"include[{i}]") not in _INCLUDABLE:
            raise _unsupported(f"include[{i}]", f"include {item!r}")


def _reasoning(value: Any) -> str | None:
    if value is None:
        return None
    reasoning = _object(value, "reasoning")
    _check_keys(reasoning, frozenset({"effort", "summary", "generate_summary"}), "reasoning")
    if reasoning.get("summary") is not None or reasoning.get("generate_summary") is not None:
        raise _unsupported("reasoning.summary", "A reasoning summary")
    return _opt_str(reasoning.get("effort"), "reasoning.effort")


def _neutral(body: Mapping[str, Any]) -> None:
    """Fields accepted only at the value that changes nothing here."""
    if body.get("truncation") not in (None, "disabled"):
        raise _unsupported("truncation", "truncation other than disabled")
    if body.get("service_tier") not in (None, "auto", "default"):
        raise _unsupported("service_tier", "A service_tier other than auto or default")
    if body.get("top_logprobs") not in (None, 0):
        raise _unsupported("top_logprobs", "top_logprobs")
    options = body.get("stream_options")
    if options is not None:
        _check_keys(_object(options, "stream_options"), frozenset({"include_obfuscation"}),
                    "stream_options")


def decode_request(data: Any, headers: tuple[Header, ...] = ()) -> ResponsesRequest:
    """Validate the request shape and decode it (raises 400)."""
    if not isinstance(data, Mapping):
        raise _bad("The request body must be a JSON object.", None)
    for key, value in data.items():
        if value is None or key in _SUPPORTED:
            continue
        if key in _UNSUPPORTED:
            raise _unsupported(key, f"The parameter {key!r}")
        raise _bad(f"Unknown parameter: '{key}'.", key, "unknown_parameter")
    _neutral(data)
    _include(data.get("include"))
    model = model_field(_str(data.get("model"), "model"))
    if data.get("input") is None:
        raise _bad("input is required.", "input")
    raw_tools = data.get("tools")
    tools = () if raw_tools is None else tuple(
        _tool(t, i) for i, t in enumerate(_list(raw_tools, "tools"))
    )
    store = _bool(data.get("store"), "store")
    return ResponsesRequest(
        model=model,
        items=_items(data["input"]),
        instructions=_opt_str(data.get("instructions"), "instructions"),
        tools=tools,
        tool_choice=_tool_choice(data.get("tool_choice"), tools),
        text_format=_text_format(data.get("text")),
        max_output_tokens=_int(data.get("max_output_tokens"), "max_output_tokens", 1),
        temperature=_number(data.get("temperature"), "temperature", 0.0, 2.0),
        top_p=_number(data.get("top_p"), "top_p", 0.0, 1.0),
        parallel_tool_calls=_bool(data.get("parallel_tool_calls"), "parallel_tool_calls"),
        user=_opt_str(data.get("user"), "user"),
        stream=bool(_bool(data.get("stream"), "stream")),
        store=True if store is None else store,
        previous_response_id=_opt_str(data.get("previous_response_id"), "previous_response_id"),
        metadata=_metadata(data.get("metadata")),
        reasoning_effort=_reasoning(data.get("reasoning")),
        body=data,
        headers=headers,
    )

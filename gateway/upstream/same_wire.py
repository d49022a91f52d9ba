"""Same wire, same bytes: the upstream body for a client that speaks the upstream's wire.

When the client's dialect is the upstream's wire (Messages -> Anthropic, chat completions
-> an OpenAI chat upstream, Responses -> a Responses upstream), the upstream gets the
client's own body (``ChatRequest.origin.body``) with only what the gateway owns replaced:

- ``model``: the catalogue entry's ``upstream_model``;
- each tool's schema and ``strict`` as the request-side check decided (the strict
  projection, a constrained upstream's annotation-free copy, ``strict`` stripped where the
  gateway enforces), and the same for the structured-output schema;
- ``stream`` and the stream options it needs (chat: ``include_usage``, where the engine
  honours it);
- for a chat upstream, what its engine profile (``gateway.engines``) cannot read: an
  assistant turn with tool calls and no content says ``""`` where ``null`` is refused, a
  ``tool_choice`` form the engine does not read is mapped, ``max_completion_tokens`` goes as
  ``max_tokens`` where only that is read, and a schema'd output goes in the engine's form;
- ``n`` (chat: the gateway asks once per choice) and ``store`` (Responses: the gateway
  keeps what it stores; ``previous_response_id`` is already inlined by the dialect);
- a correction's turns appended after the client's messages, with its ``tool_choice``
  (and, on Messages, ``thinking`` off for that call: the API refuses a forced tool choice
  with thinking on).

Everything else, fields the gateway has never heard of included, goes as the client sent
it: the vendor judges, and its 4xx comes back as ``upstream_rejected``. The client's
vendor headers go too (``same_wire_headers``).

Example::

    if is_same_wire(request, model):
        body = same_wire_body(request, model, stream=False)
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from itertools import compress
from typing import Any

import orjson

import validator
from gateway.bounds import Members
from gateway.canonical import (
    ChatRequest,
    ForcedTool,
    Header,
    JsonSchemaFormat,
    Message,
    Origin,
    ToolChoice,
    ToolSpec,
)
from gateway.settings import ModelConfig
from gateway.upstream.anthropic_codec import encode_messages
from gateway.upstream.openai_codec import (
    constrained_output,
    constrains_output,
    encode_message,
    engine_tool_choice,
    plain_output,
)
from gateway.upstream.openai_responses import encode_items

__all__ = ["is_same_wire", "same_wire_body", "same_wire_headers", "same_wire_json"]

Body = dict[str, Any]

# The vendor headers each wire's upstream takes from the client.
_HEADERS: Mapping[str, frozenset[str]] = {
    "messages": frozenset({"anthropic-beta", "anthropic-version"}),
    "chat": frozenset({"openai-beta"}),
    "responses": frozenset({"openai-beta"}),
}


def is_same_wire(request: ChatRequest, model: ModelConfig) -> bool:
    """Whether the request's client speaks ``model``'s upstream wire."""
    origin = request.origin
    return origin is not None and origin.wire == model.wire


def same_wire_headers(request: ChatRequest, model: ModelConfig) -> tuple[Header, ...]:
    """The client's vendor headers that go to ``model``'s upstream (same wire only)."""
    origin = request.origin
    if origin is None or not origin.headers or origin.wire != model.wire:
        return ()
    wanted = _HEADERS[origin.wire]
    return tuple(h for h in origin.headers if h[0] in wanted)


def same_wire_body(request: ChatRequest, model: ModelConfig, *, stream: bool) -> Body:
    """The client's body with the gateway's parts replaced (module docstring); only for a
    request where ``is_same_wire`` holds."""
    origin = request.origin
    assert origin is not None
    return _BUILDERS[origin.wire](request, origin, model, stream)


def same_wire_json(request: ChatRequest, model: ModelConfig, *, stream: bool) -> bytes:
    """``same_wire_body`` as JSON bytes: a member still holding the very value the client
    sent goes as the depth check encoded it (``Origin.encoded``), not encoded again."""
    body = same_wire_body(request, model, stream=stream)
    origin = request.origin
    assert origin is not None
    if not origin.encoded:
        return orjson.dumps(body)
    return _spliced(body, origin.encoded)


def _spliced(body: Body, encoded: Members) -> bytes:
    """``orjson.dumps(body)``, byte for byte, with the members in ``encoded`` that ``body``
    still holds (the same object) copied from there. orjson writes an object as ``{``,
    then ``"key":value`` pairs joined by ``,``, then ``}``."""
    pieces: list[bytes | memoryview] = [b"{"]
    run: Body = {}  # members between reused ones, encoded together
    for key, value in body.items():
        kept = encoded.get(key)
        if kept is None or kept[0] is not value:
            run[key] = value
            continue
        if run:
            pieces += (orjson.dumps(run)[1:-1], b",")
            run = {}
        pieces += (orjson.dumps(key), b":", kept[1], b",")
    if run:
        pieces.append(orjson.dumps(run)[1:-1])
    elif len(pieces) > 1:
        pieces.pop()  # the last reused member's comma
    pieces.append(b"}")
    return b"".join(pieces)


# -- shared ----------------------------------------------------------------------------


def _specs(request: ChatRequest) -> dict[str, ToolSpec]:
    tools = request.tools
    return dict(zip(map(_NAME, tools), tools, strict=True))  # a later tool of a name wins


_NAME = operator.attrgetter("name")


def _patched(tool: Mapping[str, Any], changes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``tool`` with ``changes`` (a ``None`` value removes the key), or ``tool`` itself."""
    for k, v in changes.items():
        old = tool.get(k)
        if old is not v and (v is None or old != v):
            break
    else:
        return tool  # every change already there
    # The changed keys go last, in ``changes``' order: popped from a copy, then set.
    out = dict(tool)
    for k in changes:
        out.pop(k, None)
    for k, v in changes.items():
        if v is not None:
            out[k] = v
    return out


def _takes_parameters(sent: Any, spec: ToolSpec) -> bool:
    """Whether the tool's schema goes as ``spec`` has it: a tool sent without one stays
    without while its schema declares no properties (no arguments either way)."""
    return sent is not None or bool(spec.parameters.get("properties"))


def _tools(body: Body, patch: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return
    patched = [patch(t) if isinstance(t, dict) else t for t in tools]
    if any(map(operator.is_not, patched, tools)):
        body["tools"] = patched


def _extra(request: ChatRequest, origin: Origin) -> tuple[Message, ...]:
    """The turns the gateway appended (a correction's), after the client's own."""
    return request.messages[origin.messages :]


def _no_tools(
    body: Body,
    request: ChatRequest,
    extra: tuple[Message, ...],
    gateways: Callable[[Any], bool],
) -> None:
    """A correction that asks for the arguments as the reply has no tools: the body's
    function tools (``gateways``) go, and the choice with them when none is left."""
    tools = body.get("tools")
    if not extra or request.tools or not isinstance(tools, list):
        return
    kept = [t for t in tools if not gateways(t)]
    if len(kept) == len(tools):
        return
    if kept:
        body["tools"] = kept
        return
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        body.pop(key, None)


def _is_chat_function(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type", "function") == "function"


def _is_responses_function(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") in ("function", "namespace")


def _stream(body: Body, stream: bool, *, options: bool) -> None:
    if stream:
        body["stream"] = True
        return
    if body.get("stream"):
        del body["stream"]
    if options:
        body.pop("stream_options", None)


# -- chat completions ------------------------------------------------------------------


def _chat_tool(specs: Mapping[str, ToolSpec]) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    def patch(tool: Mapping[str, Any]) -> Mapping[str, Any]:
        fn = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(fn, dict):
            return tool
        spec = specs.get(fn.get("name"))  # type: ignore[arg-type]
        if spec is None:
            return tool
        return _chat_function(tool, fn, spec)

    return patch


def _chat_changed(body: Body, request: ChatRequest, origin: Origin) -> bool:
    """Patch only the body's tools the request changed since decoding, when the decoder
    vouches the rest go as sent (``Origin.tools``); False: every tool is to be checked."""
    decoded = origin.tools
    tools = request.tools
    n = len(tools)
    # A name twice: each tool of that name is checked against the last one of it.
    if not decoded or len(decoded) != n or len(set(map(_NAME, tools))) != n:
        return False
    if tools is decoded:
        return True
    sent = body["tools"]
    patched = None
    for i in compress(range(n), map(operator.is_not, tools, decoded)):
        if tools[i].name != decoded[i].name:  # type: ignore[attr-defined]
            # A tool renamed since: patched by name, as on the full path (body untouched yet).
            return False
        tool = sent[i]
        new = _chat_function(tool, tool["function"], tools[i])
        if new is not tool:
            if patched is None:
                patched = list(sent)
            patched[i] = new
    if patched is not None:
        body["tools"] = patched
    return True


def _chat_function(
    tool: Mapping[str, Any], fn: dict[str, Any], spec: ToolSpec
) -> Mapping[str, Any]:
    """A function tool of the body with ``spec``'s schema and ``strict``."""
    strict = fn.get("strict")
    sent = fn.get("parameters")
    if sent is spec.parameters and (
        strict is True if spec.strict else (strict is None or strict is False)
    ):
        return tool  # the common case, per tool: the client's schema and flag stand
    if sent is spec.parameters and strict is True and not spec.strict:
        # The gateway enforces: the flag goes and the schema comes last, as ``_patched``
        # has it (every strict tool to an engine the gateway enforces for).
        unflagged = dict(fn)
        del unflagged["strict"]
        if next(reversed(unflagged)) != "parameters":
            unflagged["parameters"] = unflagged.pop("parameters")
        return {**tool, "function": unflagged}
    changes: dict[str, Any] = {"strict": True if spec.strict else None}
    if _takes_parameters(sent, spec):
        changes["parameters"] = spec.parameters
    if strict is False and not spec.strict:
        changes["strict"] = False
    new_fn = _patched(fn, changes)
    return tool if new_fn is fn else {**tool, "function": new_fn}


def _chat_choice(choice: ToolChoice) -> Any:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _chat_format(body: Body, rf: JsonSchemaFormat, model: ModelConfig) -> None:
    if constrains_output(model):
        body.pop("response_format", None)
        body.update(constrained_output(rf, model.output_field))
        return
    if model.profile.plain_output != "json_schema":
        body["response_format"] = plain_output(rf, model.profile)
        return
    current = body.get("response_format")
    js = current.get("json_schema") if isinstance(current, dict) else None
    if not isinstance(js, dict):  # a correction asking for JSON: the gateway's own format
        wanted: Body = {"name": rf.name, "schema": rf.schema}
        if rf.strict:
            wanted["strict"] = True
        body["response_format"] = {"type": "json_schema", "json_schema": wanted}
        return
    changes: dict[str, Any] = {"schema": rf.schema, "strict": True if rf.strict else None}
    if js.get("strict") is False and not rf.strict:
        changes["strict"] = False
    new_js = _patched(js, changes)
    if new_js is not js:
        body["response_format"] = {**current, "json_schema": new_js}  # type: ignore[dict-item]


def _string_content(messages: list[Any]) -> list[Any]:
    """The client's assistant turns with tool calls and no content, saying ``""``."""
    out = list(messages)
    for i, m in enumerate(out):
        if (
            isinstance(m, dict)
            and m.get("role") == "assistant"
            and m.get("tool_calls")
            and m.get("content") is None
        ):
            out[i] = {**m, "content": ""}
    return out


def _chat_engine(body: Body, model: ModelConfig) -> None:
    """What the engine's profile cannot read, in the form it reads (module docstring)."""
    profile = model.profile
    messages = body.get("messages")
    if not profile.null_content_with_calls and isinstance(messages, list):
        body["messages"] = _string_content(messages)
    if "tool_choice" in body:
        tools = body.get("tools")
        choice = body["tool_choice"]
        # The names are read only to name the one tool of a "required" choice.
        names = (
            [str((t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)]
            if isinstance(tools, list) and profile.required_as_named and choice == "required"
            else []
        )
        choice, keep = engine_tool_choice(choice, profile, names)
        if choice is None:
            del body["tool_choice"]
        else:
            body["tool_choice"] = choice
        if keep is not None and isinstance(tools, list):
            kept = [
                t
                for t in tools
                if isinstance(t, dict) and (t.get("function") or {}).get("name") in keep
            ]
            if kept:
                body["tools"] = kept
            else:
                body.pop("tools", None)
    if not profile.max_completion_tokens and "max_completion_tokens" in body:
        limit = body.pop("max_completion_tokens")
        body.setdefault("max_tokens", limit)


def _chat(request: ChatRequest, origin: Origin, model: ModelConfig, stream: bool) -> Body:
    body = dict(origin.body)
    body["model"] = model.upstream_model
    body.pop("n", None)
    extra = _extra(request, origin)
    if extra:  # ``_no_tools`` acts on a correction's turns only
        _no_tools(body, request, extra, _is_chat_function)
    if not _chat_changed(body, request, origin):
        _tools(body, _chat_tool(_specs(request)))
    if isinstance(request.response_format, JsonSchemaFormat):
        _chat_format(body, request.response_format, model)
    null_content = model.profile.null_content_with_calls
    if extra:
        body["messages"] = [
            *body["messages"],
            *(encode_message(m, null_content=null_content) for m in extra),
        ]
        if request.tool_choice is not None and request.tools:
            body["tool_choice"] = _chat_choice(request.tool_choice)
    _chat_engine(body, model)
    _stream(body, stream, options=True)
    if stream and model.profile.stream_usage:
        options = body.get("stream_options")
        body["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
    return body


# -- Responses -------------------------------------------------------------------------


def _responses_function(
    tool: Mapping[str, Any], specs: Mapping[str, ToolSpec]
) -> Mapping[str, Any]:
    spec = specs.get(tool.get("name"))  # type: ignore[arg-type]
    if spec is None:
        return tool
    changes: dict[str, Any] = {"strict": spec.strict}  # the API's default is strict
    if _takes_parameters(tool.get("parameters"), spec):
        changes["parameters"] = spec.parameters
    return _patched(tool, changes)


def _responses_tool(
    specs: Mapping[str, ToolSpec],
) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    def patch(tool: Mapping[str, Any]) -> Mapping[str, Any]:
        kind = tool.get("type")
        if kind == "function":
            return _responses_function(tool, specs)
        inner = tool.get("tools")
        if kind != "namespace" or not isinstance(inner, list):
            return tool
        patched = [
            _responses_function(t, specs)
            if isinstance(t, dict) and t.get("type") == "function"
            else t
            for t in inner
        ]
        if all(p is t for p, t in zip(patched, inner, strict=True)):
            return tool
        return {**tool, "tools": patched}

    return patch


def _responses_format(body: Body, rf: JsonSchemaFormat) -> None:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        wanted: Body = {
            "type": "json_schema",
            "name": rf.name,
            "schema": rf.schema,
            "strict": rf.strict,
        }
        body["text"] = {**(text if isinstance(text, dict) else {}), "format": wanted}
        return
    new_fmt = _patched(fmt, {"schema": rf.schema, "strict": rf.strict})
    if new_fmt is not fmt:
        body["text"] = {**text, "format": new_fmt}  # type: ignore[dict-item]


def _responses_choice(choice: ToolChoice) -> Any:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": choice.name}
    return choice


def _responses(request: ChatRequest, origin: Origin, model: ModelConfig, stream: bool) -> Body:
    body = dict(origin.body)
    body["model"] = model.upstream_model
    body["store"] = False
    extra = _extra(request, origin)
    _no_tools(body, request, extra, _is_responses_function)
    _tools(body, _responses_tool(_specs(request)))
    if isinstance(request.response_format, JsonSchemaFormat):
        _responses_format(body, request.response_format)
    if extra:
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        body["input"] = [*(items or ()), *encode_items(extra)]
        if request.tool_choice is not None and request.tools:
            body["tool_choice"] = _responses_choice(request.tool_choice)
    _stream(body, stream, options=True)
    return body


# -- Messages --------------------------------------------------------------------------


def _messages_tool(
    specs: Mapping[str, ToolSpec], model: ModelConfig
) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    def patch(tool: Mapping[str, Any]) -> Mapping[str, Any]:
        if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
            return tool  # a server or Anthropic-defined tool: not the gateway's
        spec = specs.get(tool.get("name"))  # type: ignore[arg-type]
        if spec is None:
            return tool
        constrained = spec.strict and model.constrained
        schema = validator.anthropic_copy(spec.parameters) if constrained else spec.parameters
        return _patched(tool, {"input_schema": schema, "strict": True if constrained else None})

    return patch


def _messages_format(body: Body, rf: JsonSchemaFormat) -> None:
    schema = validator.anthropic_copy(rf.schema)
    config = body.get("output_config")
    config = config if isinstance(config, dict) else {}
    fmt = config.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        new_fmt = _patched(fmt, {"schema": schema})
        if new_fmt is not fmt:
            body["output_config"] = {**config, "format": new_fmt}
        return
    legacy = body.get("output_format")  # the name before output_config.format
    if isinstance(legacy, dict) and legacy.get("type") == "json_schema":
        body["output_format"] = _patched(legacy, {"schema": schema})
        return
    body["output_config"] = {**config, "format": {"type": "json_schema", "schema": schema}}


def _append_turns(turns: list[Any], extra: list[dict[str, Any]]) -> list[Any]:
    """``turns`` then ``extra``, a turn of the same role as the last merged into it (the
    API wants alternating roles)."""
    out = list(turns)
    for turn in extra:
        last = out[-1] if out else None
        if isinstance(last, dict) and last.get("role") == turn["role"]:
            content = last.get("content")
            blocks = (
                [{"type": "text", "text": content}]
                if isinstance(content, str)
                else list(content or ())
            )
            out[-1] = {**last, "content": [*blocks, *turn["content"]]}
        else:
            out.append(turn)
    return out


def _messages_choice(choice: ToolChoice, request: ChatRequest) -> Body:
    wire: Body = (
        {"type": "tool", "name": choice.name}
        if isinstance(choice, ForcedTool)
        else {"type": {"required": "any"}.get(choice, choice)}
    )
    if request.parallel_tool_calls is False:
        wire["disable_parallel_tool_use"] = True
    return wire


def _messages(request: ChatRequest, origin: Origin, model: ModelConfig, stream: bool) -> Body:
    body = dict(origin.body)
    body["model"] = model.upstream_model
    _tools(body, _messages_tool(_specs(request), model))
    if isinstance(request.response_format, JsonSchemaFormat):
        _messages_format(body, request.response_format)
    extra = _extra(request, origin)
    if extra:
        body["messages"] = _append_turns(body["messages"], encode_messages(extra))
        if request.tool_choice is not None and request.tools:
            body["tool_choice"] = _messages_choice(request.tool_choice, request)
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") != "disabled":
            body["thinking"] = {"type": "disabled"}
    _stream(body, stream, options=False)
    return body


_BUILDERS: Mapping[str, Callable[[ChatRequest, Origin, ModelConfig, bool], Body]] = {
    "chat": _chat,
    "responses": _responses,
    "messages": _messages,
}

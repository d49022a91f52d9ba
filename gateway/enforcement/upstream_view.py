"""What a request's upstream is sent, given its ``StrictPlan``: the ``strict`` flags and
schemas as the engine can take them (constrained) or plain tools the gateway enforces."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from typing import Any, TypeVar

from gateway.canonical import ChatRequest, JsonSchemaFormat, ResponseFormat, ToolSpec
from gateway.enforcement.check import StrictPlan
from gateway.settings import ModelConfig


def upstream_view(request: ChatRequest, model: ModelConfig, plan: StrictPlan) -> ChatRequest:
    """What the upstream sees. To a constrained engine the ``strict`` flags pass through,
    each strict schema as its provider copy from the plan (annotations the provider refuses
    dropped; a schema its strict mode refuses goes non-strict, or as its projection). A
    tool made strict by the projection is sent as the projection, ``strict`` only to a
    constrained engine. Otherwise the gateway enforces and the upstream gets plain tools."""
    if model.constrained:
        return _constrained_view(request, plan)
    strict_tools = any(map(_STRICT, request.tools))
    rf = request.response_format
    strict_rf = isinstance(rf, JsonSchemaFormat) and rf.strict
    if not strict_tools and not strict_rf and not plan.projected:
        return request
    if plan.projected:
        tools = tuple([_plain_tool(t, plan) for t in request.tools])
    else:  # ``_plain_tool`` without a projection: only the strict tools change
        tools = tuple([_unstrict(t) if t.strict else t for t in request.tools])
    if strict_rf:
        assert isinstance(rf, JsonSchemaFormat)
        rf = _replaced(rf, strict=False)
    return _with_tools(request, tools, rf)


def _with_tools(
    request: ChatRequest, tools: tuple[ToolSpec, ...], rf: ResponseFormat | None
) -> ChatRequest:
    """``request`` with ``tools`` and ``response_format`` replaced: every other field passed
    positionally, in declaration order, which costs a third of ``_replaced`` (the view of
    every request with a strict tool)."""
    r = request
    return ChatRequest(
        r.model,
        r.messages,
        tools,
        r.tool_choice,
        rf,
        r.max_tokens,
        r.temperature,
        r.top_p,
        r.stop,
        r.stream,
        r.parallel_tool_calls,
        r.user,
        r.metadata,
        r.n,
        r.strictify,
        r.on_invalid,
        r.origin,
        r.body_bytes,
    )


def _plain_tool(tool: ToolSpec, plan: StrictPlan) -> ToolSpec:
    projection = plan.projected.get(tool.name) if plan.projected else None
    if projection is not None:
        return _replaced(tool, parameters=projection.schema, strict=False)
    return _unstrict(tool) if tool.strict else tool


def _unstrict(tool: ToolSpec) -> ToolSpec:
    """``tool`` with ``strict`` off: ``_replaced(tool, strict=False)``, spelled out (every
    strict tool of a request to an engine the gateway enforces for)."""
    return ToolSpec(tool.name, tool.parameters, tool.description, False)


_STRICT = operator.attrgetter("strict")


def _constrained_view(request: ChatRequest, plan: StrictPlan) -> ChatRequest:
    copies = plan.upstream_tools
    rf = request.response_format
    output_changed = (
        isinstance(rf, JsonSchemaFormat)
        and rf.strict
        and plan.output is not None
        and plan.upstream_output is not rf.schema
    )
    if not copies and not output_changed and not plan.projected:
        return request  # the common case: every schema goes as the client sent it
    tools = tuple(_provider_tool(t, copies, plan) for t in request.tools)
    if output_changed:
        assert isinstance(rf, JsonSchemaFormat)
        copy = plan.upstream_output
        rf = _replaced(rf, strict=False) if copy is None else _replaced(rf, schema=copy)
    return _with_tools(request, tools, rf)


def _provider_tool(
    tool: ToolSpec, copies: Mapping[str, dict[str, Any] | None], plan: StrictPlan
) -> ToolSpec:
    if not tool.strict:
        projection = plan.projected.get(tool.name) if plan.projected else None
        if projection is None:
            return tool
        # The projection's vendor copy when it has one (a format the vendor lacks described).
        schema = copies.get(tool.name) or projection.schema
        return _replaced(tool, parameters=schema, strict=True)
    if tool.name not in copies:
        return tool
    copy = copies[tool.name]
    return _unstrict(tool) if copy is None else _replaced(tool, parameters=copy)


_T = TypeVar("_T")


def _replaced(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for the canonical slotted ``@record`` dataclasses, at a
    fraction of its cost (it runs per request): every field read in one C call
    (``operator.attrgetter``), the changed ones substituted, and the class's own
    constructor called positionally (cheap since ``@record`` is not ``frozen=True`` at run
    time). A class with a ``__post_init__`` or a field outside ``__init__`` (none of them
    has one) goes through ``dataclasses.replace``."""
    cls = type(obj)
    access = _ACCESS.get(cls)
    if access is None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        plain = not hasattr(cls, "__post_init__") and all(f.init for f in fields)
        names = tuple(f.name for f in fields)
        access = _ACCESS[cls] = (
            (operator.attrgetter(*names), {n: i for i, n in enumerate(names)}, len(names))
            if plain
            else None
        )
    if access is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    getter, index, count = access
    values = list(getter(obj)) if count > 1 else [getter(obj)]
    for name, value in changes.items():
        values[index[name]] = value
    return cls(*values)


# class -> (reader of all its fields, field name -> position, field count), or None when
# ``dataclasses.replace`` must be used
_ACCESS: dict[type, tuple[Any, dict[str, int], int] | None] = {}

"""The same-wire chat body patches only the tools changed since decoding: the bytes are
those of checking every tool (``Origin.tools`` empty), duplicates and corrections included."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from gateway.canonical import ChatRequest, Message, TextPart, ToolSpec
from gateway.dialects.openai.decode import decode_chat_request
from gateway.settings import ModelConfig
from gateway.upstream.same_wire import same_wire_body

MODEL = ModelConfig(name="m", provider="openai", upstream_model="up", base_url="http://x/v1")


def _tool(name: str, props: dict[str, Any], strict: bool | None = None) -> dict[str, Any]:
    fn: dict[str, Any] = {
        "name": name,
        "description": "d",
        "parameters": {"type": "object", "properties": props},
    }
    if strict is not None:
        fn["strict"] = strict
    return {"type": "function", "function": fn}


def _request(tools: list[dict[str, Any]]) -> ChatRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    return decode_chat_request(body)


def _unstrict(request: ChatRequest) -> ChatRequest:
    tools = tuple(
        ToolSpec(t.name, t.parameters, t.description, False) if t.strict else t
        for t in request.tools
    )
    return dataclasses.replace(request, tools=tools)


def _renamed(request: ChatRequest) -> ChatRequest:
    first, *rest = request.tools
    return dataclasses.replace(request, tools=(dataclasses.replace(first, name="b"), *rest))


def _correction(request: ChatRequest) -> ChatRequest:
    extra = Message(role="user", content=(TextPart("again"),))
    return dataclasses.replace(request, messages=(*request.messages, extra), tools=())


_X = {"x": {"type": "string"}}
_Y = {"y": {"type": "integer"}}
CASES = [
    ([_tool("a", _X), _tool("b", _Y)], lambda r: r),
    ([_tool("a", _X, True), _tool("b", _Y), _tool("c", _Y, False)], _unstrict),
    ([_tool("a", _X, True), _tool("b", _Y, True)], lambda r: r),
    ([_tool("a", _X), _tool("a", _Y)], lambda r: r),  # the first goes with the last's schema
    ([_tool("a", _X, True), _tool("a", _Y)], _unstrict),
    ([_tool("a", _X, True), _tool("c", _Y)], _renamed),
    ([_tool("a", _X), _tool("b", _Y)], _correction),
]


@pytest.mark.parametrize(("tools", "view"), CASES)
def test_same_bytes_as_checking_every_tool(tools: list[dict[str, Any]], view: Any) -> None:
    request = view(_request(tools))
    assert request.origin is not None and request.origin.tools
    unknown = dataclasses.replace(request.origin, tools=())
    everyone = dataclasses.replace(request, origin=unknown)
    for stream in (False, True):
        got = same_wire_body(request, MODEL, stream=stream)
        want = same_wire_body(everyone, MODEL, stream=stream)
        assert orjson.dumps(got) == orjson.dumps(want)


def test_duplicate_names_patch_as_before() -> None:
    body = same_wire_body(_request([_tool("a", _X), _tool("a", _Y)]), MODEL, stream=False)
    assert [t["function"]["parameters"]["properties"] for t in body["tools"]] == [_Y, _Y]

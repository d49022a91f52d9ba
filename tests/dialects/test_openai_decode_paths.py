"""The chat decoder takes the common tool at once and any other through its checks one by
one: both ways give the same tool, the same notes and the same error. A tool given as a
read-only mapping (not a ``dict``) always goes the checked way, so each case is decoded
both ways and compared. Likewise a body without settings (``n``, ``stream``...) decodes as
one that names each of them ``null``."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest

from gateway.dialects.openai.decode import _SETTINGS, decode_chat_request
from gateway.errors import InvalidRequest

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA}},
    {"function": {"name": "f-_9", "parameters": SCHEMA, "description": "d", "strict": True}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "strict": False}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "strict": None}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "description": None}},
    {"type": "function", "function": {"name": "f"}},  # no parameters: an empty object
    {"type": "function", "function": {"name": "f", "parameters": None}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "x_extra": 1}},
    {"function": {"name": "f", "parameters": SCHEMA, "description": "d", "x_extra": None}},
    {"function": {"name": "f", "parameters": SCHEMA, "strict": None, "x_extra": True}},
    {"function": {"name": "f", "parameters": SCHEMA, "description": "d", "strict": True, "x": 1}},
    {"type": "function", "function": {"name": "f", "parameters": [1]}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "strict": "yes"}},
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA, "description": 3}},
    {"type": "function", "function": {"name": "", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "a b", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "x" * 65, "parameters": SCHEMA}},
    {"type": "function", "function": {"name": 7, "parameters": SCHEMA}},
    {"type": "function", "function": "f"},
    {"type": "function"},
    {"type": "custom", "custom": {"name": "g"}},
    {"type": 5, "function": {"name": "f", "parameters": SCHEMA}},
    "f",
]


def outcome(tools: list[Any]) -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    try:
        chat = decode_chat_request(body)
    except InvalidRequest as exc:
        return ("error", exc.message, exc.param, exc.code)
    assert chat.origin is not None
    return (chat.tools, chat.origin.tool_paths, chat.origin.screens)


def checked(tool: Any) -> Any:
    return MappingProxyType(tool) if isinstance(tool, dict) else tool


@pytest.mark.parametrize("tool", TOOLS, ids=range(len(TOOLS)))
def test_a_tool_decodes_alike_either_way(tool: Any) -> None:
    first = {"type": "function", "function": {"name": "a", "parameters": SCHEMA}}
    assert outcome([first, tool]) == outcome([first, checked(tool)])
    assert outcome([tool, first]) == outcome([checked(tool), first])


@pytest.mark.parametrize("tools", [[], [{"type": "function", "function": {"name": "f"}}]])
def test_a_body_without_settings_decodes_as_one_with_each_null(tools: list[Any]) -> None:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if tools:
        body["tools"] = tools
    bare = decode_chat_request(body)
    nulls = decode_chat_request({**body, **dict.fromkeys(_SETTINGS)})
    assert bare.origin is not None and nulls.origin is not None
    assert bare == (dataclasses.replace(nulls, origin=dataclasses.replace(nulls.origin, body=body)))

"""``upstream_view`` to an engine the gateway enforces for: each strict tool goes with
``strict`` off and nothing else changed, every other tool as it is."""

from __future__ import annotations

import dataclasses

from gateway.canonical import ChatRequest, Message, TextPart, ToolSpec
from gateway.enforcement import EMPTY_PLAN, upstream_view
from gateway.settings import ModelConfig
from tests.support.openai_helpers import REFUND_SCHEMA

MODEL = ModelConfig(name="m", provider="openai", upstream_model="u", constrained=False)


def test_strict_tools_go_plain_with_every_other_field_kept() -> None:
    strict = ToolSpec("refund", REFUND_SCHEMA, "Refund an order.", strict=True)
    plain = ToolSpec("lookup", {"type": "object", "properties": {}})
    request = ChatRequest("m", (Message("user", (TextPart("hi"),)),), tools=(strict, plain))
    view = upstream_view(request, MODEL, EMPTY_PLAN)
    assert view.tools == (dataclasses.replace(strict, strict=False), plain)
    assert view.tools[0].parameters is strict.parameters
    assert view.tools[1] is plain
    assert view == dataclasses.replace(request, tools=view.tools)


def test_the_view_carries_every_field_it_does_not_change() -> None:
    # A distinct object per field: a field the view drops or passes in another's place shows.
    values: dict[str, object] = {f.name: object() for f in dataclasses.fields(ChatRequest)}
    values["tools"] = (ToolSpec("refund", REFUND_SCHEMA, strict=True),)
    values["response_format"] = None
    request = ChatRequest(**values)  # type: ignore[arg-type]
    view = upstream_view(request, MODEL, EMPTY_PLAN)
    assert view.tools == (ToolSpec("refund", REFUND_SCHEMA, strict=False),)
    for f in dataclasses.fields(ChatRequest):
        if f.name != "tools":
            assert getattr(view, f.name) is getattr(request, f.name), f.name

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

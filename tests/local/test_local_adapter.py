"""The local upstream adapter on the real model: template, generation, streaming, usage,
grammar mode, cancellation and per-model serialization."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from gateway.canonical import (
    ChatRequest,
    Finish,
    ForcedTool,
    JsonSchemaFormat,
    Message,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolSpec,
    UsageReport,
)
from gateway.errors import InvalidRequest, UpstreamError
from gateway.settings import DEFAULT_MODELS, ModelConfig
from gateway.upstream.local import LocalUpstream
from gateway.upstream.local.engine import Generation, LocalEngine

CONSTRAINED, FREE = DEFAULT_MODELS[:2]
REFUND = ToolSpec(
    name="create_refund",
    description="Refund part or all of an order.",
    strict=True,
    parameters={
        "type": "object",
        "properties": {
            "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
            "reason": {"type": "string", "enum": ["damaged", "late", "other"]},
        },
        "required": ["order_number", "reason"],
        "additionalProperties": False,
    },
)


def _ask(text: str, **fields: Any) -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=(Message(role="user", content=(TextPart(text),)),),
        temperature=0.0,
        **fields,
    )


@pytest.fixture(scope="module")
def upstream(local_runtime: None) -> Iterator[LocalUpstream]:
    yield LocalUpstream(env=os.environ)


def test_missing_weights_is_an_upstream_error(tmp_path: Path) -> None:
    up = LocalUpstream(env={"SYNTIC_MODELS_DIR": str(tmp_path)})
    with pytest.raises(UpstreamError, match="syntic models install") as info:
        asyncio.run(up.complete(_ask("hi"), FREE))
    assert info.value.code == "local_model_unavailable"


@pytest.mark.slow
def test_real_template_renders_tools_and_prefill(upstream: LocalUpstream) -> None:
    engine = upstream.engine(FREE)
    request = _ask("Refund 123456", tools=(REFUND,), tool_choice=ForcedTool("create_refund"))
    with engine.lock:
        free = engine.prompt_for(request)
        constrained = engine.prompt_for(request, constrained=True)
    assert "<tools>" in free.text and '"name": "create_refund"' in free.text
    head = '<|im_start|>assistant\n<tool_call>\n{"name": "create_refund", "arguments": '
    assert free.text.endswith(head + "{")  # free: the arguments object is opened for it
    assert constrained.text.endswith(head)  # constrained: the grammar starts at the value


@pytest.mark.slow
async def test_forced_call_free_mode(upstream: LocalUpstream) -> None:
    request = _ask(
        "Order 582131 arrived crushed.",
        tools=(REFUND,),
        tool_choice=ForcedTool("create_refund"),
        max_tokens=60,
    )
    response = await upstream.complete(request, FREE)
    assert [c.name for c in response.tool_calls] == ["create_refund"]
    assert response.tool_calls[0].id.startswith("call_")
    assert response.finish_reason in ("tool_calls", "length")
    assert response.usage.prompt_tokens > 100  # the tools are in the prompt
    assert 0 < response.usage.completion_tokens <= 60


@pytest.mark.slow
async def test_grammar_mode_json_output(upstream: LocalUpstream) -> None:
    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer"},
        },
        "required": ["colour", "count"],
        "additionalProperties": False,
    }
    request = _ask(
        "Describe the sky in one word, and how many suns there are.",
        response_format=JsonSchemaFormat(schema=schema, strict=True),
        max_tokens=40,
    )
    response = await upstream.complete(request, CONSTRAINED)
    assert response.tool_calls == ()
    jsonschema.validate(json.loads(response.content or ""), schema)


@pytest.mark.slow
async def test_stream_events_and_usage(upstream: LocalUpstream) -> None:
    request = _ask("Count from one to fifty in words, comma separated.", max_tokens=8)
    events: list[StreamEvent] = [e async for e in upstream.stream(request, FREE)]
    assert isinstance(events[0], TextDelta)
    assert events[-2:] == [Finish("length"), events[-1]]
    usage = events[-1]
    assert isinstance(usage, UsageReport)
    assert usage.usage.completion_tokens == 8
    assert usage.usage.prompt_tokens > 0
    assert all(isinstance(e, TextDelta) for e in events[:-2])


@pytest.mark.slow
async def test_closing_the_stream_stops_generation(upstream: LocalUpstream) -> None:
    engine = upstream.engine(FREE)
    finished: list[Generation] = []
    original = engine._generate_locked

    def spy(*args: Any, **kwargs: Any) -> Generation:
        result = original(*args, **kwargs)
        finished.append(result)
        return result

    request = _ask("Write a long story about a lighthouse.", max_tokens=400)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "_generate_locked", spy)
        stream = upstream.stream(request, FREE)
        first = await anext(stream)
        assert isinstance(first, TextDelta)
        await stream.aclose()  # type: ignore[attr-defined]
        acquired = await asyncio.to_thread(engine.lock.acquire, True, 30)
    assert acquired, "the model lock was not released after the client went away"
    engine.lock.release()
    assert finished == []  # cancelled: no completed generation was produced


@pytest.mark.slow
async def test_requests_to_one_model_are_serialized(upstream: LocalUpstream) -> None:
    engine = upstream.engine(FREE)
    active = 0
    overlap = 0
    guard = threading.Lock()
    original = engine._generate_locked

    def spy(*args: Any, **kwargs: Any) -> Generation:
        nonlocal active, overlap
        with guard:
            active += 1
            overlap = max(overlap, active)
        try:
            return original(*args, **kwargs)
        finally:
            with guard:
                active -= 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "_generate_locked", spy)
        requests = [_ask(f"Say the number {i}.", max_tokens=4) for i in range(3)]
        responses = await asyncio.gather(*(upstream.complete(r, FREE) for r in requests))
    assert len(responses) == 3 and all(r.usage.completion_tokens > 0 for r in responses)
    assert overlap == 1


@pytest.mark.slow
async def test_context_overflow_is_a_400(local_runtime: None) -> None:
    small = LocalUpstream(env=os.environ, n_ctx=128)
    request = _ask("word " * 400)
    with pytest.raises(InvalidRequest) as info:
        await small.complete(request, FREE)
    assert info.value.code == "context_length_exceeded"


def test_engines_are_shared_per_file(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    up = LocalUpstream(env={})
    a = dataclasses.replace(FREE, local_model=str(gguf))
    b = dataclasses.replace(CONSTRAINED, name="other", local_model=str(gguf))
    other: ModelConfig = dataclasses.replace(FREE, local_model=str(tmp_path / "none.gguf"))
    assert up.engine(a) is up.engine(b)
    assert isinstance(up.engine(a), LocalEngine) and not up.engine(a).loaded
    with pytest.raises(Exception, match="no such file"):
        up.engine(other)

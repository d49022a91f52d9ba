"""Streaming end to end: openai SDK (sync and async) and raw HTTP -> gateway subprocess ->
scripted upstream. Ledger rows are read back from the gateway's SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageFunctionToolCall,
)

from tests.support.fixtures import STREAM_KEEPALIVE_S as KEEPALIVE_S
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, MESSAGES, lookup_tool, refund_tool
from tests.support.scripted_upstream import Call, HttpError, Reply, ScriptedUpstream


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # shared: tests/support/fixtures.py


@dataclass
class Streamed:
    chunks: list[ChatCompletionChunk]
    headers: Mapping[str, str]
    error: openai.APIError | None = None
    completion: ChatCompletion | None = None
    text_order: list[str] = field(default_factory=list)  # "text"/"tool" per chunk


def _summarise(out: Streamed) -> Streamed:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in out.chunks:
        state.handle_chunk(c)
        if c.choices and c.choices[0].delta.content:
            out.text_order.append("text")
        if c.choices and c.choices[0].delta.tool_calls:
            out.text_order.append("tool")
    if out.error is None and out.chunks:
        out.completion = state.get_final_completion()
    return out


def sdk_stream(kind: str, gw: GatewayProcess, **kw: Any) -> Streamed:
    """``chat.completions.create(stream=True)`` through the sync or async SDK."""
    kw.setdefault("model", "strict-model")
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("tools", [refund_tool()])
    kw.setdefault("stream_options", {"include_usage": True})
    base = gw.base_url + "/v1"
    if kind == "sync":
        with openai.OpenAI(base_url=base, api_key=gw.api_key, max_retries=0, timeout=20) as c:
            raw = c.chat.completions.with_raw_response.create(stream=True, **kw)
            out = Streamed([], raw.headers)
            try:
                for chunk in raw.parse():
                    out.chunks.append(chunk)
            except openai.APIError as exc:
                out.error = exc
            return _summarise(out)

    async def run() -> Streamed:
        async with openai.AsyncOpenAI(
            base_url=base, api_key=gw.api_key, max_retries=0, timeout=20
        ) as c:
            raw = await c.chat.completions.with_raw_response.create(stream=True, **kw)
            out = Streamed([], raw.headers)
            try:
                async for chunk in raw.parse():
                    out.chunks.append(chunk)
            except openai.APIError as exc:
                out.error = exc
            return _summarise(out)

    return asyncio.run(run())


def raw_stream(gw: GatewayProcess, **kw: Any) -> httpx.Response:
    body = {
        "model": "strict-model",
        "messages": MESSAGES,
        "tools": [refund_tool()],
        "stream": True,
        "stream_options": {"include_usage": True},
        **kw,
    }
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {gw.api_key}"},
    )


def payloads(raw: bytes) -> list[str]:
    return [b[len("data: ") :] for b in raw.decode().split("\n\n") if b.startswith("data: ")]


def ledger_row(gw: GatewayProcess, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute(
                "SELECT * FROM usage_records WHERE request_id = ?", (request_id,)
            ).fetchone()
        if row is not None:
            return dict(row)
        time.sleep(0.05)
    raise AssertionError(f"no ledger row for {request_id}")


KINDS = ["sync", "async"]


def calls_of(done: ChatCompletion | None) -> list[tuple[str, str, str]]:
    assert done is not None
    out = []
    for c in done.choices[0].message.tool_calls or []:
        assert isinstance(c, ChatCompletionMessageFunctionToolCall)
        out.append((c.id, c.function.name, c.function.arguments))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_valid_strict_call(kind: str, gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="call_a")]))
    out = sdk_stream(kind, gw)
    assert out.error is None and out.completion is not None
    assert calls_of(out.completion) == [("call_a", "create_refund", GOOD_ARGS)]
    assert out.completion.choices[0].finish_reason == "tool_calls"
    assert out.chunks[0].choices[0].delta.role == "assistant"
    assert out.chunks[-1].choices == []
    usage = out.chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (10, 5)
    assert (usage.model_extra or {})["schema_retries"] == 0
    h = out.headers
    assert h["content-type"].startswith("text/event-stream")
    assert (h["cache-control"], h["x-accel-buffering"]) == ("no-cache", "no")
    assert h["x-request-id"].startswith("req_")
    assert "x-syntic-schema-retries" not in h  # unknown when headers go out; see usage chunk
    sent = upstream.requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    row = ledger_row(gw, h["x-request-id"])
    assert (row["status"], row["streamed"], row["schema_retries"], row["estimated"]) == (
        200,
        1,
        0,
        0,
    )
    assert (row["prompt_tokens"], row["completion_tokens"]) == (10, 5)


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_then_corrected(kind: str, gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")], usage=(100, 20)),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="call_new")], usage=(140, 18)),
    )
    out = sdk_stream(kind, gw)
    assert out.error is None and out.completion is not None
    assert calls_of(out.completion) == [("call_orig", "create_refund", GOOD_ARGS)]
    usage = out.chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (240, 38)
    assert (usage.model_extra or {})["schema_retries"] == 1
    fix = upstream.requests[1].body
    assert fix["tool_choice"] == {"type": "function", "function": {"name": "create_refund"}}
    assert not fix.get("stream")
    assert "/amount_pence must be integer" in str(fix["messages"][-1]["content"])
    row = ledger_row(gw, out.headers["x-request-id"])
    assert (row["status"], row["streamed"], row["schema_retries"], row["upstream_calls"]) == (
        200,
        1,
        1,
        2,
    )
    assert (row["correction_prompt_tokens"], row["correction_completion_tokens"]) == (140, 18)


def test_raw_sse_never_carries_invalid_arguments(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(
            content="Refunding.", tool_calls=[Call("create_refund", BAD_ARGS, id="c1")], fragment=4
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    r = raw_stream(gw)
    assert r.status_code == 200
    raw = r.content
    assert b"12.50" not in raw and BAD_ARGS.encode() not in raw
    # every argument byte that went out belongs to the corrected call
    chunks = [orjson.loads(p) for p in payloads(raw) if p != "[DONE]"]
    args = "".join(
        tc["function"].get("arguments", "")
        for c in chunks
        if c["choices"]
        for tc in c["choices"][0]["delta"].get("tool_calls") or []
    )
    assert args == GOOD_ARGS
    assert payloads(raw)[-1] == "[DONE]"
    assert raw.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_twice_is_an_in_band_error(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    out = sdk_stream(kind, gw)
    assert out.error is not None
    assert (out.error.code, out.error.param, out.error.type) == (
        "tool_arguments_invalid",
        "/amount_pence",
        "invalid_request_error",
    )
    assert "create_refund did not match the schema" in out.error.message
    assert "".join(c.choices[0].delta.content or "" for c in out.chunks if c.choices) == (
        "One moment."
    )
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in out.chunks)
    row = ledger_row(gw, out.headers["x-request-id"])
    assert (row["status"], row["error_code"], row["schema_retries"], row["streamed"]) == (
        422,
        "tool_arguments_invalid",
        1,
        1,
    )


def metric(gw: GatewayProcess, name: str, **labels: str) -> float:
    text = httpx.get(gw.base_url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_invalid_twice_before_any_output_is_a_plain_422(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
    )
    labels = {"route": "/v1/chat/completions", "status": "422", "code": "tool_arguments_invalid"}
    before = metric(gw, "syntic_requests_total", **labels)
    r = raw_stream(gw)
    deadline = time.monotonic() + 5  # recorded when the response has finished server-side
    while metric(gw, "syntic_requests_total", **labels) != before + 1:
        assert time.monotonic() < deadline, "422 stream not counted in syntic_requests_total"
        time.sleep(0.02)
    # nothing had been shown: the preamble was held, so the answer is an HTTP error
    assert (r.status_code, r.headers["content-type"]) == (422, "application/json")
    assert r.headers["x-should-retry"] == "false"
    env = r.json()
    assert env["request_id"] == r.headers["x-request-id"]
    assert env["error"]["code"] == "tool_arguments_invalid"
    assert b"12.50" not in r.content


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_calls_only_one_corrected(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    other = GOOD_ARGS.replace("582131", "123456")
    upstream.queue(
        Reply(
            tool_calls=[
                Call("create_refund", BAD_ARGS, id="c0"),
                Call("create_refund", other, id="c1"),
                Call("lookup_order", '{"order_number": "1"}', id="c2"),
            ]
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    out = sdk_stream(kind, gw, tools=[refund_tool(), lookup_tool()])
    assert out.error is None and out.completion is not None
    assert calls_of(out.completion) == [
        ("c0", "create_refund", GOOD_ARGS),
        ("c1", "create_refund", other),
        ("c2", "lookup_order", '{"order_number": "1"}'),
    ]
    assert len(upstream.requests) == 2
    assert (out.chunks[-1].usage.model_extra or {})["schema_retries"] == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", KINDS)
def test_text_before_and_after_keeps_order(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(
            content="Let me refund that. ",
            content_after="Done.",
            tool_calls=[Call("create_refund", BAD_ARGS, id="c0")],
        ),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    out = sdk_stream(kind, gw)
    assert out.error is None and out.completion is not None
    msg = out.completion.choices[0].message
    assert msg.content == "Let me refund that. Done."
    order = out.text_order  # e.g. text, text, text, tool, text
    first_tool = order.index("tool")
    assert first_tool > 0 and order.count("tool") == 1  # the held call went out whole
    assert set(order[first_tool + 1 :]) == {"text"}


@pytest.mark.parametrize("kind", KINDS)
def test_upstream_drop_mid_stream(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="Hello there, this is a long answer.", fragment=5, drop_after=4))
    out = sdk_stream(kind, gw, tools=None)
    assert out.error is not None and out.error.code == "upstream_error"
    text = "".join(c.choices[0].delta.content or "" for c in out.chunks if c.choices)
    assert text == "Hello there, this"[: len(text)] and text
    row = ledger_row(gw, out.headers["x-request-id"])
    assert (row["status"], row["error_code"], row["estimated"]) == (502, "upstream_error", 1)
    assert row["completion_tokens"] > 0


def test_upstream_error_before_first_byte_is_http_error(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(HttpError(500))
    r = raw_stream(gw)
    assert r.status_code == 502
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == "upstream_error"
    assert r.json()["request_id"] == r.headers["x-request-id"]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_schema_is_a_400_before_streaming(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    with pytest.raises(openai.BadRequestError) as info:
        sdk_stream(kind, gw, tools=[refund_tool(schema=schema)])
    assert info.value.code == "schema_not_strict"
    assert info.value.param == "tools[0].function.parameters"
    assert upstream.requests == []


def test_length_cut_off_inside_held_call(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS[:30])], finish_reason="length")
    )
    r = raw_stream(gw)
    assert r.status_code == 422  # before any output: a plain HTTP error
    env = r.json()
    assert env["error"]["code"] == "tool_arguments_invalid"
    assert 'finish_reason "length"' in env["error"]["message"]
    assert b"tool_calls" not in r.content and b"582131" not in r.content
    assert len(upstream.requests) == 1  # no correction for a truncation


def test_keepalive_during_a_slow_correction(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    # text first commits the stream; the correction after it is filled with keep-alives
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], delay=KEEPALIVE_S * 3),
    )
    r = raw_stream(gw)
    assert r.content.count(b": keep-alive\n\n") >= 2
    assert r.content.endswith(b"data: [DONE]\n\n")


def _disconnect_after_first_chunk(
    gw: GatewayProcess, before_leaving: Callable[[], object] = lambda: None
) -> str:
    body = {"model": "strict-model", "messages": MESSAGES, "tools": [refund_tool()], "stream": True}
    with (
        httpx.Client(timeout=20) as client,
        client.stream(
            "POST",
            gw.base_url + "/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {gw.api_key}"},
        ) as r,
    ):
        assert r.status_code == 200
        chunks = r.iter_bytes()  # kept referenced: dropping it would close the response
        assert next(chunks)
        before_leaving()
        return r.headers["x-request-id"]


def test_client_disconnect_cancels_upstream(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Thinking about your refund...", fragment=4, stall_after=3))
    rid = _disconnect_after_first_chunk(gw)
    assert upstream.wait_for_disconnect(0, timeout=5)
    row = ledger_row(gw, rid)
    assert (row["status"], row["error_code"], row["streamed"], row["estimated"]) == (
        499,
        "client_disconnected",
        1,
        1,
    )
    assert row["completion_tokens"] > 0


def test_client_disconnect_cancels_correction_in_flight(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content="Hi.", tool_calls=[Call("create_refund", BAD_ARGS)]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], delay=10),
    )
    rid = _disconnect_after_first_chunk(gw, lambda: upstream.wait_for_requests(2, timeout=5))
    # abandoned: within 5 s, long before its 10 s delay would have ended it
    assert upstream.wait_for_disconnect(1, timeout=5)
    row = ledger_row(gw, rid)
    # a correction cancelled before it answered is not counted (no usage came back)
    assert (row["status"], row["error_code"], row["streamed"]) == (499, "client_disconnected", 1)


NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
NOTE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "note", "strict": True, "schema": NOTE_SCHEMA},
}


@pytest.mark.parametrize("kind", KINDS)
def test_strict_json_output_is_held_and_corrected(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content='{"text": 5}', fragment=3), Reply(content='{"text": "five"}', usage=(30, 4))
    )
    out = sdk_stream(kind, gw, tools=None, response_format=NOTE_FORMAT)
    assert out.error is None and out.completion is not None
    assert out.completion.choices[0].message.content == '{"text": "five"}'
    assert out.text_order == ["text"]  # released whole, once validated
    usage = out.chunks[-1].usage
    assert usage is not None and (usage.model_extra or {})["schema_retries"] == 1


def test_strict_json_output_invalid_twice(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content='{"text": 5}'), Reply(content='{"text": 6}'))
    r = raw_stream(gw, tools=None, response_format=NOTE_FORMAT)
    assert r.status_code == 422  # the output was held whole: nothing had been shown
    env = r.json()
    assert (env["error"]["code"], env["error"]["param"]) == ("json_output_invalid", "/text")
    assert b"data:" not in r.content


@pytest.mark.parametrize("kind", KINDS)
def test_without_include_usage_no_usage_chunk(
    kind: str, gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="Hi there."))
    out = sdk_stream(kind, gw, tools=None, stream_options=None)
    assert out.error is None and out.completion is not None
    assert out.completion.choices[0].message.content == "Hi there."
    assert all(c.usage is None and c.choices for c in out.chunks)
    # the gateway still asks the upstream for usage, for the ledger
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}
    row = ledger_row(gw, out.headers["x-request-id"])
    assert (row["prompt_tokens"], row["completion_tokens"], row["estimated"]) == (10, 5, 0)

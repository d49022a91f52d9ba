"""The preamble hold, through the official SDKs on every streaming endpoint and every upstream
wire: a strict call (or strict output) still invalid before any output is a plain HTTP 422
with ``x-should-retry: false``; after text went out it is the dialect's in-band error; text
is never held behind the preamble; a streamed strict output with no text is corrected and
refused like a non-streamed one."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agents
import anthropic
import httpx
import openai
import pydantic
import pytest

from tests.dialects.test_openai_stream_e2e import ledger_row
from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.fixtures import STREAM_KEEPALIVE_S
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
    },
    "required": ["order_number", "amount_pence"],
    "additionalProperties": False,
}
GOOD = '{"order_number": "582131", "amount_pence": 1250}'
BAD = '{"order_number": "582131", "amount_pence": "12.50"}'
NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
WIRES = ["ch", "an", "rs"]  # the upstream speaks chat completions, Messages, Responses
WAYS = [
    "chat.stream",
    "chat.create",
    "responses.stream",
    "responses.create",
    "messages.stream",
    "messages.create",
]
DIALECT_WAYS = ["chat.stream", "responses.stream", "messages.stream"]
PROMPT = "Refund order 582131."


class Note(pydantic.BaseModel):
    text: str


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    scripted_upstream_server.renderers["/responses"] = ResponsesRenderer()
    base = scripted_upstream_server.base_url
    gateway = start_gateway(
        tmp_path_factory.mktemp("preamble-gw"),
        [
            model_table("ch-strict", base),
            model_table("an-strict", base, provider="anthropic"),
            model_table("rs-strict", base, api="responses"),
        ],
        server={"stream_keepalive_s": STREAM_KEEPALIVE_S},
    )
    yield gateway
    gateway.stop()


def family(way: str) -> str:
    return "anthropic" if way.startswith("messages") else "openai"


def tools(way: str) -> list[Any]:
    if way.startswith("chat"):
        return [
            {
                "type": "function",
                "function": {"name": "create_refund", "strict": True, "parameters": SCHEMA},
            }
        ]
    if way.startswith("responses"):
        return [{"type": "function", "name": "create_refund", "strict": True, "parameters": SCHEMA}]
    return [{"name": "create_refund", "strict": True, "input_schema": SCHEMA}]


def strict_output(way: str) -> dict[str, Any]:
    """The request fields asking for a strict JSON ``Note``, as each SDK spells them."""
    if way == "chat.stream":
        return {"response_format": Note}
    if way == "chat.create":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "note", "strict": True, "schema": NOTE_SCHEMA},
            }
        }
    if way == "responses.stream":
        return {"text_format": Note}
    if way == "responses.create":
        return {
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "note",
                    "strict": True,
                    "schema": NOTE_SCHEMA,
                }
            }
        }
    return {"output_config": {"format": {"type": "json_schema", "schema": NOTE_SCHEMA}}}


@dataclass
class Streamed:
    """What a client saw: the text deltas and the calls of the final answer."""

    text: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments JSON)
    final_text: str = ""


def consume(
    way: str,
    gw: GatewayProcess,
    model: str,
    on_text: Callable[[str], None] = lambda t: None,
    **kw: Any,
) -> Streamed:
    """Stream one request the way ``way`` names, with the SDK's default retries."""
    out = Streamed()

    def text(delta: str) -> None:
        out.text.append(delta)
        on_text(delta)

    if family(way) == "anthropic":
        with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, timeout=20) as ac:
            _anthropic(ac, way, model, text, out, kw)
    else:
        with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, timeout=20) as oc:
            if way.startswith("chat"):
                _chat(oc, way, model, text, out, kw)
            else:
                _responses(oc, way, model, text, out, kw)
    return out


def _chat(
    c: openai.OpenAI,
    way: str,
    model: str,
    text: Callable[[str], None],
    out: Streamed,
    kw: dict[str, Any],
) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    if way == "chat.stream":
        with c.chat.completions.stream(model=model, messages=messages, **kw) as s:
            for event in s:
                if event.type == "content.delta" and event.delta:  # not the role chunk's ""
                    text(event.delta)
            message = s.get_final_completion().choices[0].message
        out.final_text = message.content or ""
        out.calls = [
            (t.function.name, t.function.arguments)
            for t in message.tool_calls or []
            if t.type == "function"
        ]
        return
    arguments: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for chunk in c.chat.completions.create(model=model, messages=messages, stream=True, **kw):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text(delta.content)
        for tc in delta.tool_calls or []:
            if tc.function is not None and tc.function.name:
                names[tc.index] = tc.function.name
            if tc.function is not None and tc.function.arguments:
                arguments.setdefault(tc.index, []).append(tc.function.arguments)
    out.final_text = "".join(out.text)
    out.calls = [(names[i], "".join(arguments.get(i, []))) for i in sorted(names)]


def _responses(
    c: openai.OpenAI,
    way: str,
    model: str,
    text: Callable[[str], None],
    out: Streamed,
    kw: dict[str, Any],
) -> None:
    if way == "responses.stream":
        with c.responses.stream(model=model, input=PROMPT, **kw) as s:
            for event in s:
                if event.type == "response.output_text.delta":
                    text(event.delta)
            final = s.get_final_response()
        out.final_text = final.output_text
        out.calls = [(i.name, i.arguments) for i in final.output if i.type == "function_call"]
        return
    for event in c.responses.create(model=model, input=PROMPT, stream=True, **kw):
        if event.type == "response.output_text.delta":
            text(event.delta)
        elif event.type == "response.completed":
            out.final_text = event.response.output_text
            out.calls = [
                (i.name, i.arguments) for i in event.response.output if i.type == "function_call"
            ]


def _anthropic(
    c: anthropic.Anthropic,
    way: str,
    model: str,
    text: Callable[[str], None],
    out: Streamed,
    kw: dict[str, Any],
) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    if way == "messages.stream":
        with c.messages.stream(model=model, max_tokens=256, messages=messages, **kw) as s:
            for event in s:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    text(event.delta.text)
            final = s.get_final_message()
        out.final_text = "".join(b.text for b in final.content if b.type == "text")
        out.calls = [(b.name, json.dumps(b.input)) for b in final.content if b.type == "tool_use"]
        return
    inputs: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for event in c.messages.create(
        model=model, max_tokens=256, messages=messages, stream=True, **kw
    ):
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            names[event.index] = event.content_block.name
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                text(event.delta.text)
            elif event.delta.type == "input_json_delta":
                inputs.setdefault(event.index, []).append(event.delta.partial_json)
    out.final_text = "".join(out.text)
    out.calls = [(names[i], "".join(inputs.get(i, []))) for i in sorted(names)]


def unprocessable(
    way: str,
) -> type[openai.UnprocessableEntityError | anthropic.UnprocessableEntityError]:
    if family(way) == "anthropic":
        return anthropic.UnprocessableEntityError
    return openai.UnprocessableEntityError


def assert_plain_422(exc: Exception, way: str, code: str, param: str) -> dict[str, Any]:
    """An HTTP 422 (not a stream) with the envelope in the endpoint's vocabulary."""
    assert isinstance(exc, openai.APIStatusError | anthropic.APIStatusError)
    response = exc.response
    assert response.status_code == 422
    assert response.headers["x-should-retry"] == "false"
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-syntic-schema-retries"] == "1"
    body = response.json()
    assert (body["error"]["code"], body["error"]["param"]) == (code, param)
    assert body["error"]["type"] == "invalid_request_error"
    assert body["request_id"] == response.headers["x-request-id"]
    if family(way) == "anthropic":
        assert body["type"] == "error"
    else:
        assert "type" not in body
    return dict(body)


# -- a strict call still invalid before any output -----------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("way", WAYS)
def test_a_call_still_invalid_before_any_output_is_a_plain_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str, wire: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with pytest.raises(unprocessable(way)) as info:
        consume(way, gw, f"{wire}-strict", tools=tools(way))
    assert_plain_422(info.value, way, "tool_arguments_invalid", "/amount_pence")
    assert len(upstream.requests) == 2  # the call and its one correction; no SDK retry
    assert not upstream.requests[1].body.get("stream")


def test_the_refused_stream_is_in_the_ledger_as_a_streamed_422(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        consume("chat.create", gw, "ch-strict", tools=tools("chat.create"))
    row = ledger_row(gw, info.value.response.headers["x-request-id"])
    assert (row["status"], row["error_code"], row["schema_retries"], row["streamed"]) == (
        422,
        "tool_arguments_invalid",
        1,
        1,
    )
    assert row["upstream_calls"] == 2


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_no_keep_alive_commits_a_200_while_the_preamble_is_held(
    gw: GatewayProcess, upstream: ScriptedUpstream, path: str
) -> None:
    # The correction takes several keep-alive intervals: still one plain 422, no bytes first.
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)], delay=STREAM_KEEPALIVE_S * 4),
    )
    way = {
        "/v1/chat/completions": "chat.create",
        "/v1/responses": "responses.create",
        "/v1/messages": "messages.create",
    }[path]
    body: dict[str, Any] = {
        "model": "ch-strict",
        "stream": True,
        "tools": tools(way),
        "max_tokens": 256,
    }
    if path == "/v1/responses":
        body["input"] = PROMPT
        del body["max_tokens"]
    else:
        body["messages"] = [{"role": "user", "content": PROMPT}]
    r = httpx.post(
        gw.base_url + path, json=body, timeout=20, headers={"authorization": f"Bearer {gw.api_key}"}
    )
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == "tool_arguments_invalid"
    assert b"keep-alive" not in r.content and b"ping" not in r.content


def test_a_corrected_call_before_any_output_streams_after_the_hold(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", GOOD)], delay=STREAM_KEEPALIVE_S * 4),
    )
    r = httpx.post(
        gw.base_url + "/v1/chat/completions",
        timeout=20,
        headers={"authorization": f"Bearer {gw.api_key}"},
        json={
            "model": "ch-strict",
            "stream": True,
            "tools": tools("chat.create"),
            "messages": [{"role": "user", "content": PROMPT}],
        },
    )
    assert r.status_code == 200
    # held through the correction: the preamble and the call come together, no keep-alive
    assert r.content.startswith(b"data: ") and b"keep-alive" not in r.content
    assert b"12.50" not in r.content and r.content.endswith(b"data: [DONE]\n\n")


# -- after text went out -----------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("way", WAYS)
def test_a_failure_after_text_is_the_in_band_error(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str, wire: str
) -> None:
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    seen: list[str] = []
    with pytest.raises((openai.APIError, anthropic.APIError)) as info:
        consume(way, gw, f"{wire}-strict", on_text=seen.append, tools=tools(way))
    assert "".join(seen) == "One moment."
    exc = info.value
    if family(way) == "anthropic":
        # the SDK makes a status error of the ``error`` event, with the stream's 200
        assert type(exc) is anthropic.APIStatusError
        assert exc.status_code == 200
        body: Any = exc.body
        assert (body["error"]["code"], body["error"]["param"]) == (
            "tool_arguments_invalid",
            "/amount_pence",
        )
    else:
        assert type(exc) is openai.APIError  # in band: no status to classify
        assert (exc.code, exc.param) == ("tool_arguments_invalid", "/amount_pence")
    assert len(upstream.requests) == 2


def test_response_failed_carries_the_error_code(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    failed: list[Any] = []
    with (
        openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, timeout=20) as c,
        pytest.raises(openai.APIError),
    ):
        for event in c.responses.create(
            model="ch-strict", input=PROMPT, stream=True, tools=tools("responses.create")
        ):
            if event.type == "response.failed":
                failed.append(event.response)
    assert [r.status for r in failed] == ["failed"]
    assert failed[0].error is not None and failed[0].error.code == "tool_arguments_invalid"


# -- text is not held --------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("way", WAYS)
def test_text_streams_before_the_upstream_finishes(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str, wire: str
) -> None:
    gate = threading.Event()
    # The upstream pauses before the call until the client has seen the text.
    upstream.queue(
        Reply(
            content="Refunding now.",
            tool_calls=[Call("create_refund", GOOD)],
            fragment=64,
            gate=gate,
            gate_at=b"create_refund",
        )
    )
    early: list[bool] = []

    def on_text(delta: str) -> None:
        if not gate.is_set():
            early.append(not upstream.requests[0].finished.is_set())
            gate.set()

    out = consume(way, gw, f"{wire}-strict", on_text=on_text, tools=tools(way))
    assert early == [True]
    assert "".join(out.text) == "Refunding now."
    assert [(name, json.loads(args)) for name, args in out.calls] == [
        ("create_refund", json.loads(GOOD))
    ]
    assert len(upstream.requests) == 1


# -- a strict output with no text --------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("way", WAYS)
def test_an_empty_strict_output_streamed_is_corrected_then_a_422(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str, wire: str
) -> None:
    upstream.queue(Reply(content=None), Reply(content=None))
    with pytest.raises(unprocessable(way)) as info:
        consume(way, gw, f"{wire}-strict", **strict_output(way))
    body = assert_plain_422(info.value, way, "json_output_invalid", "")
    assert "no content" in body["error"]["message"]
    assert len(upstream.requests) == 2
    feedback = json.dumps(upstream.requests[1].body)
    assert "the reply has no content" in feedback


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("way", DIALECT_WAYS)
def test_an_empty_strict_output_streamed_is_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, way: str, wire: str
) -> None:
    upstream.queue(Reply(content=None), Reply(content='{"text": "five"}'))
    out = consume(way, gw, f"{wire}-strict", **strict_output(way))
    assert out.final_text == '{"text": "five"}'
    assert out.text == ['{"text": "five"}']  # released whole, once valid
    assert len(upstream.requests) == 2


# -- openai-agents: Runner.run_streamed ---------------------------------------------------


@agents.function_tool
def create_refund(order_number: str, amount_pence: int) -> str:
    """Refund an order.

    Args:
        order_number: The order.
        amount_pence: How much.
    """
    raise AssertionError("an invalid call never reaches the tool")


async def run_streamed(gw: GatewayProcess, model_class: str, model: str) -> None:
    """``Runner.run_streamed`` to the end, with the SDK's default retries."""
    agents.set_tracing_disabled(True)  # the SDK would upload traces: loopback only here
    async with openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, timeout=20
    ) as client:
        classes: dict[str, Any] = {
            "responses": agents.OpenAIResponsesModel,
            "chat": agents.OpenAIChatCompletionsModel,
        }
        agent = agents.Agent(
            name="refunds",
            instructions="Refund orders.",
            tools=[create_refund],
            model=classes[model_class](model=model, openai_client=client),
        )
        result = agents.Runner.run_streamed(agent, PROMPT)
        async for _event in result.stream_events():
            pass


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("model_class", ["responses", "chat"])
async def test_agents_run_streamed_raises_unprocessable_before_any_output(
    gw: GatewayProcess, upstream: ScriptedUpstream, model_class: str, wire: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    with pytest.raises(openai.UnprocessableEntityError) as info:
        await run_streamed(gw, model_class, f"{wire}-strict")
    assert (info.value.code, info.value.param) == ("tool_arguments_invalid", "/amount_pence")
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("model_class", ["responses", "chat"])
async def test_agents_run_streamed_after_text(
    gw: GatewayProcess, upstream: ScriptedUpstream, model_class: str
) -> None:
    upstream.queue(
        Reply(content="One moment.", tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", BAD)]),
    )
    raised: type[Exception] = (
        agents.ModelBehaviorError if model_class == "responses" else openai.APIError
    )
    with pytest.raises(raised) as info:
        await run_streamed(gw, model_class, "ch-strict")
    # in band: the Responses model stops at response.failed, chat at the error chunk
    assert type(info.value) is raised
    assert "tool_arguments_invalid" in str(info.value) or (
        isinstance(info.value, openai.APIError) and info.value.code == "tool_arguments_invalid"
    )
    assert len(upstream.requests) == 2


# -- a client that leaves while the preamble is held ---------------------------------------


def test_a_disconnect_while_held_cancels_the_correction(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD)]),
        Reply(tool_calls=[Call("create_refund", GOOD)], delay=10),
    )
    body = json.dumps(
        {
            "model": "ch-strict",
            "stream": True,
            "tools": tools("chat.create"),
            "messages": [{"role": "user", "content": PROMPT}],
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"authorization: Bearer {gw.api_key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(head + body)
        upstream.wait_for_requests(2, timeout=5)  # the correction is in flight, nothing sent
    # abandoned: within 5 s, long before its 10 s delay would have ended it
    assert upstream.wait_for_disconnect(1, timeout=5)
    rows = _rows_with_status(gw, 499)
    assert rows and rows[-1]["error_code"] == "client_disconnected"
    assert rows[-1]["streamed"] == 1


def _rows_with_status(gw: GatewayProcess, status: int) -> list[dict[str, Any]]:
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    deadline = time.monotonic() + 5
    while True:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.row_factory = sqlite3.Row
            rows = [
                dict(r)
                for r in conn.execute(
                    "SELECT * FROM usage_records WHERE status = ? ORDER BY request_id", (status,)
                )
            ]
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)

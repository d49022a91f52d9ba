"""Errors as each vendor spells them, and upstream errors that keep their meaning.

Through the official SDKs against a real gateway (``stream_gateway``: ``strict-model`` and
``oa-*`` behind the scripted chat-completions side, ``an-*`` behind its Messages side):
the SDK raises the vendor's exception class and ``e.body`` has the vendor's fields;
``x-should-retry: false`` stops the SDKs' retries of what a retry cannot fix; an
upstream 4xx reaches the client with its status, message and ``param``, tried once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from gateway.errors import error_type, retry_header
from gateway.upstream.errors import MAX_MESSAGE_CHARS
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import BAD_ARGS, MESSAGES, refund_tool
from tests.support.scripted_upstream import (
    Call,
    HttpError,
    Raw,
    RawStream,
    Reply,
    ScriptedUpstream,
    sse,
)

AN_MESSAGES: list[Any] = [{"role": "user", "content": "Refund order 582131."}]
AN_TOOL = {
    "name": "create_refund",
    "strict": True,
    "input_schema": refund_tool()["function"]["parameters"],
}
OPENAI_400 = {
    "error": {
        "message": "Invalid value for 'temperature': must be <= 2.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    }
}
ANTHROPIC_400 = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "max_tokens: 99999 > 8192"},
}


@pytest.fixture
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway


@pytest.fixture
def oa(gw: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=2) as c:
        yield c


@pytest.fixture
def an(gw: GatewayProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=2) as c:
        yield c


def orjson_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def _body(exc: openai.APIStatusError | anthropic.APIStatusError) -> dict[str, Any]:
    body: dict[str, Any] = exc.response.json()
    return body


# -- the gateway's own errors, per dialect ---------------------------------------------------


def test_openai_dialect_speaks_openais_vocabulary(gw: GatewayProcess) -> None:
    bad = openai.OpenAI(base_url=gw.base_url + "/v1", api_key="sk_bad", max_retries=2)
    with bad, pytest.raises(openai.AuthenticationError) as auth:
        bad.chat.completions.create(model="strict-model", messages=MESSAGES)
    assert _body(auth.value)["error"]["type"] == "invalid_request_error"
    assert auth.value.code == "invalid_api_key"
    assert auth.value.response.headers["x-should-retry"] == "false"
    assert "type" not in _body(auth.value)  # the top-level type is Anthropic's only

    with openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=2) as c:
        with pytest.raises(openai.NotFoundError) as missing:
            c.chat.completions.create(model="no-such-model", messages=MESSAGES)
        with pytest.raises(openai.NotFoundError) as missing_responses:
            c.responses.create(model="no-such-model", input="hi")
    for exc in (missing.value, missing_responses.value):
        err = _body(exc)["error"]
        assert (err["type"], err["code"], err["param"]) == (
            "invalid_request_error",
            "model_not_found",
            "model",
        )


def test_anthropic_dialect_speaks_anthropics_vocabulary(gw: GatewayProcess) -> None:
    an_bad = anthropic.Anthropic(base_url=gw.base_url, api_key="sk_bad", max_retries=2)
    with an_bad, pytest.raises(anthropic.AuthenticationError) as auth:
        an_bad.messages.create(model="an-strict", max_tokens=16, messages=AN_MESSAGES)
    body = _body(auth.value)
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    assert body["request_id"] == auth.value.response.headers["x-request-id"]
    assert auth.value.response.headers["x-should-retry"] == "false"

    with anthropic.Anthropic(base_url=gw.base_url, api_key=gw.api_key, max_retries=2) as c:
        with pytest.raises(anthropic.NotFoundError) as missing:
            c.messages.create(model="no-such-model", max_tokens=16, messages=AN_MESSAGES)
        with pytest.raises(anthropic.BadRequestError) as bad_request:
            c.messages.create(model="an-strict", max_tokens=0, messages=AN_MESSAGES)
    assert _body(missing.value)["error"]["type"] == "not_found_error"
    assert _body(bad_request.value)["type"] == "error"
    assert _body(bad_request.value)["error"]["type"] == "invalid_request_error"
    # the SDK's own model of the body accepts it
    parsed = anthropic.types.ErrorResponse.model_validate(_body(missing.value))
    assert parsed.error.type == "not_found_error"


@pytest.mark.parametrize(
    ("status", "openai_type", "anthropic_type", "should_retry"),
    [
        (400, "invalid_request_error", "invalid_request_error", "false"),
        (401, "invalid_request_error", "authentication_error", "false"),
        (403, "invalid_request_error", "permission_error", "false"),
        (404, "invalid_request_error", "not_found_error", "false"),
        (408, "invalid_request_error", "invalid_request_error", None),
        (409, "invalid_request_error", "conflict_error", None),
        (413, "invalid_request_error", "request_too_large", "false"),
        (422, "invalid_request_error", "invalid_request_error", "false"),
        (429, "requests", "rate_limit_error", None),
        (500, "server_error", "api_error", None),
        (502, "server_error", "api_error", None),
        (503, "server_error", "overloaded_error", None),
        (504, "server_error", "timeout_error", None),
    ],
)
def test_vocabulary_table(
    status: int, openai_type: str, anthropic_type: str, should_retry: str | None
) -> None:
    assert error_type(status, "openai") == openai_type
    assert error_type(status, "anthropic") == anthropic_type
    assert retry_header(status) == should_retry


@pytest.mark.parametrize("dialect", ["chat", "messages"])
def test_a_422_is_not_retried_by_the_sdk(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    oa: openai.OpenAI,
    an: anthropic.Anthropic,
    dialect: str,
) -> None:
    upstream.queue(*[Reply(tool_calls=[Call("create_refund", BAD_ARGS)])] * 6)
    if dialect == "chat":
        with pytest.raises(openai.UnprocessableEntityError) as oa_info:
            oa.chat.completions.create(
                model="strict-model",
                messages=MESSAGES,
                tools=[refund_tool()],  # type: ignore[list-item]
            )
        headers = oa_info.value.response.headers
    else:
        with pytest.raises(anthropic.UnprocessableEntityError) as an_info:
            an.messages.create(
                model="oa-strict",
                max_tokens=64,
                messages=AN_MESSAGES,
                tools=[AN_TOOL],  # type: ignore[list-item]
            )
        headers = an_info.value.response.headers
        assert _body(an_info.value)["error"]["type"] == "invalid_request_error"
    assert headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 2  # first call + one correction, once: the SDK stopped


# -- upstream errors keep their meaning ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_400_is_a_400_with_the_vendors_message_and_param(
    upstream: ScriptedUpstream, oa: openai.OpenAI, stream: bool
) -> None:
    upstream.queue(HttpError(400, body=OPENAI_400))
    with pytest.raises(openai.BadRequestError) as info:
        oa.chat.completions.create(model="plain-model", messages=MESSAGES, stream=stream)
    err = _body(info.value)["error"]
    assert err == {
        "type": "invalid_request_error",
        "code": "upstream_rejected",
        "message": OPENAI_400["error"]["message"],
        "param": "temperature",
        "upstream_code": "invalid_value",
        "upstream_status": 400,
    }
    assert info.value.response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 1  # neither the gateway nor the SDK retried


@pytest.mark.parametrize("stream", [False, True])
def test_an_openai_upstreams_own_code_reaches_both_dialects(
    upstream: ScriptedUpstream, oa: openai.OpenAI, an: anthropic.Anthropic, stream: bool
) -> None:
    too_long = {
        "error": {
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    upstream.queue(HttpError(400, body=too_long), HttpError(400, body=too_long))
    with pytest.raises(openai.BadRequestError) as oa_info:
        oa.chat.completions.create(model="plain-model", messages=MESSAGES, stream=stream)
    with pytest.raises(anthropic.BadRequestError) as an_info:
        an.messages.create(model="oa-plain", max_tokens=16, messages=AN_MESSAGES, stream=stream)
    for exc in (oa_info.value, an_info.value):
        err = _body(exc)["error"]
        assert (err["code"], err["upstream_code"], err["upstream_status"], err["param"]) == (
            "upstream_rejected",
            "context_length_exceeded",
            400,
            "messages",
        )
        assert err["message"] == too_long["error"]["message"]
    assert oa_info.value.code == "upstream_rejected"
    assert len(upstream.requests) == 2


@pytest.mark.parametrize(
    ("status", "kind", "sdk_error"),
    [
        (413, "request_too_large", anthropic.APIStatusError),
        (429, "rate_limit_error", anthropic.RateLimitError),
    ],
)
def test_an_anthropic_upstreams_4xx_keeps_its_status_type_and_retry_headers(
    upstream: ScriptedUpstream,
    an: anthropic.Anthropic,
    status: int,
    kind: str,
    sdk_error: type[anthropic.APIStatusError],
) -> None:
    body = orjson_bytes({"type": "error", "error": {"type": kind, "message": f"no: {kind}"}})
    headers = {"retry-after": "7", "x-should-retry": "false"}
    tries = 3 if status == 429 else 1  # the gateway retries a 429 itself, twice
    upstream.queue(*[Raw(body, status=status, headers=headers)] * tries)
    with pytest.raises(sdk_error) as info:
        an.messages.create(model="an-plain", max_tokens=16, messages=AN_MESSAGES)
    assert info.value.status_code == status
    err = _body(info.value)["error"]
    assert (err["type"], err["code"], err["upstream_code"], err["message"]) == (
        kind,
        "upstream_rejected",
        kind,
        f"no: {kind}",
    )
    assert info.value.response.headers["x-should-retry"] == "false"  # the vendor's word
    if status == 429:
        assert info.value.response.headers["retry-after"] == "7"
    assert len(upstream.requests) == tries  # the SDK obeyed x-should-retry: false


def test_an_overloaded_anthropic_upstream_is_a_502_that_says_so(
    upstream: ScriptedUpstream, oa: openai.OpenAI, an: anthropic.Anthropic
) -> None:
    body = orjson_bytes(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    overloaded = Raw(body, status=529, headers={"retry-after": "0", "x-should-retry": "false"})
    upstream.queue(*[overloaded] * 6)  # the gateway's own two retries, per request
    with pytest.raises(anthropic.InternalServerError) as an_info:
        an.messages.create(model="an-plain", max_tokens=16, messages=AN_MESSAGES)
    with pytest.raises(openai.InternalServerError) as oa_info:
        oa.chat.completions.create(model="an-plain", messages=MESSAGES)
    for exc in (an_info.value, oa_info.value):
        assert exc.status_code == 502
        err = _body(exc)["error"]
        assert (err["code"], err["upstream_code"], err["upstream_status"]) == (
            "upstream_error",
            "overloaded_error",
            529,
        )
        assert "Overloaded" in err["message"]
        assert exc.response.headers["retry-after"] == "0"
        # the vendor said not to retry: both SDKs (max_retries=2) stop at once
        assert exc.response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 6


def test_anthropic_upstream_400_keeps_anthropics_type(
    upstream: ScriptedUpstream, an: anthropic.Anthropic
) -> None:
    upstream.queue(HttpError(400, body=ANTHROPIC_400))
    with (
        pytest.raises(anthropic.BadRequestError) as info,
        an.messages.stream(model="an-plain", max_tokens=64, messages=AN_MESSAGES) as s,
    ):
        s.get_final_message()
    body = _body(info.value)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "upstream_rejected"
    assert body["error"]["message"] == "max_tokens: 99999 > 8192"
    assert len(upstream.requests) == 1


def test_a_vendors_type_is_spelled_in_the_clients_dialect(
    upstream: ScriptedUpstream, an: anthropic.Anthropic, oa: openai.OpenAI
) -> None:
    # an OpenAI upstream's 404 to an Anthropic client: Anthropic's word for a 404
    upstream.queue(
        HttpError(
            404,
            body={
                "error": {
                    "message": "The model 'x' does not exist",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": None,
                }
            },
        )
    )
    with pytest.raises(anthropic.NotFoundError) as info:
        an.messages.create(model="oa-plain", max_tokens=16, messages=AN_MESSAGES)
    assert _body(info.value)["error"]["type"] == "not_found_error"
    assert _body(info.value)["error"]["param"] == "model"
    # an Anthropic upstream's 413 to an OpenAI client: OpenAI's word for it
    upstream.queue(
        HttpError(
            413,
            body={
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum size",
                },
            },
        )
    )
    with pytest.raises(openai.APIStatusError) as too_large:
        oa.chat.completions.create(model="an-plain", messages=MESSAGES)
    assert too_large.value.status_code == 413
    assert _body(too_large.value)["error"]["type"] == "invalid_request_error"


def test_an_upstream_429_is_a_429_after_the_gateways_retries(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(*[HttpError(429)] * 3)
    c = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)
    with c, pytest.raises(openai.RateLimitError) as info:
        c.chat.completions.create(model="plain-model", messages=MESSAGES)
    assert info.value.code == "upstream_rejected"
    assert len(upstream.requests) == 3  # the gateway's two retries, as before


@pytest.mark.parametrize("status", [401, 403])
def test_the_upstreams_refusal_of_the_operators_key_is_a_502_not_retried(
    upstream: ScriptedUpstream, oa: openai.OpenAI, status: int
) -> None:
    upstream.queue(
        *[
            HttpError(
                status,
                body={
                    "error": {
                        "message": "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwx",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
            )
        ]
        * 3
    )
    with pytest.raises(openai.InternalServerError) as info:
        oa.chat.completions.create(model="plain-model", messages=MESSAGES)
    assert info.value.status_code == 502
    assert info.value.code == "upstream_credentials_rejected"
    assert info.value.response.headers["x-should-retry"] == "false"
    assert "sk-proj-" not in info.value.response.text
    assert len(upstream.requests) == 1


# -- hostile upstream error bodies -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "check"),
    [
        pytest.param(
            b"<html><body>400 Bad Request</body></html>",
            "text/html",
            lambda m: m == "<html><body>400 Bad Request</body></html>",
            id="not-json",
        ),
        pytest.param(
            b'{"error": {"message": "' + b"x" * 200_000 + b'"}}',
            "application/json",
            lambda m: len(m) <= MAX_MESSAGE_CHARS + 1,
            id="huge-message",
        ),
        pytest.param(
            b'{"error": {"message": "no key sk-live-abcdefghijklmnopq here"}}',
            "application/json",
            lambda m: "sk-live-" not in m and "[REDACTED]" in m,
            id="secret-in-message",
        ),
        pytest.param(
            b'{"error": {"message": 5, "param": {"x": 1}}}',
            "application/json",
            lambda m: m == '{"error": {"message": 5, "param": {"x": 1}}}',
            id="wrong-types",
        ),
        pytest.param(b"", "application/json", lambda m: m == "(empty body)", id="empty"),
        pytest.param(
            b"[" * 100_000,
            "application/json",
            lambda m: len(m) <= MAX_MESSAGE_CHARS + 1,
            id="deep-nesting",
        ),
    ],
)
def test_hostile_upstream_error_bodies(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    body: bytes,
    content_type: str,
    check: Any,
) -> None:
    upstream.queue(Raw(body, status=400, content_type=content_type))
    r = httpx.post(
        gw.base_url + "/v1/chat/completions",
        timeout=20,
        json={"model": "plain-model", "messages": MESSAGES},
        headers={"authorization": f"Bearer {gw.api_key}"},
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "upstream_rejected"
    assert err["param"] is None
    assert check(err["message"]), err["message"][:200]


# -- an upstream's failure inside its answer --------------------------------------------


def _streamed_lines(gw: GatewayProcess, path: str, body: dict[str, Any]) -> list[str]:
    with httpx.stream(
        "POST",
        gw.base_url + path,
        json=body,
        timeout=20,
        headers={"authorization": f"Bearer {gw.api_key}"},
    ) as r:
        assert r.status_code == 200  # the stream had started: the failure is in band
        return [line for line in r.iter_lines() if line.startswith("data:")]


def test_an_in_band_upstream_failure_keeps_the_vendors_code(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    def event(name: str, **data: Any) -> bytes:
        return sse({"type": name, **data}, event=name)

    upstream.queue(
        RawStream(
            [
                event(
                    "message_start",
                    message={
                        "id": "msg_up",
                        "type": "message",
                        "role": "assistant",
                        "model": "up",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 3, "output_tokens": 1},
                    },
                ),
                event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hel"}),
                event("error", error={"type": "overloaded_error", "message": "Overloaded"}),
            ]
        ),
        RawStream(
            [
                sse(
                    {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "up",
                        "choices": [
                            {"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}
                        ],
                    }
                ),
                sse(
                    {
                        "error": {
                            "message": "The server had an error",
                            "type": "server_error",
                            "code": "internal_error",
                        }
                    }
                ),
            ]
        ),
    )
    an = _streamed_lines(
        gw,
        "/v1/messages",
        {"model": "an-plain", "max_tokens": 16, "messages": AN_MESSAGES, "stream": True},
    )
    oa = _streamed_lines(
        gw, "/v1/chat/completions", {"model": "plain-model", "messages": MESSAGES, "stream": True}
    )
    for lines, vendor in ((an, "overloaded_error"), (oa, "internal_error")):
        error = json.loads(lines[-1][5:])["error"]
        assert (error["code"], error["upstream_code"]) == ("upstream_error", vendor)

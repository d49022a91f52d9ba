"""Secrets never reach a sink: a canary customer key and a canary upstream key
(``api_key_env``) go through requests that fail in every way we can cause, including an
upstream that echoes the credential back in its error text; then every sink is grepped:
the server's stdout/stderr, every response (headers and body), ``/metrics``, the ledger
table, and the raw bytes of the database file."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.reliability.helpers import all_rows, chat_body, db_path, ledger_rows
from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import free_port, model_table, start_gateway
from tests.support.openai_helpers import BAD_ARGS
from tests.support.scripted_upstream import (
    Call,
    Drop,
    HttpError,
    Raw,
    RawStream,
    Reply,
    ScriptedUpstream,
)


def test_canary_keys_reach_no_sink(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    upstream_canary = f"sk-upstream-CANARY{uuid.uuid4().hex}"
    bad_customer_canary = f"sk_live_CANARYBAD{uuid.uuid4().hex}"
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    base = scripted_upstream_server.base_url
    models = [
        model_table("m", base, api_key_env="CANARY_UPSTREAM_KEY"),
        model_table("an", base, provider="anthropic", api_key_env="CANARY_UPSTREAM_KEY"),
        model_table("slow", base, api_key_env="CANARY_UPSTREAM_KEY", timeout_s=0.3),
        model_table(
            "dead", f"http://127.0.0.1:{free_port()}/v1", api_key_env="CANARY_UPSTREAM_KEY"
        ),
    ]
    gw = start_gateway(tmp_path, models, env={"CANARY_UPSTREAM_KEY": upstream_canary})
    customer_canary = gw.api_key
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {upstream_canary}. "
            f"You sent Authorization: Bearer {upstream_canary}",
            "type": "invalid_request_error",
        }
    }
    seen: list[bytes] = []
    paths: list[bool] = []  # metered (POST /v1/*) and authenticated: has a ledger row
    ids: list[str] = []

    def call(
        path: str, body: Any, key: str | None = customer_canary, header: str = "authorization"
    ) -> httpx.Response:
        headers = {}
        if key is not None:
            headers[header] = f"Bearer {key}" if header == "authorization" else key
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        r = httpx.post(gw.base_url + path, content=content, headers=headers, timeout=20)
        seen.append(r.content + repr(sorted(r.headers.items())).encode())
        ids.append(r.headers["x-request-id"])
        paths.append(path.startswith("/v1/"))
        return r

    chat: Callable[..., httpx.Response] = lambda body, **kw: call(  # noqa: E731
        "/v1/chat/completions", body, **kw
    )
    try:
        upstream.queue(
            HttpError(401, body=echo),  # upstream echoes its key
            HttpError(500, body=echo),
            Raw(orjson.dumps(echo)[:-3]),  # malformed JSON with the key
            RawStream([b"data: " + orjson.dumps(echo) + b"\n\n"]),  # in-band stream error
            Drop(),
            Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),
            Reply(tool_calls=[Call("create_refund", BAD_ARGS)]),  # 422 after correction
            Reply(content="late", delay=1),  # slow model: timeout
            HttpError(401, body=echo),  # anthropic upstream echo
        )
        outcomes = [
            chat(chat_body()).status_code,
            chat(chat_body()).status_code,
            chat(chat_body()).status_code,
            chat(chat_body(stream=True, tools=[])).status_code,
            chat(chat_body()).status_code,
            chat(chat_body()).status_code,
            chat(chat_body("slow")).status_code,
            call(
                "/v1/messages",
                {"model": "an", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
                header="x-api-key",
            ).status_code,
            chat(chat_body("dead")).status_code,
            chat(chat_body(), key=bad_customer_canary).status_code,
            call(
                "/v1/messages", {"model": "an"}, key=bad_customer_canary, header="x-api-key"
            ).status_code,
            chat(b"{not json " + customer_canary.encode()).status_code,
            chat(chat_body("no-such-model")).status_code,
            call("/v1/schemas/check", {"schema": {"type": "object"}}).status_code,
        ]
        assert outcomes[:3] == [502, 502, 502]
        assert outcomes[5:7] == [422, 504]
        assert outcomes[8:11] == [502, 401, 401]
        assert upstream_canary in upstream.requests[0].headers["authorization"]  # it was used
        metrics = httpx.get(gw.base_url + "/metrics", timeout=10).text
        ledger_rows(gw, [i for i, path in zip(ids, paths, strict=True) if path])
        ledger = orjson.dumps(all_rows(gw))
    finally:
        gw.stop()
    log = gw.log()
    assert b"Incorrect API key provided: [REDACTED]" in b"".join(seen)  # echo was scrubbed
    database = db_path(gw).read_bytes() + _wal(db_path(gw))
    sinks = {
        "log": log.encode(),
        "responses": b"".join(seen),
        "metrics": metrics.encode(),
        "ledger": ledger,
        "database": database,
    }
    for canary in (upstream_canary, customer_canary, bad_customer_canary):
        for name, data in sinks.items():
            where = data.find(canary.encode())
            context = data[max(0, where - 300) : where]
            assert where < 0, f"{canary[:20]}... leaked into {name}: {context!r}"
    assert len(orjson.loads(ledger)) >= len(outcomes)


def _wal(db: Path) -> bytes:
    wal = db.with_name(db.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_anthropic_in_band_error_never_echoes_the_upstream_key(
    scripted_upstream_server: ScriptedUpstream, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """An Anthropic upstream's ``event: error`` (and its error status body) quoting the
    upstream key: the key is not shaped like one (no ``sk-``), so only scrubbing the
    configured secret itself keeps it out of the stream, the log and the ledger."""
    canary = f"CANARYplain{uuid.uuid4().hex}"
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    models = [
        model_table(
            "an",
            scripted_upstream_server.base_url,
            provider="anthropic",
            api_key_env="CANARY_UPSTREAM_KEY",
        )
    ]
    gw = start_gateway(tmp_path, models, env={"CANARY_UPSTREAM_KEY": canary})
    error = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {canary}"},
    }
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "an-served",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 0},
        },
    }
    in_band = RawStream(
        [
            b"event: message_start\ndata: " + orjson.dumps(start) + b"\n\n",
            b"event: error\ndata: " + orjson.dumps(error) + b"\n\n",
        ]
    )
    seen: list[bytes] = []
    ids: list[str] = []
    try:
        upstream.queue(in_band, in_band, HttpError(401, body=error))
        for path, body in (
            (
                "/v1/messages",
                {
                    "model": "an",
                    "max_tokens": 50,
                    "stream": True,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            ),
            ("/v1/chat/completions", chat_body("an", stream=True, tools=[])),
            (
                "/v1/messages",
                {"model": "an", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
            ),
        ):
            r = httpx.post(
                gw.base_url + path,
                json=body,
                timeout=20,
                headers={"authorization": f"Bearer {gw.api_key}"},
            )
            seen.append(r.content + repr(sorted(r.headers.items())).encode())
            ids.append(r.headers["x-request-id"])
        assert len(upstream.requests) == 3
        assert all(req.headers["x-api-key"] == canary for req in upstream.requests)
        rows = ledger_rows(gw, ids)
        metrics = httpx.get(gw.base_url + "/metrics", timeout=10).content
    finally:
        gw.stop()
    responses = b"".join(seen)
    assert responses.count(b"invalid x-api-key [REDACTED]") == 3  # the errors did arrive
    assert all(row["status"] >= 400 or row["error_code"] for row in rows.values())
    sinks = {
        "log": gw.log().encode(),
        "responses": responses,
        "metrics": metrics,
        "ledger": orjson.dumps(list(rows.values())),
        "database": db_path(gw).read_bytes() + _wal(db_path(gw)),
    }
    for name, data in sinks.items():
        assert canary.encode() not in data, f"the upstream key leaked into {name}"

"""Edge limits against a real ``syntic serve``: body cap before buffering (also
chunked and with a lying content-length), body and header read timeouts, header size,
the in-flight bound, the request deadline, and caps on what the model sends back."""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.ops.helpers import scrape
from tests.reliability.helpers import (
    all_rows,
    chat_body,
    ledger_rows,
    parse_response,
    raw_http,
)
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Call, Raw, Reply, ScriptedUpstream

BODY_LIMIT = 64 * 1024
SERVER = {
    "max_body_bytes": BODY_LIMIT,
    "body_timeout_s": 1.0,
    "keepalive_timeout_s": 1.0,
    "max_header_bytes": 8192,
    "max_inflight": 3,
    "max_concurrent_per_key": 3,  # one key fills the process here
    "request_timeout_s": 3.0,
    "max_argument_bytes": 32 * 1024,
    "max_upstream_body_bytes": 256 * 1024,
}


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("edge")
    models = [model_table("m", scripted_upstream_server.base_url)]
    gateway = start_gateway(workdir, models, server=SERVER)
    try:
        yield gateway
    finally:
        gateway.stop()


class _Counted:
    """Frames for ``raw_http`` that count how many were never sent (it stops sending once
    the server has closed): proof that the server cut the client off mid-send."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for frame in self.frames:
            self.sent += 1
            yield frame

    @property
    def unsent(self) -> int:
        return len(self.frames) - self.sent


def _head(gw: GatewayProcess, extra: str = "", length: int | None = None) -> bytes:
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        f"host: 127.0.0.1:{gw.port}",
        f"authorization: Bearer {gw.api_key}",
        "content-type: application/json",
    ]
    if length is not None:
        lines.append(f"content-length: {length}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_declared_oversize_is_refused_before_the_body_is_sent(gw: GatewayProcess) -> None:
    # the 50 MiB never come: waiting for them would end in the body timeout's 408
    raw, _ = raw_http(gw.port, [_head(gw, length=50 * 1024 * 1024)], read_timeout=10)
    status, headers, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (413, "request_too_large")
    assert headers["x-request-id"] == body["request_id"]


def test_chunked_oversize_is_refused_while_streaming_in(gw: GatewayProcess) -> None:
    chunk = b"x" * 8192
    frames = [_head(gw, "transfer-encoding: chunked")]
    frames += [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (2 * BODY_LIMIT // len(chunk))
    frames.append(b"0\r\n\r\n")
    raw, _ = raw_http(gw.port, frames)
    status, _, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (413, "request_too_large")


def test_an_oversize_body_that_arrived_whole_is_refused(gw: GatewayProcess) -> None:
    """No content-length, the whole chunked body in one write: refused once the body
    read passes the cap, with the ledger row."""
    body = b"x" * (BODY_LIMIT + 100)
    raw, _ = raw_http(
        gw.port,
        [_head(gw, "transfer-encoding: chunked") + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)],
    )
    status, headers, answer = parse_response(raw)
    assert (status, answer["error"]["code"]) == (413, "request_too_large")
    assert headers["x-request-id"] == answer["request_id"]
    row = ledger_rows(gw, [answer["request_id"]])[answer["request_id"]]
    assert (row["status"], row["error_code"]) == (413, "request_too_large")


@pytest.mark.parametrize(
    "declared, sent, pause",
    [
        (1000, [b'{"model": "m"'], 0.0),  # lying content-length: fewer bytes than declared
        (400, [b" "] * 200, 0.1),  # slowloris: bytes keep trickling in, never enough
    ],
    ids=["lying-content-length", "slowloris-body"],
)
def test_slow_or_short_body_gets_408_and_the_connection_closes(
    gw: GatewayProcess, declared: int, sent: list[bytes], pause: float
) -> None:
    frames = _Counted([_head(gw, length=declared), *sent])
    raw, _ = raw_http(gw.port, frames, pause=pause)
    status, headers, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (408, "request_timeout")
    assert headers.get("connection") == "close"
    if pause:  # the trickle is cut off while the client is still sending (body_timeout_s)
        assert frames.unsent > 0
    row = ledger_rows(gw, [body["request_id"]])[body["request_id"]]
    assert (row["status"], row["error_code"]) == (408, "request_timeout")


def test_client_gone_mid_body_is_a_499_not_an_internal_error(gw: GatewayProcess) -> None:
    before = {r["request_id"] for r in all_rows(gw)}
    sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    sock.sendall(_head(gw, length=1000) + b'{"model": "m"')
    time.sleep(0.2)  # the body read has started
    sock.close()  # gone before the rest of the body
    deadline = time.monotonic() + 10
    new: list[dict[str, object]] = []
    while not new and time.monotonic() < deadline:
        time.sleep(0.05)
        new = [r for r in all_rows(gw) if r["request_id"] not in before]
    assert [(r["status"], r["error_code"]) for r in new] == [(499, "client_disconnected")]
    assert f"unhandled error in request {new[0]['request_id']}" not in gw.log()


def test_slow_headers_get_408_and_the_connection_closes(gw: GatewayProcess) -> None:
    head = _head(gw, length=2)
    trickle = [head[:20], *[bytes([b]) for b in head[20:-2]]]  # never complete
    frames = _Counted(trickle)
    raw, _ = raw_http(gw.port, frames, pause=0.1)
    status, _, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (408, "request_timeout")
    assert frames.unsent > 0  # cut off mid-trickle by the header timeout (keepalive_timeout_s)


def test_a_silent_connection_is_closed(gw: GatewayProcess) -> None:
    raw, _ = raw_http(gw.port, [])  # its read timeout is only a hang guard
    status, _, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (408, "request_timeout")


def test_oversized_headers_get_431(gw: GatewayProcess) -> None:
    raw, _ = raw_http(gw.port, [_head(gw, "x-padding: " + "a" * 20_000, length=2), b"{}"])
    status, _, body = parse_response(raw)
    assert (status, body["error"]["code"]) == (431, "headers_too_large")


def test_in_flight_bound_refuses_with_503_and_retry_after(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(*[Reply(content="slow", delay=1.5) for _ in range(3)])
    body = orjson.dumps(chat_body(tools=[]))
    refusals = ("syntic_inflight_refused_total", ())
    before = scrape(gw.base_url).get(refusals, 0)

    def post(i: int) -> httpx.Response:
        if i >= 3:  # the first three are in flight first
            upstream.wait_for_requests(3, timeout=10)
        return httpx.post(
            gw.base_url + "/v1/chat/completions",
            content=body,
            timeout=10,
            headers={"authorization": f"Bearer {gw.api_key}"},
        )

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        responses = list(pool.map(post, range(5)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200, 200, 503, 503]
    refused = [r for r in responses if r.status_code == 503]
    assert all(r.json()["error"]["code"] == "overloaded" for r in refused)
    assert all(r.headers["retry-after"] == "1" for r in refused)
    assert len(upstream.requests) == 3  # refused requests never reached the upstream
    rows = ledger_rows(gw, [r.headers["x-request-id"] for r in responses])
    assert sorted(r["status"] for r in rows.values()) == statuses
    assert scrape(gw.base_url)[refusals] - before == 2  # /metrics counts the refusals


def test_request_deadline_bounds_a_hanging_upstream(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="too late", delay=20))
    r = httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=chat_body(tools=[]),
        headers={"authorization": f"Bearer {gw.api_key}"},
        timeout=15,
    )
    assert (r.status_code, r.json()["error"]["code"]) == (504, "upstream_timeout")
    # the request deadline's own error (request_timeout_s = 3), not the upstream's timeout
    assert "within its 3s deadline" in r.json()["error"]["message"]
    rid = r.headers["x-request-id"]
    assert ledger_rows(gw, [rid])[rid]["status"] == 504


HUGE = '{"note": "' + "x" * 100_000 + '"}'
DEEP = '{"order_number": ' + "[" * 10_000 + "]" * 10_000 + "}"


@pytest.mark.parametrize(
    "steps, stream, status, code",
    [
        (
            [Reply(tool_calls=[Call("create_refund", HUGE)])],
            False,
            502,
            "upstream_output_too_large",
        ),
        (
            [Reply(tool_calls=[Call("create_refund", HUGE)], fragment=4096)],
            True,
            502,
            "upstream_output_too_large",
        ),
        (
            [Reply(tool_calls=[Call("create_refund", DEEP)])] * 2,
            False,
            422,
            "tool_arguments_invalid",
        ),
        (
            [Reply(tool_calls=[Call("create_refund", DEEP)], fragment=4096)] * 2,
            True,
            422,
            "tool_arguments_invalid",
        ),
        (
            [Raw(b'{"choices": [' * 1 + b" " * (300 * 1024) + b"]}")],
            False,
            502,
            "upstream_output_too_large",
        ),
    ],
    ids=["huge-args", "huge-args-stream", "deep-args", "deep-args-stream", "huge-body"],
)
def test_hostile_model_output_is_a_clean_error(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    steps: list[Reply | Raw],
    stream: bool,
    status: int,
    code: str,
) -> None:
    upstream.queue(*steps)
    # handled within the 3 s request deadline, else the answer would be its 504
    r = httpx.post(
        gw.base_url + "/v1/chat/completions",
        json=chat_body(stream=stream),
        headers={"authorization": f"Bearer {gw.api_key}"},
        timeout=15,
    )
    if r.status_code == 200 and stream:  # committed stream: the error is in-band
        events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
        error = orjson.loads(events[-1])["error"]
        assert error["code"] == code
        assert "[DONE]" not in events
    else:
        assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    assert HUGE[:200] not in r.text and "[[[[[[" not in r.text
    rid = r.headers["x-request-id"]
    assert ledger_rows(gw, [rid])[rid]["status"] == status

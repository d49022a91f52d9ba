"""The edge protocol against uvicorn's own httptools protocol, over real sockets.

A small ASGI app is served twice by uvicorn: once with its stock httptools protocol and
once with ``gateway.server.protocol.EdgeProtocol``; every scenario must give
the same bytes on the wire (framing, keep-alive, HEAD, 204, expect-100, pipelining,
default headers). Header injection attempts must be refused: nothing written, the
connection closed.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

pytest.importorskip("httptools")

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.server.protocol import EdgeProtocol, complete_body_size

BAD_HEADERS: dict[str, tuple[Any, Any]] = {
    "crlf-value": (b"x-note", b"a\r\nx-injected: 1"),
    "lf-value": (b"x-note", b"a\nx-injected: 1"),
    "cr-value": (b"x-note", b"a\rb"),
    "nul-value": (b"x-note", b"a\x00b"),
    "ctl-value": (b"x-note", b"a\x1bb"),
    "del-value": (b"x-note", b"a\x7fb"),
    "crlf-name": (b"x-a\r\nx-injected", b"1"),
    "space-name": (b"x a", b"1"),
    "colon-name": (b"x-a:", b"1"),
    "tab-name": (b"x-a\t", b"1"),
}


AFTER_BODY: list[str] = []
SLOW_BODY = threading.Event()  # /slow sends its body only once the test has seen the head


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    size = complete_body_size(receive)  # before anything is read (for /body-size)
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if path == "/after-body":  # what a second receive() gives once the body is read
        AFTER_BODY.append((await receive())["type"])

    async def start(status: int, headers: list[tuple[Any, Any]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})

    async def chunk(data: bytes, more_body: bool = False) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more_body})

    if path == "/body-size":
        answer = repr(size).encode()
        await start(200, [(b"content-length", str(len(answer)).encode())])
        await chunk(answer)
    elif path == "/big":  # 8 MiB in 64 KiB chunks: more than the transport buffers
        await start(200, [(b"content-type", b"application/octet-stream")])
        for i in range(128):
            await chunk(bytes([65 + i % 26]) * 65536, True)
        await chunk(b"")
    elif path == "/fixed":
        await start(200, [(b"content-type", b"text/plain"), (b"content-length", b"5")])
        await chunk(b"hello")
    elif path == "/echo":
        await start(201, [(b"Content-Length", str(len(body)).encode()), (b"X-Mixed", b"\tv")])
        await chunk(body)
    elif path == "/chunked":
        await start(200, [(b"content-type", b"text/event-stream")])
        await chunk(b"one", True)
        await chunk(b"", True)
        await chunk(b"two", True)
        await chunk(b"")
    elif path == "/te":
        await start(200, [(b"transfer-encoding", b"Chunked")])
        await chunk(b"abc")
    elif path == "/slow":  # the head must go out before the body is ready
        await start(200, [(b"content-type", b"text/event-stream")])
        await asyncio.to_thread(SLOW_BODY.wait, 10)
        await chunk(b"late")
    elif path == "/nocontent":
        await start(204, [])
        await chunk(b"")
    elif path == "/close":
        await start(200, [(b"content-length", b"2"), (b"connection", b"Keep-Alive, Close")])
        await chunk(b"ok")
    elif path == "/multi":
        await start(200, [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"),
                          (b"content-length", b"3"), (b"content-length", b"9")])
        await chunk(b"abc")
    elif path == "/long":
        await start(200, [(b"content-length", b"2")])
        await chunk(b"abc")
    elif path == "/fail-after-start":
        await start(200, [(b"content-length", b"5")])
        raise RuntimeError("boom")
    elif path.startswith("/bad/"):
        await start(200, [(b"content-length", b"2"), BAD_HEADERS[path[5:]]])
        await chunk(b"ok")
    else:
        await start(404, [(b"content-length", b"0")])
        await chunk(b"")


class Served:
    def __init__(self, protocol: type, **config: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config.setdefault("timeout_keep_alive", 5)
        cfg = uvicorn.Config(app, http=protocol, log_config=None, lifespan="on", **config)
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, args=([self.sock],), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def exchange(port: int, data: bytes, timeout: float = 3.0) -> bytes:
    """Send ``data``, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        try:
            while part := sock.recv(65536):
                out += part
        except (ConnectionResetError, TimeoutError):
            pass
    return out


def req(path: str, method: str = "GET", extra: str = "", body: bytes = b"",
        version: str = "1.1", close: bool = False) -> bytes:
    head = f"{method} {path} HTTP/{version}\r\nhost: t\r\n"
    if body:
        head += f"content-length: {len(body)}\r\n"
    if close:
        head += "connection: close\r\n"
    return (head + extra + "\r\n").encode() + body


SCENARIOS: dict[str, bytes] = {
    "fixed": req("/fixed", close=True),
    "keepalive-then-close": req("/fixed") + req("/echo", body=b"xyz", close=True),
    "pipelined": req("/chunked") + req("/te") + req("/nocontent") + req("/fixed", close=True),
    "head": req("/fixed", method="HEAD") + req("/chunked", method="HEAD", close=True),
    "chunked": req("/chunked", close=True),
    "explicit-te": req("/te", close=True),
    "204": req("/nocontent") + req("/fixed", close=True),
    "app-close": req("/close") + req("/fixed"),
    "multi": req("/multi", close=True),
    "http10": req("/fixed", version="1.0") + req("/fixed"),
    "http10-chunked": req("/chunked", version="1.0"),
    "expect-100": req("/echo", extra="expect: 100-continue\r\n", body=b"body", close=True),
    "404": req("/nope", close=True),
    "not-http": b"GARBAGE\r\n\r\n",
    "malformed-chunk-size": req("/echo", "POST", extra="transfer-encoding: chunked\r\n")
    + b"zz\r\n",
    "chunked-request": req("/echo", "POST", close=True, extra="transfer-encoding: chunked\r\n")
    + b"".join(b"1\r\n%c\r\n" % c for c in b"tiny chunks") + b"0\r\n\r\n",
    "percent-path": req("/fi%78ed?q=1", close=True),
    **{f"bad-{k}": req(f"/bad/{k}") for k in BAD_HEADERS},
}


@pytest.fixture(scope="module", params=[True, False], ids=["server-header", "bare"])
def servers(request: pytest.FixtureRequest) -> Iterator[tuple[Served, Served]]:
    config = {"date_header": False, "server_header": request.param,
              "headers": [("X-Deploy", "blue")] if request.param else []}
    stock = Served(HttpToolsProtocol, **config)
    ours = Served(EdgeProtocol, **config)
    try:
        yield stock, ours
    finally:
        stock.stop()
        ours.stop()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_same_bytes_as_uvicorn(servers: tuple[Served, Served], name: str) -> None:
    stock, ours = servers
    expected = exchange(stock.port, SCENARIOS[name])
    got = exchange(ours.port, SCENARIOS[name])
    assert got == expected
    if name.startswith("bad-"):
        assert got == b""  # refused before the head left; the connection closed
    else:
        assert got.startswith(b"HTTP/1.1 ")


@pytest.mark.parametrize("path", ["/long", "/fail-after-start"])
def test_a_response_that_fails_after_its_start_is_not_half_written(
    servers: tuple[Served, Served], path: str
) -> None:
    # uvicorn writes the head, then closes; the head is held until the body here, so the
    # client sees the connection close with no response at all (both are a failure).
    stock, ours = servers
    assert exchange(stock.port, req(path)).startswith(b"HTTP/1.1 200 OK\r\n")
    assert exchange(ours.port, req(path)) == b""


@pytest.mark.parametrize("kind", list(BAD_HEADERS))
def test_header_injection_writes_nothing_and_closes(
    servers: tuple[Served, Served], kind: str
) -> None:
    _, ours = servers
    got = exchange(ours.port, req(f"/bad/{kind}") + req("/fixed"))
    assert got == b""  # the connection closed: not even the pipelined request answered
    assert b"x-injected" not in got


@pytest.mark.parametrize("name", [b"", b"caf\xe9", b"a/b", b"a=b"])
def test_header_names_must_be_tokens(name: bytes) -> None:
    # Stricter than uvicorn (which lets an empty name or bytes >= 0x80 through).
    BAD_HEADERS["extra"] = (name, b"1")
    served = Served(EdgeProtocol, date_header=False)
    try:
        assert exchange(served.port, req("/bad/extra")) == b""
    finally:
        served.stop()
        del BAD_HEADERS["extra"]


def test_date_header_is_current() -> None:
    served = Served(EdgeProtocol, date_header=True)
    try:
        first = exchange(served.port, req("/fixed", close=True))
        assert first.count(b"\r\ndate: ") == 1
        time.sleep(1.3)  # the server refreshes the date once a second
        second = exchange(served.port, req("/fixed", close=True))
        date = [line for line in second.split(b"\r\n") if line.startswith(b"date: ")]
        assert date and date != [ln for ln in first.split(b"\r\n") if ln.startswith(b"date: ")]
    finally:
        served.stop()


def test_head_is_written_before_a_late_body(servers: tuple[Served, Served]) -> None:
    _, ours = servers
    SLOW_BODY.clear()
    try:
        with socket.create_connection(("127.0.0.1", ours.port), timeout=5) as sock:
            sock.sendall(req("/slow", close=True))
            first = sock.recv(65536)  # the body waits for SLOW_BODY: a held head times out
            SLOW_BODY.set()
            rest = b""
            while part := sock.recv(65536):
                rest += part
    finally:
        SLOW_BODY.set()
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n")
    assert rest == b"4\r\nlate\r\n0\r\n\r\n"


def test_a_body_sent_in_pieces_is_received_whole(servers: tuple[Served, Served]) -> None:
    """The app's receive() waits for the rest of the body (the lean path returns at once
    only when the whole request is in): same answer as uvicorn's."""
    payload = b"0123456789" * 5000  # 50 kB, in three writes with pauses
    request = req("/echo", "POST", body=payload, close=True)
    pieces = [request[:100], request[100:30_000], request[30_000:]]
    answers = []
    for served in servers:
        with socket.create_connection(("127.0.0.1", served.port), timeout=3) as sock:
            for piece in pieces:
                sock.sendall(piece)
                time.sleep(0.1)
            out = b""
            while part := sock.recv(65536):
                out += part
        answers.append(out)
    assert answers[1] == answers[0]
    assert answers[1].endswith(b"\r\n\r\n" + payload)


def test_flow_control_both_ways(servers: tuple[Served, Served]) -> None:
    """A 1 MiB request body (reading pauses past 64 KiB until the app reads) and an 8 MiB
    streamed response to a client that reads slowly (the app waits while the transport's
    buffer is full): every byte arrives, in order, as from uvicorn."""
    payload = bytes(range(256)) * 4096  # 1 MiB
    echo = req("/echo", "POST", body=payload, close=True)
    big = req("/big", close=True)
    for served in servers:
        answer = exchange(served.port, echo, timeout=10)
        assert answer.endswith(b"\r\n\r\n" + payload)
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(big)
            out = bytearray()
            while part := sock.recv(65536):
                out += part
                if len(out) < 2_000_000:
                    time.sleep(0.002)  # a slow reader for the first part
        head, _, body = bytes(out).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        chunks = []
        while body:
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line, 16)
            chunks.append(body[:size])
            body = body[size + 2:]
            if size == 0:
                break
        data = b"".join(chunks)
        assert len(data) == 128 * 65536
        assert all(data[i * 65536] == 65 + i % 26 for i in range(128))


def test_complete_body_size_only_when_the_whole_body_is_in(
    servers: tuple[Served, Served],
) -> None:
    """What lets the gateway skip its body deadline and size cap: the size of a body that
    has fully arrived, None while more is to come (and for another server's receive)."""
    stock, ours = servers
    whole = exchange(ours.port, req("/body-size", "POST", body=b"x" * 300, close=True))
    assert whole.endswith(b"\r\n\r\n300")
    with socket.create_connection(("127.0.0.1", ours.port), timeout=3) as sock:
        request = req("/body-size", "POST", body=b"y" * 300, close=True)
        sock.sendall(request[:-100])  # the app starts with 100 bytes still to come
        time.sleep(0.2)
        sock.sendall(request[-100:])
        out = b""
        while part := sock.recv(65536):
            out += part
    assert out.endswith(b"\r\n\r\nNone")
    assert exchange(stock.port, req("/body-size", "POST", body=b"z", close=True)).endswith(
        b"\r\n\r\nNone")


def test_a_receive_after_the_body_waits_for_the_disconnect() -> None:
    """Once the body is read, receive() blocks until the client goes away, then gives
    ``http.disconnect`` (what the streaming endpoints watch for)."""
    served = Served(EdgeProtocol, date_header=False)
    AFTER_BODY.clear()
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=3) as sock:
            sock.sendall(req("/after-body", "POST", body=b"x"))
            time.sleep(0.3)
            assert AFTER_BODY == []  # still waiting: nothing to give yet
        deadline = time.monotonic() + 3
        while not AFTER_BODY and time.monotonic() < deadline:
            time.sleep(0.01)
        assert AFTER_BODY == ["http.disconnect"]
    finally:
        served.stop()


def _closed_silently(sock: socket.socket, hang_guard: float) -> bool:
    """Whether the server closes ``sock`` without writing anything (within the guard)."""
    sock.settimeout(hang_guard)
    return sock.recv(65536) == b""


def test_keep_alive_deadline_moves_with_each_request() -> None:
    """One deadline per connection, not a timer per request: a connection in use stays
    open well past the keep-alive timeout, and is closed (silently) once idle, as uvicorn
    does."""
    served = Served(EdgeProtocol, date_header=False, timeout_keep_alive=1.0)
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
            for _ in range(10):  # 2 s of use, twice the keep-alive timeout
                sock.sendall(req("/fixed"))
                assert sock.recv(65536).endswith(b"\r\n\r\nhello")
                time.sleep(0.2)
            assert _closed_silently(sock, hang_guard=10)
    finally:
        served.stop()


@pytest.mark.parametrize("after_a_request", [False, True], ids=["new", "kept-alive"])
def test_headers_that_do_not_arrive_in_time_get_408(after_a_request: bool) -> None:
    served = Served(EdgeProtocol, date_header=False, timeout_keep_alive=0.5)
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            if after_a_request:
                sock.sendall(req("/fixed"))
                assert sock.recv(65536).endswith(b"hello")
            sock.sendall(b"POST /fixed HTTP/1.1\r\nhost: t\r\n")  # and no more
            out = b""
            while part := sock.recv(65536):  # the socket timeout is only a hang guard
                out += part
        # the answer is the header deadline's own: nothing else would answer a request
        # whose headers never ended
        assert out.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b'"code":"request_timeout"' in out
    finally:
        served.stop()


def test_oversized_headers_get_431() -> None:
    served = Served(EdgeProtocol, date_header=False, h11_max_incomplete_event_size=1024)
    try:
        small = exchange(served.port, req("/fixed", extra="x-pad: " + "a" * 800 + "\r\n",
                                          close=True))
        big = exchange(served.port, req("/fixed", extra="x-pad: " + "a" * 1100 + "\r\n"))
        long_url = exchange(served.port, req("/fixed?" + "q" * 1100))
    finally:
        served.stop()
    assert small.startswith(b"HTTP/1.1 200 OK\r\n")
    for out in (big, long_url):
        assert out.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert b'"code":"headers_too_large"' in out


def test_an_upgrade_request_is_served_as_plain_http() -> None:
    served = Served(EdgeProtocol, date_header=False, ws="none")
    try:
        out = exchange(served.port, req(
            "/fixed", close=True, extra="connection: Upgrade\r\nupgrade: websocket\r\n"))
    finally:
        served.stop()
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"hello")


UPGRADE = "connection: Upgrade\r\nupgrade: h2c\r\n"
SMUGGLED = b"GET /fixed?smuggled HTTP/1.1\r\nhost: t\r\n\r\n"


@pytest.mark.parametrize(
    "request_bytes",
    [
        req("/echo", "POST", extra=UPGRADE, body=SMUGGLED),
        req("/echo", "POST", extra=UPGRADE + "transfer-encoding: chunked\r\n")
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED),
        req("/echo", "POST", extra=UPGRADE + "expect: 100-continue\r\n", body=SMUGGLED),
    ],
    ids=["content-length", "chunked", "expect-100"],
)
def test_an_upgrade_requests_body_is_its_body_not_a_request(request_bytes: bytes) -> None:
    """httptools ends an upgrade request at its headers; stock uvicorn then answers the
    body as a request of its own (and drops the rest of the packet). Here the body is read
    by its framing and the next request follows it."""
    served = Served(EdgeProtocol, date_header=False, server_header=False, ws="none")
    try:
        out = exchange(served.port, request_bytes + req("/fixed", close=True))
    finally:
        served.stop()
    echo = b"HTTP/1.1 201 Created\r\ncontent-length: %d\r\nx-mixed: \tv\r\n\r\n" % len(SMUGGLED)
    fixed = (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n"
             b"connection: close\r\n\r\nhello")
    out = out.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert out == echo + SMUGGLED + fixed


def test_concurrency_limit_answers_503_as_uvicorn_does() -> None:
    stock = Served(HttpToolsProtocol, date_header=False, limit_concurrency=1)
    ours = Served(EdgeProtocol, date_header=False, limit_concurrency=1)
    try:
        expected = exchange(stock.port, req("/fixed", close=True))
        got = exchange(ours.port, req("/fixed", close=True))
    finally:
        stock.stop()
        ours.stop()
    assert got == expected
    assert got.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")


def test_header_value_check_refuses_exactly_what_uvicorn_refuses() -> None:
    """Every byte value, alone and inside a value: the one-pass table check refuses
    exactly the bytes uvicorn's own ``HEADER_VALUE_RE`` finds (controls but HTAB, DEL)."""
    from uvicorn.protocols.http.httptools_impl import HEADER_VALUE_RE

    from gateway.server.cycle import _check_value

    for b in range(256):
        for value in (bytes([b]), b"ok " + bytes([b]) + b" ok"):
            refused = HEADER_VALUE_RE.search(value) is not None
            try:
                _check_value(value)
            except RuntimeError:
                assert refused, value
            else:
                assert not refused, value

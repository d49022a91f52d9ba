"""The edge protocol's guards, over real sockets against uvicorn serving a small app.

``EdgeProtocol`` is uvicorn's own httptools protocol plus three guards: a header deadline
(408), a header size cap (431) and body framing after a refused ``Upgrade`` / ``CONNECT``.
Ordinary requests must get uvicorn's own bytes (checked against stock uvicorn on the
paths the guards' overrides sit on: keep-alive, pipelining, expect-100, chunked bodies,
malformed requests).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.server.protocol import EdgeProtocol


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
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)

    async def start(status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})

    async def chunk(data: bytes, more_body: bool = False) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more_body})

    if path == "/fixed":
        await start(200, [(b"content-type", b"text/plain"), (b"content-length", b"5")])
        await chunk(b"hello")
    elif path == "/echo":
        await start(201, [(b"content-length", str(len(body)).encode()), (b"x-mixed", b"\tv")])
        await chunk(body)
    elif path == "/chunked":
        await start(200, [(b"content-type", b"text/event-stream")])
        await chunk(b"one", True)
        await chunk(b"two")
    elif path == "/nocontent":
        await start(204, [])
        await chunk(b"")
    else:
        await start(404, [(b"content-length", b"0")])
        await chunk(b"")


class Served:
    def __init__(self, protocol: type, **config: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config.setdefault("timeout_keep_alive", 5)
        cfg = uvicorn.Config(
            app, http=protocol, log_config=None, lifespan="on", date_header=False, **config
        )
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


def exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data``, read until the server closes the connection (the socket timeout is
    only a hang guard)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_to_close(sock)


def read_until(sock: socket.socket, end: bytes) -> bytes:
    """Read one response, up to and including ``end`` (uvicorn writes head and body
    apart)."""
    out = b""
    while not out.endswith(end):
        part = sock.recv(65536)
        assert part, f"closed after {out!r}"
        out += part
    return out


def read_to_close(sock: socket.socket) -> bytes:
    out = b""
    try:
        while part := sock.recv(65536):
            out += part
    except ConnectionResetError:
        pass
    return out


def req(
    path: str,
    method: str = "GET",
    extra: str = "",
    body: bytes = b"",
    version: str = "1.1",
    close: bool = False,
) -> bytes:
    head = f"{method} {path} HTTP/{version}\r\nhost: t\r\n"
    if body:
        head += f"content-length: {len(body)}\r\n"
    if close:
        head += "connection: close\r\n"
    return (head + extra + "\r\n").encode() + body


SCENARIOS: dict[str, bytes] = {
    "keepalive-then-close": req("/fixed") + req("/echo", "POST", body=b"xyz", close=True),
    "pipelined": req("/chunked") + req("/nocontent") + req("/fixed", close=True),
    "head": req("/fixed", method="HEAD") + req("/chunked", method="HEAD", close=True),
    "http10": req("/fixed", version="1.0") + req("/fixed"),
    "expect-100": req("/echo", "POST", extra="expect: 100-continue\r\n", body=b"body", close=True),
    "chunked-request": req("/echo", "POST", close=True, extra="transfer-encoding: chunked\r\n")
    + b"".join(b"1\r\n%c\r\n" % c for c in b"tiny chunks")
    + b"0\r\n\r\n",
    "percent-path": req("/fi%78ed?q=1", close=True),
    "not-http": b"GARBAGE\r\n\r\n",
    "malformed-chunk-size": req("/echo", "POST", extra="transfer-encoding: chunked\r\n")
    + b"zz\r\n",
}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Served, Served]]:
    stock = Served(HttpToolsProtocol, headers=[("X-Deploy", "blue")])
    ours = Served(EdgeProtocol, headers=[("X-Deploy", "blue")])
    try:
        yield stock, ours
    finally:
        stock.stop()
        ours.stop()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_ordinary_requests_get_uvicorns_own_bytes(
    servers: tuple[Served, Served], name: str
) -> None:
    stock, ours = servers
    got = exchange(ours.port, SCENARIOS[name])
    assert got == exchange(stock.port, SCENARIOS[name])
    assert got.startswith(b"HTTP/1.1 ")


def test_a_connection_in_use_outlives_the_header_deadline() -> None:
    """The deadline bounds a request's headers, not the connection: one used for longer
    than the timeout stays open, and is closed silently once idle, as uvicorn does."""
    served = Served(EdgeProtocol, timeout_keep_alive=0.5)
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            started = time.monotonic()
            while time.monotonic() - started < 1.5:  # three times the timeout, in use
                sock.sendall(req("/fixed"))
                assert read_until(sock, b"hello").startswith(b"HTTP/1.1 200 OK\r\n")
            assert sock.recv(65536) == b""  # idle: closed, nothing written
    finally:
        served.stop()


@pytest.mark.parametrize(
    "first, then",
    [
        (b"", b""),
        (b"", b"POST /fixed HTTP/1.1\r\nhost: t\r\n"),
        (req("/fixed"), b"POST /fixed HTTP/1.1\r\nhost: t\r\n"),
        (req("/fixed"), b"\r\n"),
    ],
    ids=["silent", "new", "kept-alive", "kept-alive-blank-line"],
)
def test_headers_that_do_not_arrive_in_time_get_408(first: bytes, then: bytes) -> None:
    served = Served(EdgeProtocol, timeout_keep_alive=0.5)
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            if first:
                sock.sendall(first)
                read_until(sock, b"hello")
            if then:
                sock.sendall(then)  # and no more
            out = read_to_close(sock)
        # the header deadline's own answer: nothing else answers a head that never ended
        assert out.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b'"code":"request_timeout"' in out
    finally:
        served.stop()


def test_oversized_headers_get_431() -> None:
    served = Served(EdgeProtocol, h11_max_incomplete_event_size=1024)
    try:
        small = exchange(
            served.port, req("/fixed", extra="x-pad: " + "a" * 800 + "\r\n", close=True)
        )
        big = exchange(served.port, req("/fixed", extra="x-pad: " + "a" * 1100 + "\r\n"))
        long_url = exchange(served.port, req("/fixed?" + "q" * 1100))
        many = exchange(served.port, req("/fixed", extra="x-pad: aaaa\r\n" * 100))
    finally:
        served.stop()
    assert small.startswith(b"HTTP/1.1 200 OK\r\n")
    for out in (big, long_url, many):
        assert out.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert b'"code":"headers_too_large"' in out


def test_a_header_that_never_ends_gets_431_while_it_arrives() -> None:
    """httptools holds a header's value, unreported, until its line ends: a value that
    keeps coming is refused once it passes the cap, not buffered until the deadline."""
    served = Served(EdgeProtocol, h11_max_incomplete_event_size=1024, timeout_keep_alive=30)
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(b"GET /fixed HTTP/1.1\r\nhost: t\r\nx-pad: ")
            try:
                for _ in range(2048):  # 2 MiB, far more than one read of the server's
                    sock.sendall(b"a" * 1024)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused mid-send: the point
            out = read_to_close(sock)
    finally:
        served.stop()
    assert out.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


def test_an_upgrade_request_is_served_as_plain_http() -> None:
    served = Served(EdgeProtocol, ws="none")
    try:
        out = exchange(
            served.port,
            req("/fixed", close=True, extra="connection: Upgrade\r\nupgrade: websocket\r\n"),
        )
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
        req("/echo", "CONNECT", body=SMUGGLED),
    ],
    ids=["content-length", "chunked", "expect-100", "connect"],
)
def test_an_upgrade_requests_body_is_its_body_not_a_request(request_bytes: bytes) -> None:
    """httptools ends an upgrade (or CONNECT) request at its headers; stock uvicorn then
    drops the rest of the packet (the app gets an empty body), or answers a body sent
    later as a request of its own. Here the body is read by its framing and the next
    request follows it."""
    served = Served(EdgeProtocol, server_header=False, ws="none")
    try:
        out = exchange(served.port, request_bytes + req("/fixed", close=True))
    finally:
        served.stop()
    echo = b"HTTP/1.1 201 Created\r\ncontent-length: %d\r\nx-mixed: \tv\r\n\r\n" % len(SMUGGLED)
    fixed = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n"
        b"connection: close\r\n\r\nhello"
    )
    assert out.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n") == echo + SMUGGLED + fixed


def test_an_upgrade_requests_body_sent_later_is_its_body() -> None:
    """The body comes once the server asks for it (expect-100): the request waits for it
    instead of running with an empty body, and the body is not answered as a request."""
    served = Served(EdgeProtocol, server_header=False, ws="none")
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            head = req("/echo", "POST", extra=UPGRADE + "expect: 100-continue\r\n", body=SMUGGLED)
            sock.sendall(head[: -len(SMUGGLED)])
            assert read_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(SMUGGLED + req("/fixed", close=True))
            out = read_to_close(sock)
    finally:
        served.stop()
    echo = b"HTTP/1.1 201 Created\r\ncontent-length: %d\r\nx-mixed: \tv\r\n\r\n" % len(SMUGGLED)
    assert out.startswith(echo + SMUGGLED)
    assert out.count(b"HTTP/1.1 200 OK") == 1  # /fixed, not the smuggled one too

"""The lean upstream pool (``gateway.upstream.pool``) against raw HTTP servers on loopback:
framing (length, chunked, close-delimited), keep-alive reuse, caps, errors, pool bound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from gateway.upstream.pool import UpstreamPool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TIMEOUT = httpx.Timeout(2.0)
BIG = 4 * 1024 * 1024  # cannot have fully arrived when the reader stops at the cap


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return await reader.readexactly(length)


async def _serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/chat/completions"


@pytest.fixture
async def pool() -> AsyncIterator[UpstreamPool]:
    p = UpstreamPool(max_connections=1)
    try:
        yield p
    finally:
        await p.aclose()


def _answer(body: bytes, *, framing: str) -> bytes:
    if framing == "length":
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    if framing == "chunked":
        half = len(body) // 2
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:half], body[half:]))
        return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + body  # ends at close


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
async def test_framings_and_keep_alive(pool: UpstreamPool, framing: str) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(_answer(b"echo:" + body, framing=framing))
            await writer.drain()
            if framing == "close":
                break
        writer.close()

    server, url = await _serve(handler)
    async with server:
        for i in range(3):
            response = await pool.post(url, b"n%d" % i, {"content-type": "x"}, TIMEOUT)
            try:
                assert response.status_code == 200
                assert await response.read_upto(None) == b"echo:n%d" % i
            finally:
                response.finish()
    # One connection kept alive for every call, unless the server closes after each.
    assert connections == (3 if framing == "close" else 1)


async def test_one_connection_answers_alternating_framings(pool: UpstreamPool) -> None:
    """The response parser lives as long as its connection (#8): each answer on it is read
    afresh, whatever the framing and headers of the one before."""
    connections = 0
    framings = ["chunked", "length", "chunked", "length"]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for i, framing in enumerate(framings):
            body = await _read_request(reader)
            answer = _answer(b"echo:" + body, framing=framing)
            if i == 0:  # a header only the first answer carries
                answer = answer.replace(b"200 OK\r\n", b"200 OK\r\nx-first: yes\r\n", 1)
            writer.write(answer)
            await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server:
        for i in range(len(framings)):
            response = await pool.post(url, b"m%d" % i, {"content-type": "x"}, TIMEOUT)
            try:
                assert response.status_code == 200
                assert ("x-first" in response.headers) == (i == 0)
                assert await response.read_upto(None) == b"echo:m%d" % i
            finally:
                response.finish()
    assert connections == 1


async def test_over_the_cap_closes_instead_of_reusing(pool: UpstreamPool) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                await _read_request(reader)
                writer.write(_answer(b"x" * BIG, framing="length"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server, url = await _serve(handler)
    async with server:
        for cap, expected in ((100, None), (None, b"x" * BIG)):
            response = await pool.post(url, b"{}", {}, TIMEOUT)
            try:
                assert await response.read_upto(cap) == expected
            finally:
                response.finish()
    assert connections == 2  # the half-read answer's connection was closed, not reused


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"", httpx.RemoteProtocolError),  # closed without answering
        (b"NOT HTTP AT ALL\r\n\r\n", httpx.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", httpx.RemoteProtocolError),
        (None, httpx.ReadTimeout),  # never answers
    ],
    ids=["no-answer", "malformed", "short-body", "silent"],
)
async def test_failures_are_httpx_errors(
    pool: UpstreamPool, reply: bytes | None, error: type[Exception]
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        if reply is None:
            await reader.read()  # until the client gives up
        else:
            writer.write(reply)
            await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server:
        with pytest.raises(error):
            response = await pool.post(url, b"{}", {}, httpx.Timeout(0.3))
            try:
                await response.read_upto(None)
            finally:
                response.finish()
        # The slot was given back: the pool still works for the next call.
        with pytest.raises(error):
            response = await pool.post(url, b"{}", {}, httpx.Timeout(0.3))
            try:
                await response.read_upto(None)
            finally:
                response.finish()


async def test_refused_is_a_connect_error_and_the_bound_holds(pool: UpstreamPool) -> None:
    server, url = await _serve(lambda r, w: _hold(r, w))
    async with server:
        first = await pool.post(url, b"{}", {}, TIMEOUT)  # holds the only slot
        with pytest.raises(httpx.PoolTimeout):
            await pool.post(url, b"{}", {}, httpx.Timeout(2.0, pool=0.1))
        first.finish()
    free = url.replace(url.split(":")[2].split("/")[0], "1")
    with pytest.raises(httpx.ConnectError):
        await pool.post(free, b"{}", {}, TIMEOUT)


async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
    await writer.drain()
    await reader.read()  # keep the answer open until the client leaves
    writer.close()


async def test_an_idle_connection_the_server_closed_is_not_reused(pool: UpstreamPool) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)
        writer.write(_answer(b"ok", framing="length"))  # keep-alive, then closes anyway
        await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server:
        for i in range(2):
            response = await pool.post(url, b"{}", {}, TIMEOUT)
            try:
                assert await response.read_upto(None) == b"ok"
            finally:
                response.finish()
            if i == 0:
                await asyncio.sleep(0.05)  # the server closes the idle connection
    assert connections == 2


async def test_the_read_timeout_bounds_each_wait_on_a_reused_connection() -> None:
    """The read timeout is per wait (a slow but steady stream is not cut), and it holds on
    a connection reused after earlier answers (one timer per connection, re-armed), also
    when the earlier caller's timeout was longer (models share an origin's connections)."""
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)  # 1: answered at once
        writer.write(_answer(b"fast", framing="length"))
        await _read_request(reader)  # 2: a piece every 0.2 s, 1 s in all
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(5):
            await asyncio.sleep(0.2)
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await _read_request(reader)  # 3: never answered
        await reader.read()
        writer.close()

    pool = UpstreamPool(max_connections=1)
    server, url = await _serve(handler)
    timeout = httpx.Timeout(0.35)
    loop = asyncio.get_running_loop()
    try:
        async with server:
            for expected, first_timeout in ((b"fast", httpx.Timeout(30)), (b"xxxxx", timeout)):
                response = await pool.post(url, b"{}", {}, first_timeout)
                try:
                    assert await response.read_upto(None) == expected
                finally:
                    response.finish()
            started = loop.time()
            with pytest.raises(httpx.ReadTimeout):
                await pool.post(url, b"{}", {}, timeout)
            assert 0.3 <= loop.time() - started < 0.8
    finally:
        await pool.aclose()
    assert connections == 1


async def test_waiters_for_a_slot_are_served_in_order_and_cancelling_one_leaks_nothing(
    pool: UpstreamPool,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(_answer(b"ok", framing="length"))
        writer.close()

    server, url = await _serve(handler)
    waiting = httpx.Timeout(2.0, pool=1.0)
    order: list[str] = []

    async def call(name: str) -> None:
        response = await pool.post(url, b"{}", {}, waiting)
        order.append(name)
        try:
            assert await response.read_upto(None) == b"ok"
        finally:
            response.finish()

    async with server:
        first = await pool.post(url, b"{}", {}, TIMEOUT)  # holds the only slot
        cancelled = asyncio.create_task(call("cancelled"))
        await asyncio.sleep(0.05)
        second, third = asyncio.create_task(call("second")), asyncio.create_task(call("third"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.sleep(0.05)
        assert order == []  # all still waiting for the one slot
        await first.read_upto(None)
        first.finish()
        await asyncio.gather(second, third)
        assert order == ["second", "third"]
        assert cancelled.cancelled()
        # Still exactly one slot: one call holds it, the next times out waiting.
        held = await pool.post(url, b"{}", {}, TIMEOUT)
        with pytest.raises(httpx.PoolTimeout):
            await pool.post(url, b"{}", {}, httpx.Timeout(2.0, pool=0.1))
        await held.read_upto(None)
        held.finish()
        await call("after")
    assert order[-1] == "after"

"""A lean HTTP/1.1 keep-alive pool for the adapters' hot calls (issue #8).

``UpstreamClient.post_capped`` / ``open_stream`` are one POST and its answer, read whole
or as a stream. Through aiohttp that costs ~100 us of CPU per call; on asyncio protocols
with ``httptools`` parsing the answer (the parser uvicorn uses) it costs ~25 us. Only what
those calls need: POST, ``Content-Length`` bodies, keep-alive reuse, TLS, ``gzip``/
``deflate`` answers, per-call connect/read timeouts, a bound on open connections.

Failures raise the httpx exception a plain ``httpx.AsyncClient`` raises in the same
situation (``ConnectError``/``ConnectTimeout`` only when nothing was sent), so the adapters
and the retry policy classify them as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httptools
import httpx

from gateway.timers import MovingDeadline

__all__ = ["PooledResponse", "UpstreamPool"]

_HIGH_WATER = 256 * 1024  # buffered body bytes before reading from the socket pauses


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int
    target: str  # path + query
    host_header: str


class _Conn(asyncio.Protocol):
    """One connection; one response at a time."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.closed = False
        self.idle_since = 0.0
        self.key: tuple[str, str, int] = ("", "", 0)
        # One parser per connection: llhttp is ready for the next response once one is
        # complete, and only a complete response leaves its connection reusable (a new
        # parser per request was ~2,700 instructions, #8).
        self.parser = httptools.HttpResponseParser(self)
        # The read timeout: a deadline per wait, one loop timer per connection.
        self.read_deadline: MovingDeadline | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.got_bytes = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False

    # -- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.read_deadline = MovingDeadline(asyncio.get_running_loop(), self._read_timed_out)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed upstream answer: {exc}"))
            self.transport.close()
            return
        if self.buffered > _HIGH_WATER and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.read_deadline is not None:
            self.read_deadline.cancel()
        if self.complete:
            return
        if self.head_done and not self._framed():
            self.complete = True  # no Content-Length, not chunked: the body ends at close
            self._wake()
        elif not self.got_bytes:
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))
        else:
            self._fail(httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body"))

    # -- httptools callbacks ---------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.head_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        # Read here: the parser resets itself once the message is complete.
        self.keep_alive = self.parser.should_keep_alive()
        self._wake()

    # -- helpers ---------------------------------------------------------------

    def _framed(self) -> bool:
        return "content-length" in self.headers or "transfer-encoding" in self.headers

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.error is None:
            self.error = exc
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, read_timeout: float | None) -> None:
        """Until the parser has something new (or the connection failed); ``ReadTimeout``
        if that takes more than ``read_timeout`` seconds."""
        if self.error is None:
            loop = asyncio.get_running_loop()
            waiter = self.waiter = loop.create_future()
            deadline = self.read_deadline
            if deadline is not None:
                # One timer per connection (``MovingDeadline``), not one set and cancelled
                # per wait (~2.5 us each, #8).
                if read_timeout is None:
                    deadline.clear()
                else:
                    deadline.set(loop.time() + read_timeout)
            try:
                await waiter
            finally:
                self.waiter = None
        if self.error is not None:
            raise self.error

    def _read_timed_out(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done() and not self.closed:
            waiter.set_exception(httpx.ReadTimeout("timed out reading the upstream answer"))

    def take(self) -> bytes | None:
        if not self.chunks:
            return None
        data = b"".join(self.chunks) if len(self.chunks) > 1 else self.chunks[0]
        self.chunks.clear()
        self.buffered = 0
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed


# A connection idle for less than this is reused without the ``select`` probe (#8: one
# system call per upstream request). A server's FIN that arrived while the loop was idle
# has already been processed (``conn.closed``); the probe only narrows the window of one
# busy loop iteration, and servers close idle keep-alive connections after seconds, not
# milliseconds, so it is kept for connections old enough for that to be plausible.
_TRUST_IDLE_S = 1.0


def _quiet(conn: _Conn) -> bool:
    """An idle connection with nothing to read: not closed by the server meanwhile (its
    FIN not processed yet) and no stray bytes. Checked on the one connection about to be
    reused, never by scanning the pool."""
    sock = conn.transport.get_extra_info("socket")
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class _Slots:
    """The pool's bound on connections in use: a counting semaphore for one event loop.

    ``try_take`` is a decrement when a slot is free and nobody queues (nearly always);
    ``asyncio.Semaphore`` costs ~80 bytecodes per request for the same (``locked()``,
    ``acquire()``, ``release()``, #8). Waiters are served first come, first served, a
    freed slot handed straight to the next one."""

    __slots__ = ("_waiters", "free")

    def __init__(self, n: int) -> None:
        self.free = n
        self._waiters: deque[asyncio.Future[None]] = deque()

    def try_take(self) -> bool:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot (cancellable: a slot handed over meanwhile is given back)."""
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, but cancelled before taking it
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes to this waiter
                return
        self.free += 1


class PooledResponse:
    """An answer being read; ``finish()`` (always) returns or closes its connection."""

    __slots__ = ("_conn", "_decoder", "_pool", "_read_timeout", "headers", "status_code")

    def __init__(self, pool: UpstreamPool, conn: _Conn, read_timeout: float | None) -> None:
        self._pool = pool
        self._conn = conn
        self._read_timeout = read_timeout
        self.status_code = conn.status
        self.headers: Mapping[str, str] = conn.headers
        encoding = conn.headers.get("content-encoding", "identity").strip().lower()
        if encoding == "gzip":
            self._decoder: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()
        elif encoding in ("identity", ""):
            self._decoder = None
        else:
            raise httpx.DecodingError(f"unsupported content-encoding {encoding!r}")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The (decoded) body as it arrives."""
        while (chunk := await self.next_chunk()) is not None:
            yield chunk

    async def next_chunk(self) -> bytes | None:
        """The next (decoded, non-empty) piece of the body, or None at its end. A plain
        coroutine: ``read_upto`` loops on it instead of iterating ``chunks()``, an async
        generator, which the event loop's first-iteration hook tracks in a ``WeakSet``
        (added, then removed on finalisation: per request, #8)."""
        conn = self._conn
        while True:
            data = conn.take()
            if data is not None:
                if self._decoder is not None:
                    data = self._decode(data)
                if data:
                    return data
                continue
            if conn.complete:
                break
            await conn.wait(self._read_timeout)
        decoder = self._decoder
        if decoder is not None:
            self._decoder = None  # flushed once
            tail: bytes = decoder.flush()
            if tail:
                return tail
        return None

    def _decode(self, data: bytes) -> bytes:
        try:
            out: bytes = self._decoder.decompress(data)
        except zlib.error as exc:
            raise httpx.DecodingError(f"bad compressed upstream answer: {exc}") from exc
        return out

    async def read_upto(self, cap: int | None) -> bytes | None:
        """The whole body, or None past ``cap`` bytes."""
        parts: list[bytes] = []
        size = 0
        while (chunk := await self.next_chunk()) is not None:
            size += len(chunk)
            if cap is not None and size > cap:
                return None
            parts.append(chunk)
        return b"".join(parts)

    def finish(self) -> None:
        self._pool.release(self._conn)


class UpstreamPool:
    """Keep-alive connections per origin, at most ``max_connections`` in use at once."""

    def __init__(
        self,
        *,
        max_connections: int = 512,
        keepalive_s: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._slots = _Slots(max_connections)
        self._idle: dict[tuple[str, str, int], deque[_Conn]] = {}
        self._origins: dict[str, _Origin] = {}
        self._busy: set[_Conn] = set()
        self.keepalive_s = keepalive_s
        self._ssl = ssl_context
        self.closed = False

    def _origin(self, url: str) -> _Origin:
        found = self._origins.get(url)
        if found is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise httpx.UnsupportedProtocol(f"unsupported upstream URL {url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            found = _Origin(parts.scheme, parts.hostname, port, target, parts.netloc)
            if len(self._origins) > 256:
                self._origins.clear()
            self._origins[url] = found
        return found

    def _idle_conn(self, key: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            idle_s = now - conn.idle_since
            if not conn.closed and idle_s < self.keepalive_s and (
                idle_s < _TRUST_IDLE_S or _quiet(conn)
            ):
                return conn
            conn.transport.close()
        return None

    async def _connect(self, o: _Origin, connect_timeout: float | None) -> _Conn:
        loop = asyncio.get_running_loop()
        ctx: ssl.SSLContext | None = None
        if o.scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(connect_timeout):
                _, conn = await loop.create_connection(
                    _Conn, o.host, o.port, ssl=ctx, server_hostname=o.host if ctx else None
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"timed out connecting to {o.host}:{o.port}") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: httpx.Timeout,  # noqa: ASYNC109 - per request, as in httpx
    ) -> PooledResponse:
        """Send the POST and wait for the answer's head; the caller must ``finish()``."""
        if self.closed:
            raise RuntimeError("the upstream pool is closed")
        o = self._origin(url)
        slots = self._slots
        if not slots.try_take():  # a free slot is taken at once, no timer needed
            try:
                async with asyncio.timeout(timeout.pool):
                    await slots.take()
            except TimeoutError as exc:
                raise httpx.PoolTimeout("no upstream connection free in time") from exc
        conn: _Conn | None = None
        try:
            key = (o.scheme, o.host, o.port)
            conn = self._idle_conn(key) or await self._connect(o, timeout.connect)
            conn.key = key
            conn._reset()
            self._busy.add(conn)
            lines = [f"POST {o.target} HTTP/1.1\r\nhost: {o.host_header}\r\n"]
            lines.extend(f"{k}: {v}\r\n" for k, v in headers.items())
            lines.append(f"accept-encoding: gzip, deflate\r\ncontent-length: {len(body)}\r\n\r\n")
            conn.transport.write("".join(lines).encode("latin-1") + body)
            while not conn.head_done:
                await conn.wait(timeout.read)
            return PooledResponse(self, conn, timeout.read)
        except BaseException:
            if conn is not None:
                self._busy.discard(conn)
                conn.transport.close()
            self._slots.give()
            raise

    def release(self, conn: _Conn) -> None:
        """Back to the idle pool if the answer was read to its end, else closed."""
        if conn not in self._busy:
            return
        self._busy.discard(conn)
        self._slots.give()
        if conn.reusable() and not self.closed:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, deque()).append(conn)
        else:
            conn.transport.close()

    async def aclose(self) -> None:
        self.closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().transport.close()
        for conn in list(self._busy):
            conn.transport.close()
        self._busy.clear()

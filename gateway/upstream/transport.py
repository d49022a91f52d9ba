"""The gateway's one HTTP client for every upstream: pyreqwest (reqwest and hyper on a
tokio runtime, rustls) under the adapters.

An adapter needs two things of HTTP: POST and read the whole answer (``post``), or POST and
read the answer line by line as it streams (``stream``). Everything below that (the
connection pool and keep-alive, TLS, proxies and CONNECT tunnels, interim 1xx answers,
response framing, incremental decompression) is the library's. This module adds the
gateway's bounds and turns every failure into one of the upstream errors of
``gateway.upstream.errors``:

- a whole answer is read up to a cap on its decompressed bytes (past it: ``OutputTooLarge``;
  of an error status only its first ``error_limit`` bytes), and the call, head and body,
  within the model's ``timeout_s``;
- a stream is read through ``gateway.upstream.lines`` (caps on a line or event and on the
  whole body, strict UTF-8), with ``timeout_s`` as the longest silence between two reads;
- a final answer below 200 (a 101 protocol switch) is refused, never read as a body;
- a connection goes back to the pool only after a complete, well-framed answer (hyper
  drops one whose body was not read to its end).

TLS material and proxies differ per model, and the library sets them per client: one
client per route and timeout, built on first use and kept (``docs/upstream-client.md``).
Only ``UpstreamConnectError`` means nothing was sent (the retry policy relies on it).

Example::

    http = UpstreamHttp(Connections(settings.env), keepalive_s=90)
    reply = await http.post(url, body, headers, route, timeout_s=60, limit=1 << 24,
                            error_limit=ERROR_BODY_BYTES)
    async with http.stream(url, body, headers, route, timeout_s=60) as answer:
        async for line in answer.lines():
            ...
    await http.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta

from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import (
    BodyDecodeError,
    ConnectError,
    ConnectTimeoutError,
    DecodeError,
    PyreqwestError,
    RequestTimeoutError,
)
from pyreqwest.proxy import ProxyBuilder
from pyreqwest.response import Response, ResponseBodyReader

from gateway.canonical.record import record
from gateway.upstream.connection import Connections, Route
from gateway.upstream.errors import (
    OutputTooLarge,
    UpstreamConnectError,
    UpstreamError,
    UpstreamInvalidResponse,
    UpstreamTimeout,
)
from gateway.upstream.lines import sse_lines

__all__ = ["ERROR_BODY_BYTES", "Reply", "StreamAnswer", "UpstreamHttp"]

logger = logging.getLogger("syntic.upstream")

# Of an upstream's error answer: enough for its message.
ERROR_BODY_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
# How much of a stream the library reads before it hands the answer over, and then keeps
# read ahead: at its default (64 KiB) the head of a stream waits for that much body, a
# reset in it loses the events before it, and a closed stream's connection stays open
# until the buffer fills. At one byte each event is handed over as it arrives.
STREAM_READ_AHEAD_BYTES = 1


@record
class Reply:
    """A whole answer from ``UpstreamHttp.post`` (``body`` decompressed, within its cap)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes


@functools.lru_cache(maxsize=64)
def _seconds(timeout_s: float) -> timedelta:
    return timedelta(seconds=timeout_s)


def _causes(exc: PyreqwestError) -> str:
    details = getattr(exc, "details", None)
    causes = details.get("causes") if isinstance(details, dict) else None
    return "; ".join(str(c.get("message")) for c in causes or () if isinstance(c, dict))


# hyper's words for an answer that is not well-formed HTTP (its parse errors).
_MALFORMED = ("invalid HTTP", "invalid header", "invalid status", "invalid chunk",
              "message head is too large", "unexpected message", "invalid URI",
              "Invalid", "parse")


def failure(exc: BaseException, timeout_s: float) -> UpstreamError | UpstreamTimeout:
    """The gateway's error for a client (or timeout) failure; the detail is logged only."""
    detail = _causes(exc) if isinstance(exc, PyreqwestError) else ""
    logger.info("upstream call failed: %s: %s (%s)", type(exc).__name__, exc, detail)
    name = type(exc).__name__
    # The library calls a reset after the request went out a ConnectError too; hyper's
    # error kind tells the two apart ("Connect": no connection, so nothing was sent).
    if isinstance(exc, ConnectError | ConnectTimeoutError) and "client error (Connect)" in detail:
        return UpstreamConnectError(f"Could not connect to the upstream ({name}).")
    if isinstance(exc, TimeoutError | RequestTimeoutError):
        return UpstreamTimeout(f"The upstream did not answer within {timeout_s:g}s.")
    if isinstance(exc, BodyDecodeError | DecodeError) or any(
        word in detail for word in _MALFORMED
    ):
        return UpstreamInvalidResponse(f"The upstream's answer is malformed ({name}).")
    if "closed" in detail or "reset" in detail or "IncompleteMessage" in detail:
        return UpstreamError("The upstream closed the connection before it finished answering.")
    return UpstreamError(f"The upstream connection failed ({name}).")


def _refuse_interim(resp: Response) -> None:
    # hyper skips 100-199 itself except a 101, after which the bytes are another protocol.
    if resp.status < 200:
        raise UpstreamInvalidResponse(
            f"The upstream answered HTTP {resp.status}, not a final answer."
        )


# A read may return at once while decompressed bytes are buffered: without a yield, a
# compression bomb's 16 MiB could inflate in one turn of the event loop.
YIELD_EVERY_BYTES = 1024 * 1024


async def _read_capped(reader: ResponseBodyReader, cap: int | None) -> bytes:
    parts: list[bytes] = []
    size = 0
    unyielded = 0
    while (chunk := await reader.read_chunk()) is not None:
        size += len(chunk)
        if cap is not None and size > cap:
            raise OutputTooLarge(f"The upstream's answer exceeds the {cap} byte limit.")
        parts.append(chunk.to_bytes())
        unyielded += len(chunk)
        if unyielded >= YIELD_EVERY_BYTES:
            unyielded = 0
            await asyncio.sleep(0)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def _read_prefix(reader: ResponseBodyReader, cap: int) -> bytes:
    """At most ``cap`` bytes of an error answer: its message is near the start, and what
    is left unread makes the client close the connection instead of reusing it."""
    parts: list[bytes] = []
    size = 0
    while size < cap and (chunk := await reader.read_chunk()) is not None:
        parts.append(chunk.to_bytes())
        size += len(chunk)
    return b"".join(parts)[:cap]


class StreamAnswer:
    """A streamed answer held open by ``UpstreamHttp.stream``."""

    __slots__ = ("_max_bytes", "_max_event_bytes", "_reader", "_timeout_s", "_unyielded",
                 "headers", "status_code")

    def __init__(
        self, resp: Response, timeout_s: float, max_event_bytes: int, max_bytes: int,
    ) -> None:
        self._reader = resp.body_reader
        self._timeout_s = timeout_s
        self._max_event_bytes = max_event_bytes
        self._max_bytes = max_bytes
        self._unyielded = 0
        self.status_code = resp.status
        self.headers: Mapping[str, str] = resp.headers

    async def read_error(self, cap: int = ERROR_BODY_BYTES) -> bytes:
        """The start of an error answer's body, at most ``cap`` bytes."""
        try:
            return await _read_prefix(self._reader, cap)
        except (PyreqwestError, TimeoutError) as exc:
            raise failure(exc, self._timeout_s) from exc

    async def _read(self) -> bytes:
        try:
            chunk = await self._reader.read_chunk()
        except (PyreqwestError, TimeoutError) as exc:
            raise failure(exc, self._timeout_s) from exc
        if chunk is None:
            return b""
        self._unyielded += len(chunk)
        if self._unyielded >= YIELD_EVERY_BYTES:  # see YIELD_EVERY_BYTES
            self._unyielded = 0
            await asyncio.sleep(0)
        return chunk.to_bytes()

    def lines(self) -> AsyncIterator[str]:
        """The body as SSE lines (see ``gateway.upstream.lines``)."""
        return sse_lines(
            self._read, max_event_bytes=self._max_event_bytes, max_bytes=self._max_bytes
        )


class UpstreamHttp:
    """The process's clients for every upstream call (one pool per route and timeout).

    ``keepalive_s``: how long an idle connection is kept for reuse (a TLS handshake saved
    per call). ``max_event_bytes`` / ``max_stream_bytes``: a stream's caps.
    """

    def __init__(
        self,
        connections: Connections,
        *,
        max_connections: int = 512,
        keepalive_s: float = 90.0,
        max_event_bytes: int = 2 * 1024 * 1024,
        max_stream_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.connections = connections
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self.max_event_bytes = max_event_bytes
        self.max_stream_bytes = max_stream_bytes
        self._clients: dict[tuple[Route, float], Client] = {}

    def _client(self, route: Route, timeout_s: float) -> Client:
        found = self._clients.get((route, timeout_s))
        if found is None:
            found = self._clients[(route, timeout_s)] = self._build(route, timeout_s)
        return found

    def _build(self, route: Route, timeout_s: float) -> Client:
        builder = (
            ClientBuilder()
            .max_connections(self.max_connections)
            .follow_redirects(False)
            .referer(False)
            .brotli(False)  # gzip and deflate, as an OpenAI-style upstream sends them
            .zstd(False)
            .connect_timeout(_seconds(min(CONNECT_TIMEOUT_S, timeout_s)))
            .read_timeout(_seconds(timeout_s))  # a stream's longest silence
        )
        if self.keepalive_s > 0:
            builder = builder.pool_idle_timeout(_seconds(self.keepalive_s))
        else:
            builder = builder.pool_max_idle_per_host(0)
        for cert in route.roots:
            builder = builder.add_root_certificate_pem(cert)
        if route.identity is not None:
            builder = builder.identity_pem(route.identity)
        if route.proxy is not None:
            builder = builder.proxy(ProxyBuilder.all(route.proxy))
        else:
            builder = builder.no_proxy()
        return builder.build()

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        route: Route,
        *,
        timeout_s: float,
        limit: int | None,
        error_limit: int = ERROR_BODY_BYTES,
    ) -> Reply:
        """POST and read the whole answer (see the module docstring for the bounds); of an
        error status, the first ``error_limit`` bytes."""
        request = (
            self._client(route, timeout_s).post(url).headers(headers).body_bytes(body)
            .timeout(_seconds(timeout_s)).build_streamed()
        )
        try:
            async with request as resp:
                _refuse_interim(resp)
                if resp.status >= 400:
                    data = await _read_prefix(resp.body_reader, error_limit)
                else:
                    data = await _read_capped(resp.body_reader, limit)
                return Reply(resp.status, resp.headers, data)
        except (PyreqwestError, TimeoutError) as exc:
            raise failure(exc, timeout_s) from exc

    @contextlib.asynccontextmanager
    async def stream(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        route: Route,
        *,
        timeout_s: float,
    ) -> AsyncIterator[StreamAnswer]:
        """POST and hold the streamed answer open; leaving the block early closes the
        connection (the upstream sees the disconnect and stops generating)."""
        request = (
            self._client(route, timeout_s).post(url).headers(headers).body_bytes(body)
            .streamed_read_buffer_limit(STREAM_READ_AHEAD_BYTES).build_streamed()
        )
        try:
            resp = await request.__aenter__()
        except (PyreqwestError, TimeoutError) as exc:
            raise failure(exc, timeout_s) from exc
        try:
            _refuse_interim(resp)
            yield StreamAnswer(resp, timeout_s, self.max_event_bytes, self.max_stream_bytes)
        finally:
            await request.__aexit__(None, None, None)

    async def aclose(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.close()

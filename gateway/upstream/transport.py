"""The gateway's one HTTP client for every upstream: aiohttp's pool under the adapters.

An adapter needs two things of HTTP: POST and read the whole answer (``post``), or POST and
read the answer line by line as it streams (``stream``). Everything below that (the
connection pool and keep-alive, TLS, proxies, interim 1xx answers, response framing,
incremental decompression) is aiohttp's. This module adds the gateway's bounds and turns
every failure into one of the upstream errors of ``gateway.upstream.errors``:

- a whole answer is read up to a cap on its decompressed bytes (past it: ``OutputTooLarge``;
  of an error status only its first ``error_limit`` bytes), and the call, head and body,
  within the model's ``timeout_s``;
- a stream is read through ``gateway.upstream.lines`` (caps on a line or event and on the
  whole body, strict UTF-8), with ``timeout_s`` as the longest silence between two reads;
- a final answer below 200 (a 101 protocol switch) is refused, never read as a body;
- a connection goes back to the pool only after a complete, well-framed answer (aiohttp
  closes one whose body was not read to its end).

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
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import ParamSpec

import aiohttp
from aiohttp.http_exceptions import ContentEncodingError
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.canonical.record import record
from gateway.offload import Offload
from gateway.settings import ModelConfig
from gateway.upstream.connection import Connections, Route
from gateway.upstream.errors import (
    OutputTooLarge,
    UpstreamConnectError,
    UpstreamError,
    UpstreamInvalidResponse,
    UpstreamTimeout,
)
from gateway.upstream.lines import sse_lines

__all__ = ["ERROR_BODY_BYTES", "Reply", "StreamAnswer", "Target", "Targets", "UpstreamHttp"]

_P = ParamSpec("_P")

logger = logging.getLogger("syntic.upstream")

# Of an upstream's error answer: enough for its message.
ERROR_BODY_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 10.0


@record
class Reply:
    """A whole answer from ``UpstreamHttp.post`` (``body`` decompressed, within its cap)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes


@record
class Target:
    """What is the same on every call to one model's endpoint, built once: aiohttp
    re-parses a ``str`` URL and copies a plain dict into a multidict on every call."""

    url: URL
    headers: CIMultiDictProxy[str]
    route: Route

    @classmethod
    def build(cls, url: str, headers: Mapping[str, str], route: Route) -> Target:
        return cls(URL(url), CIMultiDictProxy(CIMultiDict(headers)), route)

    def headers_with(self, extra: Iterable[tuple[str, str]]) -> Mapping[str, str]:
        """The fixed headers with ``extra`` set over them (a same-wire request's vendor
        headers); the fixed ones themselves when there are none."""
        merged: CIMultiDict[str] | None = None
        for name, value in extra:
            if merged is None:
                merged = CIMultiDict(self.headers)
            merged[name] = value
        return self.headers if merged is None else CIMultiDictProxy(merged)


class Targets:
    """An adapter's ``Target`` per model (and streamed or not), built on first use.

    Found by the model's identity: a frozen dataclass hashes all its fields on every
    lookup. An entry holds its model, so an id is never reused while cached; bounded,
    since a correction may run on a per-call copy of its model."""

    MAX_ENTRIES = 256

    def __init__(self, build: Callable[[ModelConfig, bool], Target]) -> None:
        self._build = build
        self._held: dict[tuple[int, bool], tuple[ModelConfig, Target]] = {}

    def get(self, model: ModelConfig, stream: bool = False) -> Target:
        held = self._held.get((id(model), stream))
        if held is not None and held[0] is model:
            return held[1]
        target = self._build(model, stream)
        if len(self._held) >= self.MAX_ENTRIES:
            self._held.clear()
        self._held[(id(model), stream)] = (model, target)
        return target


@functools.lru_cache(maxsize=64)
def _whole_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(CONNECT_TIMEOUT_S, timeout_s))


@functools.lru_cache(maxsize=64)
def _stream_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(
        total=None, sock_connect=min(CONNECT_TIMEOUT_S, timeout_s), sock_read=timeout_s
    )


def failure(exc: BaseException, timeout_s: float) -> UpstreamError | UpstreamTimeout:
    """The gateway's error for an aiohttp (or timeout) failure; the detail is logged only."""
    logger.info("upstream call failed: %s: %s", type(exc).__name__, exc)
    name = type(exc).__name__
    if isinstance(
        exc,
        aiohttp.ClientConnectorError
        | aiohttp.ClientHttpProxyError
        | aiohttp.ConnectionTimeoutError,
    ):
        return UpstreamConnectError(f"Could not connect to the upstream ({name}).")
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"The upstream did not answer within {timeout_s:g}s.")
    if isinstance(exc, aiohttp.ClientPayloadError) and isinstance(
        exc.__cause__, ContentEncodingError
    ):
        return UpstreamInvalidResponse(f"The upstream's answer is malformed ({name}).")
    if isinstance(exc, aiohttp.ClientResponseError):
        return UpstreamInvalidResponse(f"The upstream's answer is malformed ({name}).")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return UpstreamError("The upstream closed the connection before it finished answering.")
    return UpstreamError(f"The upstream connection failed ({name}).")


def _refuse_interim(resp: aiohttp.ClientResponse) -> None:
    # aiohttp skips 100-199 itself except a 101, after which the bytes are another protocol.
    if resp.status < 200:
        resp.close()
        raise UpstreamInvalidResponse(
            f"The upstream answered HTTP {resp.status}, not a final answer."
        )


# A read returns at once while inflated bytes are buffered, and aiohttp inflates the next
# step inside that read: without a yield, a compression bomb's 16 MiB would inflate in one
# turn of the event loop. Inflating this much of it takes a few milliseconds.
YIELD_EVERY_BYTES = 1024 * 1024


def _too_large(cap: int) -> OutputTooLarge:
    return OutputTooLarge(f"The upstream's answer exceeds the {cap} byte limit.")


async def _read_capped(content: aiohttp.StreamReader, cap: int | None) -> bytes:
    if content.is_eof():  # the whole answer is buffered already (a small one, nearly always)
        data = content.read_nowait()
        if cap is not None and len(data) > cap:
            raise _too_large(cap)
        return data
    parts: list[bytes] = []
    size = 0
    unyielded = 0
    while chunk := await content.readany():
        size += len(chunk)
        if cap is not None and size > cap:
            raise _too_large(cap)
        parts.append(chunk)
        unyielded += len(chunk)
        if unyielded >= YIELD_EVERY_BYTES:
            unyielded = 0
            await asyncio.sleep(0)
    return b"".join(parts)


async def _read_prefix(content: aiohttp.StreamReader, cap: int) -> bytes:
    """At most ``cap`` bytes of an error answer: its message is near the start, and what
    is left unread makes aiohttp close the connection instead of reusing it."""
    parts: list[bytes] = []
    size = 0
    while size < cap and (chunk := await content.readany()):
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)[:cap]


class StreamAnswer:
    """A streamed answer held open by ``UpstreamHttp.stream``."""

    __slots__ = (
        "_max_bytes",
        "_max_event_bytes",
        "_resp",
        "_timeout_s",
        "_unyielded",
        "headers",
        "status_code",
    )

    def __init__(
        self,
        resp: aiohttp.ClientResponse,
        timeout_s: float,
        max_event_bytes: int,
        max_bytes: int,
    ) -> None:
        self._resp = resp
        self._timeout_s = timeout_s
        self._max_event_bytes = max_event_bytes
        self._max_bytes = max_bytes
        self._unyielded = 0
        self.status_code = resp.status
        self.headers: Mapping[str, str] = resp.headers

    async def read_error(self, cap: int = ERROR_BODY_BYTES) -> bytes:
        """The start of an error answer's body, at most ``cap`` bytes."""
        try:
            return await _read_prefix(self._resp.content, cap)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise failure(exc, self._timeout_s) from exc

    async def _read(self) -> bytes:
        try:
            chunk = await self._resp.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise failure(exc, self._timeout_s) from exc
        self._unyielded += len(chunk)
        if self._unyielded >= YIELD_EVERY_BYTES:  # see YIELD_EVERY_BYTES
            self._unyielded = 0
            await asyncio.sleep(0)
        return chunk

    def lines(self) -> AsyncIterator[str]:
        """The body as SSE lines (see ``gateway.upstream.lines``)."""
        return sse_lines(
            self._read, max_event_bytes=self._max_event_bytes, max_bytes=self._max_bytes
        )


class UpstreamHttp:
    """One aiohttp session (one pool) for every upstream call of the process.

    ``keepalive_s``: how long an idle connection is kept for reuse (a TLS handshake saved
    per call). ``max_event_bytes`` / ``max_stream_bytes``: a stream's caps. The session is
    opened on first use, inside the running loop.
    """

    def __init__(
        self,
        connections: Connections,
        *,
        max_connections: int = 512,
        keepalive_s: float = 90.0,
        max_event_bytes: int = 2 * 1024 * 1024,
        max_stream_bytes: int = 64 * 1024 * 1024,
        offload: Offload | None = None,
    ) -> None:
        self.connections = connections
        self.offload = offload  # where a large request body is encoded (off the loop)
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self.max_event_bytes = max_event_bytes
        self.max_stream_bytes = max_stream_bytes
        self._session: aiohttp.ClientSession | None = None

    async def encode(
        self, size: int, build: Callable[_P, bytes], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> bytes:
        """``build(*args, **kwargs)``: a request body for an upstream, built and encoded off
        the event loop when ``size`` (the client JSON it came from) is large."""
        if self.offload is None or not self.offload.off_loop(size):
            return build(*args, **kwargs)
        return await self.offload.run(size, lambda: build(*args, **kwargs))

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self.max_connections,
            limit_per_host=0,
            keepalive_timeout=self.keepalive_s,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # upstream cookies never travel
            trust_env=False,  # proxies come from Connections (the settings' environment)
            timeout=aiohttp.ClientTimeout(total=None),
            raise_for_status=False,
        )
        return self._session

    async def post(
        self,
        url: str | URL,
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
        session = self._session or self._open()
        try:
            async with session.post(
                url,
                data=body,
                headers=headers,
                ssl=route.ssl,
                proxy=route.proxy,
                timeout=_whole_timeout(timeout_s),
                allow_redirects=False,
            ) as resp:
                _refuse_interim(resp)
                if resp.status >= 400:
                    data = await _read_prefix(resp.content, error_limit)
                else:
                    data = await _read_capped(resp.content, limit)
                return Reply(resp.status, resp.headers, data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise failure(exc, timeout_s) from exc

    @contextlib.asynccontextmanager
    async def stream(
        self,
        url: str | URL,
        body: bytes,
        headers: Mapping[str, str],
        route: Route,
        *,
        timeout_s: float,
    ) -> AsyncIterator[StreamAnswer]:
        """POST and hold the streamed answer open; leaving the block early closes the
        connection (the upstream sees the disconnect and stops generating)."""
        session = self._session or self._open()
        try:
            resp = await session.post(
                url,
                data=body,
                headers=headers,
                ssl=route.ssl,
                proxy=route.proxy,
                timeout=_stream_timeout(timeout_s),
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise failure(exc, timeout_s) from exc
        try:
            _refuse_interim(resp)
            yield StreamAnswer(resp, timeout_s, self.max_event_bytes, self.max_stream_bytes)
        finally:
            resp.release()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

"""The upstream HTTP client: httpx's API, and a lean path for the adapters' hot calls (#8).

httpx's own pool (httpcore) scans every pooled connection on each request and each
release, asking each one whether it is idle, expired or readable (encode/httpx#3215); at a
few dozen concurrent upstream calls that costs more CPU than the rest of the gateway. So:

- ``UpstreamClient.post_capped`` / ``open_stream`` (every call the OpenAI and Anthropic
  adapters make, through the module functions ``post_capped`` / ``open_stream``, which
  take any httpx client) go through ``gateway.upstream.pool``: asyncio protocols +
  httptools, no httpx objects, ~25 us of CPU per call instead of ~100 us through aiohttp
  and ~250 us through httpx over aiohttp;
- the rest of the httpx API (``client.stream``, ``post``, ``send``) still works, over
  ``AiohttpTransport``, aiohttp's pool under httpx. aiohttp is imported on its first use
  (~10 MB per process that the gateway's own calls never need).

Both raise the httpx exception a plain ``httpx.AsyncClient`` would raise in the same
situation, so the adapters' and the retry policy's classification holds: only a failure
to connect (``ConnectError`` / ``ConnectTimeout``) means the request was never sent.

Example::

    client = pooled_client(max_connections=512, timeout_s=600)
    reply = await client.post_capped(url, body, headers, httpx.Timeout(60), limit=None,
                                     error_limit=65536)
    async with client.stream("POST", url, content=body) as resp:   # the httpx API
        data = await resp.aread()
    await client.aclose()
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import httpx

from gateway.canonical.record import record
from gateway.upstream.lines import LineSplitter
from gateway.upstream.pool import PooledResponse, UpstreamPool

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "ERROR_BODY_BYTES",
    "AiohttpTransport",
    "HttpxLines",
    "LineStream",
    "Reply",
    "UpstreamClient",
    "open_stream",
    "pooled_client",
    "post_capped",
]


# Of an upstream's error answer: enough for its message (``error_limit`` of the adapters).
ERROR_BODY_BYTES = 64 * 1024


@functools.lru_cache(maxsize=64)
def model_timeout(timeout_s: float) -> httpx.Timeout:
    """The adapters' per-call timeout for a model (``timeout_s``, connect at most 10 s),
    built once per value instead of once per call (#8); never mutated by its users."""
    return httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))


def _translate(exc: BaseException) -> httpx.TransportError | None:
    """The httpx exception for an aiohttp/asyncio failure, or None if it is not one."""
    import aiohttp

    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, TimeoutError):  # aiohttp's pool wait ("connect" timeout)
        return httpx.PoolTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(message)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(message)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return httpx.UnsupportedProtocol(message)
    if isinstance(exc, aiohttp.ClientOSError):
        return httpx.ReadError(message)
    if isinstance(exc, aiohttp.ClientError):
        return httpx.NetworkError(message)
    return None


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    import aiohttp

    try:
        yield
    except (TimeoutError, aiohttp.ClientError) as exc:
        mapped = _translate(exc)
        if mapped is None:  # pragma: no cover - every ClientError/TimeoutError maps
            raise
        raise mapped from exc


def _client_timeout(timeout: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    import aiohttp

    return aiohttp.ClientTimeout(
        total=None,
        connect=timeout.get("pool"),
        sock_connect=timeout.get("connect"),
        sock_read=timeout.get("read"),
    )


@record
class Reply:
    """A whole response from ``UpstreamClient.post_capped``; ``body`` is None when it went
    over the cap (the connection is then closed, not reused)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes | None


class _Body(httpx.AsyncByteStream):
    """The response body as it arrives; closing releases the connection to the pool."""

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated():
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        # A fully read body returns the connection to the pool; a partly read one closes
        # it, so the upstream sees the disconnect and stops generating.
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


async def _request_body(request: httpx.Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream:  # type: ignore[union-attr]
        yield chunk


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` sending requests through one ``aiohttp`` pool.

    HTTP/1.1 only. The session is created on first use, inside the running event loop.
    Per-request timeouts come from httpx (``connect``, ``read``, ``pool``).
    """

    def __init__(
        self,
        *,
        limits: httpx.Limits | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self.ssl_context = ssl_context or httpx.create_ssl_context()
        self._session: aiohttp.ClientSession | None = None

    @property
    def session_opened(self) -> bool:
        """Whether the aiohttp session (and aiohttp itself) has been needed yet."""
        return self._session is not None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (opened on first use)."""
        return self._session or self._open()

    def _open(self) -> aiohttp.ClientSession:
        # Imported here: the gateway's own calls go through the lean pool, and aiohttp
        # costs ~10 MB of memory per process (#8), so only the httpx API's users pay it.
        import aiohttp

        limits = self.limits
        keepalive = limits.keepalive_expiry
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=5.0 if keepalive is None else keepalive,
            ssl=self.ssl_context,
            ttl_dns_cache=60,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # httpx decodes content-encoding itself
            skip_auto_headers=("User-Agent", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self.session
        timeout: dict[str, Any] = request.extensions.get("timeout", {})
        try:
            data: Any = request.content or None
        except httpx.RequestNotRead:
            data = _request_body(request)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower() != b"transfer-encoding"  # aiohttp frames the body itself
        ]
        with _translated():
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=data,
                allow_redirects=False,
                compress=False,
                timeout=_client_timeout(timeout),
            )
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class UpstreamClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose ``send`` goes straight to the transport.

    The gateway's upstream calls carry their credentials as explicit headers, never follow
    redirects and keep no cookies, so the client's auth flow, redirect loop and cookie jar
    (which builds an ``email.message`` per response to look for ``Set-Cookie``) are
    skipped: together they cost more CPU per call than the transport itself (#8).
    Parsed URLs are cached by their text (a handful of upstream endpoints; parsing one
    costs more than the rest of ``build_request``). Everything else (``stream``, ``post``,
    timeouts, headers, ``Response``) is httpx's own.
    """

    _MAX_URLS = 256

    def __init__(self, *, pool: UpstreamPool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._urls: dict[str, httpx.URL] = {}
        self.pool = pool or UpstreamPool()

    async def aclose(self) -> None:
        try:
            await self.pool.aclose()
        finally:
            await super().aclose()

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        if isinstance(url, str) and not kwargs.get("params"):
            parsed = self._urls.get(url)
            if parsed is None:
                if len(self._urls) >= self._MAX_URLS:
                    self._urls.clear()
                parsed = self._urls[url] = httpx.URL(url)
            url = parsed
        return super().build_request(method, url, **kwargs)

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        if self.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = await self._transport.handle_async_request(request)
        response.request = request
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response


    async def post_capped(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        timeout: httpx.Timeout,  # noqa: ASYNC109 - per request, as in httpx
        *,
        limit: int | None,
        error_limit: int | None,
    ) -> Reply:
        """POST and read the whole answer, at most ``limit`` bytes (``error_limit`` for a
        status >= 400), on the lean pool: no ``httpx.Request``/``Response`` objects.
        Failures raise the same httpx exceptions as ``stream``/``post``; a gzip or deflate
        answer is decoded."""
        if self.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = await self.pool.post(url, content, headers, timeout)
        try:
            cap = error_limit if response.status_code >= 400 else limit
            body = await response.read_upto(cap)
        finally:
            response.finish()
        return Reply(response.status_code, response.headers, body)

    @contextlib.asynccontextmanager
    async def open_stream(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        timeout: httpx.Timeout,  # noqa: ASYNC109 - per request, as in httpx
    ) -> AsyncIterator[LineStream]:
        """POST and hold the streamed answer open (``LineStream``), on the same pool as
        ``post_capped``; leaving the block early closes the connection."""
        if self.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = await self.pool.post(url, content, headers, timeout)
        try:
            yield LineStream(response)
        finally:
            response.finish()


class HttpxLines:
    """``LineStream``'s interface over a streamed ``httpx.Response`` (any other client)."""

    __slots__ = ("_resp", "headers", "status_code")

    def __init__(self, resp: httpx.Response) -> None:
        self._resp = resp
        self.status_code = resp.status_code
        self.headers: Mapping[str, str] = resp.headers

    async def read_capped(self, cap: int | None) -> bytes | None:
        """The rest of the body, or None past ``cap`` bytes."""
        return await _read_upto(self._resp, cap)

    def lines(self) -> AsyncIterator[str]:
        """The body as text lines (``httpx.Response.aiter_lines``)."""
        return self._resp.aiter_lines()


async def _read_upto(resp: httpx.Response, cap: int | None) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    async for part in resp.aiter_bytes():
        size += len(part)
        if cap is not None and size > cap:
            return None
        parts.append(part)
    return b"".join(parts)


def post_capped(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,
    *,
    limit: int | None,
    error_limit: int | None,
) -> Awaitable[Reply]:
    """An adapter's POST read whole: ``UpstreamClient.post_capped`` on the app's client
    (the lean pool), the same ``Reply`` through ``client.stream`` on any other httpx
    client. Returns the awaitable itself: no extra coroutine frame on the hot path."""
    if isinstance(client, UpstreamClient):
        return client.post_capped(
            url, content, headers, timeout, limit=limit, error_limit=error_limit
        )
    return _httpx_post(client, url, content, headers, timeout, limit, error_limit)


async def _httpx_post(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,  # noqa: ASYNC109 - per request, as in httpx
    limit: int | None,
    error_limit: int | None,
) -> Reply:
    async with client.stream(
        "POST", url, content=content, headers=headers, timeout=timeout
    ) as resp:
        cap = error_limit if resp.status_code >= 400 else limit
        body = await _read_upto(resp, cap)
    return Reply(resp.status_code, resp.headers, body)


def open_stream(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,
) -> AbstractAsyncContextManager[LineStream | HttpxLines]:
    """An adapter's streamed POST, held open: ``UpstreamClient.open_stream`` on the app's
    client, ``client.stream`` on any other httpx client."""
    if isinstance(client, UpstreamClient):
        return client.open_stream(url, content, headers, timeout)
    return _httpx_stream(client, url, content, headers, timeout)


@contextlib.asynccontextmanager
async def _httpx_stream(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,  # noqa: ASYNC109 - per request, as in httpx
) -> AsyncIterator[HttpxLines]:
    async with client.stream(
        "POST", url, content=content, headers=headers, timeout=timeout
    ) as resp:
        yield HttpxLines(resp)


class LineStream:
    """A streamed answer held open by ``UpstreamClient.open_stream``."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: PooledResponse) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def read_capped(self, cap: int | None) -> bytes | None:
        """The rest of the body, or None past ``cap`` bytes."""
        return await self._response.read_upto(cap)

    async def lines(self) -> AsyncIterator[str]:
        """The body as text lines, split like ``httpx.Response.aiter_lines``."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        splitter = LineSplitter()
        async for chunk in self._response.chunks():
            for line in splitter.feed(decoder.decode(chunk)):
                yield line
        for line in splitter.feed(decoder.decode(b"", final=True)):
            yield line
        for line in splitter.flush():
            yield line


def pooled_client(
    *,
    max_connections: int = 512,
    max_keepalive_connections: int = 128,
    timeout_s: float = 600.0,
    connect_timeout_s: float = 10.0,
) -> httpx.AsyncClient:
    """The app's one upstream client: httpx API, aiohttp pool (see module docstring)."""
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_keepalive_connections
    )
    return UpstreamClient(
        pool=UpstreamPool(max_connections=max_connections),
        transport=AiohttpTransport(limits=limits),
        timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        limits=limits,
    )

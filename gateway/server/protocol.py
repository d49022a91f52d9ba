"""The gateway's HTTP/1.1 protocol: uvicorn's own ``HttpToolsProtocol`` with three guards.

uvicorn runs the server and the protocol: parsing, the request cycle
(``RequestResponseCycle``, unchanged), framing, keep-alive, pipelining, flow control, the
bytes on the wire. ``EdgeProtocol`` adds only what uvicorn does not do:

- **a header deadline**: the request line and headers must arrive within
  ``timeout_keep_alive`` (``[server] keepalive_timeout_s``) of a connection opening or of
  a request's first byte, else ``408`` and the connection is closed;
- **a header size cap**: a request line and headers over
  ``h11_max_incomplete_event_size`` (``[server] max_header_bytes``) get ``431`` and the
  connection is closed;
- **body framing after a refused ``Upgrade`` / ``CONNECT``**: the request is plain HTTP,
  its body read by its own Content-Length or chunked framing, and the next request starts
  where that body ends.

Both knobs are uvicorn ``Config`` fields, so they hold under ``--workers``. No WebSocket
or h2c: ``serve_options(settings)`` (the uvicorn keyword arguments) sets ``ws="none"``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
import orjson

from gateway.server.compat import Config, HttpToolsProtocol, ServerState
from gateway.settings import Settings


def _refusal(status: int, reason: str, code: str, message: str) -> bytes:
    body = orjson.dumps(
        {
            "error": {"type": "invalid_request", "code": code, "message": message, "param": None},
            "request_id": None,
        }
    )
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _Refused(Exception):
    """Raised from a parser callback once a refusal is written: it stops the parse."""


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the edge guards (module docstring); uvicorn builds
    it per connection (``http="gateway.server.protocol:EdgeProtocol"``)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, object],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_cap = int(config.h11_max_incomplete_event_size or 32 * 1024)
        self.header_timer: asyncio.TimerHandle | None = None
        self.head_open = False  # a request line has begun and its headers have not ended
        self.heads = 0  # request heads begun on this connection
        self.head_bytes = 0  # the open head's line and headers, as the parser reports them
        self.head_chunks = 0  # bytes of the chunks that fell wholly inside the open head
        self.reframing = False  # feeding _reframe's stand-in head
        self.refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        self._unset_keepalive_if_required()
        inside = self.head_open
        heads = self.heads
        self._feed(data)
        if self.refused or self.transport.is_closing():
            return
        if inside and self.head_open and self.heads == heads:
            # httptools keeps a header's value until its line ends, reporting nothing:
            # a chunk that neither began nor ended the head is all head.
            self.head_chunks += len(data)
            if self._over_header_cap(self.head_chunks):
                return
        if self.cycle is None or self.cycle.response_complete:
            self._arm_header_deadline()  # bytes came, but no request is complete yet

    def _feed(self, data: bytes) -> None:
        rest: bytes | memoryview = data
        try:
            while True:
                try:
                    self.parser.feed_data(rest)
                    return
                except httptools.HttpParserUpgrade as upgrade:
                    self.logger.warning("Unsupported upgrade request.")
                    rest = memoryview(rest)[upgrade.args[0] :]
                    self._reframe()
                    if not rest:
                        return
        except httptools.HttpParserError:
            if self.refused:
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)

    def _reframe(self) -> None:
        """Continue a refused upgrade as plain HTTP. httptools ends an ``Upgrade`` or
        ``CONNECT`` request at its headers (what follows would be the new protocol), and
        uvicorn then parses the body as the next request: a request smuggled in a body
        (the same flaw, seen as a lost body: https://github.com/Kludex/uvicorn/issues/2722).
        A fresh parser is fed a stand-in head with the request's own framing headers, so
        llhttp reads the body by them, hands it to the running request, completes it and
        parses what follows as the next request. The stand-in's head callbacks are
        skipped (``reframing``): its request is already running."""
        version = self.parser.get_http_version()
        framing = [
            name + b": " + value + b"\r\n"
            for name, value in self.headers
            if name in (b"content-length", b"transfer-encoding")
        ]
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # as uvicorn's
        self.reframing = True
        try:
            self.parser.feed_data(
                b"POST / HTTP/" + version.encode() + b"\r\n" + b"".join(framing) + b"\r\n"
            )
        finally:
            self.reframing = False

    # httptools callbacks, several per request: each calls uvicorn's own by name, not
    # through super(), which builds a proxy object on every call

    def on_message_begin(self) -> None:
        if self.reframing:
            return
        HttpToolsProtocol.on_message_begin(self)
        self.head_open = True
        self.heads += 1
        self.head_bytes = 0
        self.head_chunks = 0

    def on_url(self, url: bytes) -> None:
        if self.reframing:
            return
        size = self.head_bytes = self.head_bytes + len(url)
        if size > self.header_cap and self._over_header_cap(size):
            raise _Refused
        HttpToolsProtocol.on_url(self, url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.reframing:
            return
        size = self.head_bytes = self.head_bytes + len(name) + len(value) + 4
        if size > self.header_cap and self._over_header_cap(size):
            raise _Refused
        HttpToolsProtocol.on_header(self, name, value)

    def on_headers_complete(self) -> None:
        if self.reframing:
            return
        self.head_open = False
        self._disarm_header_deadline()
        HttpToolsProtocol.on_headers_complete(self)

    def _should_upgrade(self) -> bool:
        return False  # no WebSocket routes: every upgrade is refused and served as HTTP

    def on_message_complete(self) -> None:
        if self.parser.should_upgrade() and not self.reframing:
            return  # a refused upgrade completes once _reframe has read its body
        HttpToolsProtocol.on_message_complete(self)

    # the guards

    def _arm_header_deadline(self) -> None:
        """``timeout_keep_alive`` from now for a request's line and headers. uvicorn bounds
        only an idle keep-alive connection and cancels that bound on any byte, so a
        slowloris client holds a connection by sending its headers slowly
        (``--timeout-request-start``, https://github.com/Kludex/uvicorn/issues/157, never
        came; a new connection had no bound at all,
        https://github.com/Kludex/uvicorn/issues/160)."""
        timeout = self.timeout_keep_alive
        if self.header_timer is None and timeout > 0:
            self.header_timer = self.loop.call_later(timeout, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_late(self) -> None:
        self.header_timer = None
        if not self.transport.is_closing():
            self._refuse(
                _refusal(
                    408,
                    "Request Timeout",
                    "request_timeout",
                    "The request headers did not arrive in time.",
                )
            )

    def _over_header_cap(self, size: int) -> bool:
        """431 past the cap: httptools takes headers of any size, and uvicorn's cap
        (``h11_max_incomplete_event_size``) binds only h11
        (https://github.com/Kludex/uvicorn/issues/157)."""
        if size <= self.header_cap:
            return False
        self._refuse(
            _refusal(
                431,
                "Request Header Fields Too Large",
                "headers_too_large",
                f"Request line and headers exceed {self.header_cap} bytes.",
            )
        )
        return True

    def _refuse(self, raw: bytes) -> None:
        self.refused = True
        self._disarm_header_deadline()
        if not self.transport.is_closing():
            self.transport.write(raw)
            self.transport.close()


def serve_options(settings: Settings) -> dict[str, Any]:
    """uvicorn keyword arguments for the edge: the protocol and its two knobs."""
    return {
        "http": "gateway.server.protocol:EdgeProtocol",
        "ws": "none",  # no WebSocket routes: an upgrade is served as plain HTTP
        "timeout_keep_alive": settings.keepalive_timeout_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
    }

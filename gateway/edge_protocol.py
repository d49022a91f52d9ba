"""uvicorn's httptools protocol with a header-read timeout and a header size cap (#9).

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``) but not the time a
client may take to send its request line and headers, nor (with httptools) their size:
a slowloris client could hold a connection open for ever, one byte at a time. This
protocol adds both, reusing two uvicorn ``Config`` fields so it works with ``--workers``
(each worker rebuilds it from the config, no extra state):

- ``timeout_keep_alive`` (``[server] keepalive_timeout_s``): the request line and headers
  must arrive within this many seconds of a connection opening or a request's first
  byte; otherwise ``408`` and the connection is closed;
- ``h11_max_incomplete_event_size`` (``[server] max_header_bytes``): the request line
  and headers together; larger -> ``431`` and the connection is closed.

Use ``serve_options(settings)`` for the uvicorn keyword arguments.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from typing import Any

import orjson

from gateway.settings import Settings

_HTTPTOOLS = importlib.util.find_spec("httptools") is not None


def _refusal(status: int, reason: str, code: str, message: str) -> bytes:
    body = orjson.dumps({
        "error": {"type": "invalid_request", "code": code, "message": message, "param": None},
        "request_id": None,
    })
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


if _HTTPTOOLS:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        """``HttpToolsProtocol`` plus the header timeout and size cap (module docstring)."""

        _header_timer: asyncio.TimerHandle | None = None
        _header_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        _refused = False

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # bytes of a new request on an idle keep-alive connection
            super().data_received(data)

        def on_message_begin(self) -> None:
            self._header_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._disarm()
            if not self._refused:
                super().on_headers_complete()

        def _limit(self) -> int:
            return int(self.config.h11_max_incomplete_event_size or 32 * 1024)

        @functools.cached_property
        def _header_cap(self) -> int:  # read once per connection, not per header (#8)
            return self._limit()

        def _count(self, n: int) -> None:
            self._header_bytes += n
            if self._header_bytes > self._header_cap:
                self._refuse(
                    _refusal(431, "Request Header Fields Too Large", "headers_too_large",
                             f"Request line and headers exceed {self._limit()} bytes.")
                )

        def _arm(self) -> None:
            self._disarm()
            timeout = float(self.config.timeout_keep_alive)
            if timeout > 0:
                self._header_timer = self.loop.call_later(timeout, self._on_header_timeout)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _on_header_timeout(self) -> None:
            self._header_timer = None
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being served; its body has its own deadline
            self._refuse(
                _refusal(408, "Request Timeout", "request_timeout",
                         "The request headers did not arrive in time.")
            )

        def _refuse(self, raw: bytes) -> None:
            self._refused = True
            self._disarm()
            if not self.transport.is_closing():
                self.transport.write(raw)
                self.transport.close()


def serve_options(settings: Settings) -> dict[str, Any]:
    """uvicorn keyword arguments for the edge limits (``http`` protocol and its two knobs)."""
    options: dict[str, Any] = {
        "timeout_keep_alive": settings.keepalive_timeout_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
    }
    if _HTTPTOOLS:
        options["http"] = "gateway.edge_protocol:GuardedHttpToolsProtocol"
    else:
        options["http"] = "h11"  # h11 enforces h11_max_incomplete_event_size itself
    return options

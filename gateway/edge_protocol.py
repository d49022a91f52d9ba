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

It also answers with a cheaper response head (#8): uvicorn's ``RequestResponseCycle.send``
runs two regular expressions, a lowercase and a list build per response header, and writes
the head and the body with two ``transport.write`` calls (two ``send`` syscalls). The
cycle installed here (``_FastCycle``) keeps its checks and its behaviour, but:

- a header name is validated once (an RFC 9110 token, else ``RuntimeError`` as uvicorn
  raises) and its ``b"name: "`` prefix cached (bounded); values are checked with one
  table ``bytes.translate`` (no CR, LF, NUL or other control byte but HTAB, else
  ``RuntimeError``). A refused response writes nothing; the connection is closed.
- the server's default headers (``date``, ``server`` and ``--header``) are rendered once
  per change (once a second), not per response;
- the head is held until the first body message and written with it in one
  ``transport.write``; a response that starts and then waits (SSE) has its head written
  at the end of the current event-loop iteration (``loop.call_soon``).

Content-length / chunked framing, keep-alive and ``connection: close``, HEAD, 204/304,
expect-100, flow control and the ``on_response`` callback are uvicorn's, unchanged.

Use ``serve_options(settings)`` for the uvicorn keyword arguments.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import types
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


# RFC 9110 tchar: the only bytes allowed in a header name.
_TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Bytes refused in a header value: controls but HTAB, and DEL (as uvicorn's HEADER_VALUE_RE).
_VALUE_BAD = bytes(range(0x00, 0x09)) + bytes(range(0x0A, 0x20)) + b"\x7f"
# Every refused byte mapped to NUL, every other byte to itself: ``0 in
# value.translate(_TO_NUL)`` is the check. A translation with a table and no deletions is
# one pass and returns the value itself when nothing changed; ``translate(None, bad)``
# builds a 256-entry table on every call (#8: ~7,000 instructions per response). The int
# ``0``, not ``b"\0"``: ``bytes.__contains__`` first tries its argument as an int, and a
# bytes argument costs a raised and cleared TypeError (~1,900 instructions) every time.
_TO_NUL = bytes(0 if b in _VALUE_BAD else b for b in range(256))
_NAMES_MAX = 256  # validated names cached; past this, names are validated every time
_names: dict[bytes, bytes] = {}  # raw header name -> b"lowercased-name: "
_CONTENT_LENGTH = b"content-length: "
_TRANSFER_ENCODING = b"transfer-encoding: "
_CONNECTION = b"connection: "
_FRAMING = frozenset({_CONTENT_LENGTH, _TRANSFER_ENCODING, _CONNECTION})


def _name_prefix(name: Any) -> bytes:
    """``b"lowercased-name: "`` for a valid header name, else ``RuntimeError``."""
    raw = bytes(name) if isinstance(name, bytearray | memoryview) else name
    if type(raw) is not bytes or not raw or raw.translate(None, _TCHAR):
        raise RuntimeError("Invalid HTTP header name.")
    prefix = raw.lower() + b": "
    if type(name) is bytes and len(_names) < _NAMES_MAX:
        _names[name] = prefix
    return prefix


def _check_value(value: Any) -> None:
    if 0 in value.translate(_TO_NUL):
        raise RuntimeError("Invalid HTTP header value.")


# (default_headers list, its rendering): the server swaps the list once a second (date).
# One tuple, replaced whole: servers in several threads (tests) may share it.
_defaults: list[tuple[Any, bytes]] = [(None, b"")]


def _render_defaults(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The server's default headers as one block, or None when one of them is a framing
    header (then they go through the per-header path, as uvicorn does)."""
    cached_for, rendered = _defaults[0]
    if headers is cached_for:
        return rendered
    parts: list[bytes] = []
    for name, value in headers:
        prefix = _name_prefix(name)
        _check_value(value)
        if prefix in _FRAMING:
            return None
        parts += (prefix, value, b"\r\n")
    rendered = b"".join(parts)
    _defaults[0] = (headers, rendered)
    return rendered


if _HTTPTOOLS:
    from uvicorn.protocols.http.httptools_impl import (
        STATUS_LINE,
        HttpToolsProtocol,
        RequestResponseCycle,
    )
    from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

    class _FastCycle(RequestResponseCycle):
        """``RequestResponseCycle`` with a cheaper ``send`` (module docstring)."""

        _head: bytes | None = None  # rendered, not yet written

        async def send(self, message: Any) -> None:
            if self.flow.write_paused and not self.disconnected:
                await self.flow.drain()
            if self.disconnected:
                return
            if not self.response_started:
                if message["type"] != "http.response.start":
                    raise RuntimeError(
                        f"Expected ASGI message 'http.response.start', but got "
                        f"'{message['type']}'."
                    )
                self.response_started = True
                self.waiting_for_100_continue = False
                self._start(message)
                asyncio.get_running_loop().call_soon(self._flush_head)
            elif not self.response_complete:
                if message["type"] != "http.response.body":
                    raise RuntimeError(
                        f"Expected ASGI message 'http.response.body', but got "
                        f"'{message['type']}'."
                    )
                self._body(message.get("body", b""), message.get("more_body", False))
            else:
                raise RuntimeError(
                    f"Unexpected ASGI message '{message['type']}' sent, after response "
                    f"already completed."
                )

        def _start(self, message: Any) -> None:
            status_code = message["status"]
            scope = self.scope
            if self.access_log and self.access_logger.isEnabledFor(logging.INFO):
                self.access_logger.info(
                    '%s - "%s %s HTTP/%s" %d', get_client_addr(scope), scope["method"],
                    get_path_with_query_string(scope), scope["http_version"], status_code,
                )
            parts = [STATUS_LINE[status_code]]
            defaults = _render_defaults(self.default_headers)
            if defaults is None:
                headers = self.default_headers + list(message.get("headers", ()))
            else:
                parts.append(defaults)
                headers = message.get("headers", ())
            names = _names
            framing = _FRAMING
            to_nul = _TO_NUL
            has_connection_close = False
            for name, value in headers:
                try:
                    prefix = names[name]
                except (KeyError, TypeError):
                    prefix = _name_prefix(name)
                if 0 in value.translate(to_nul):
                    raise RuntimeError("Invalid HTTP header value.")
                if prefix in framing:
                    if prefix == _CONTENT_LENGTH:
                        if self.chunked_encoding is None:
                            self.expected_content_length = int(value.decode())
                            self.chunked_encoding = False
                    elif prefix == _TRANSFER_ENCODING:
                        if value.lower() == b"chunked":
                            self.expected_content_length = 0
                            self.chunked_encoding = True
                    elif b"close" in [t.lower().strip() for t in value.split(b",")]:
                        self.keep_alive = False
                        has_connection_close = True
                parts += (prefix, value, b"\r\n")
            if not self.keep_alive and not has_connection_close:
                parts.append(b"connection: close\r\n")
            if (
                self.chunked_encoding is None
                and scope["method"] != "HEAD"
                and status_code not in (204, 304)
            ):
                self.chunked_encoding = True
                parts.append(b"transfer-encoding: chunked\r\n")
            parts.append(b"\r\n")
            self._head = b"".join(parts)

        def _flush_head(self) -> None:
            head = self._head
            if head is not None:
                self._head = None
                if not self.disconnected and not self.transport.is_closing():
                    self.transport.write(head)

        def _body(self, body: bytes, more_body: bool) -> None:
            head = self._head
            self._head = None
            if self.scope["method"] == "HEAD":
                self.expected_content_length = 0
                out = head
            elif self.chunked_encoding:
                chunk = [head] if head is not None else []
                if body:
                    chunk += (b"%x\r\n" % len(body), body, b"\r\n")
                if not more_body:
                    chunk.append(b"0\r\n\r\n")
                out = b"".join(chunk)
            else:
                num_bytes = len(body)
                if num_bytes > self.expected_content_length:
                    raise RuntimeError("Response content longer than Content-Length")
                self.expected_content_length -= num_bytes
                out = head + body if head is not None else body
            if out:
                self.transport.write(out)
            if not more_body:
                if self.expected_content_length != 0:
                    raise RuntimeError("Response content shorter than Content-Length")
                self.response_complete = True
                self.message_event.set()
                if not self.keep_alive:
                    self.transport.close()
                self.on_response()

    def _building_fast_cycles(fn: Any) -> Any:
        """uvicorn's ``on_headers_complete`` with its ``RequestResponseCycle`` global bound to
        ``_FastCycle``: the same code, which then creates the cycle as a ``_FastCycle``.

        Swapping ``__class__`` on a cycle already built (what this did before) leaves the
        instance's attribute layout keyed to the old class, so CPython 3.11 can't
        specialise any attribute access on it: +33,000 instructions per request against
        stock uvicorn, measured with a trivial app under callgrind (#8). When uvicorn's
        code no longer names the global (or closes over variables), it is used as is and
        the swap below remains the fallback."""
        code = fn.__code__
        if code.co_freevars or "RequestResponseCycle" not in code.co_names:
            return fn
        env = dict(fn.__globals__)
        env["RequestResponseCycle"] = _FastCycle
        return types.FunctionType(code, env, fn.__name__, fn.__defaults__, fn.__closure__)

    _on_headers_complete = _building_fast_cycles(HttpToolsProtocol.on_headers_complete)

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

        _awaiting_headers = False

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                # Bytes of a new request on an idle keep-alive connection: its headers must
                # arrive within the deadline. Armed only if this chunk did not complete them
                # (#8: usually it does, and a timer set and cancelled per request is saved).
                self._awaiting_headers = True
                super().data_received(data)
                if self._awaiting_headers and not self._refused:
                    self._awaiting_headers = False
                    self._arm()
                return
            super().data_received(data)

        def on_message_begin(self) -> None:
            self._header_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            # uvicorn's on_header inlined (one call per request header, #8)
            self._header_bytes += len(name) + len(value) + 4
            if self._header_bytes > self._header_cap:
                self._count(0)  # refuses
            name = name.lower()
            if name == b"expect" and value.lower() == b"100-continue":
                self.expect_100_continue = True
            self.headers.append((name, value))

        def on_headers_complete(self) -> None:
            self._awaiting_headers = False
            self._disarm()
            if not self._refused:
                _on_headers_complete(self)
                cycle = self.cycle
                if type(cycle) is RequestResponseCycle:  # fallback; its task has not started
                    cycle.__class__ = _FastCycle

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

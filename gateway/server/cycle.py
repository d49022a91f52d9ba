"""One HTTP request and its response on the edge protocol (``gateway.server.protocol``): the
ASGI ``receive`` and ``send`` callables, and the response head they write.

``send`` checks what uvicorn's ``RequestResponseCycle.send`` checks and writes the same
bytes, with a cheaper head:

- a header name is validated once (an RFC 9110 token, else ``RuntimeError`` as uvicorn
  raises) and its ``b"name: "`` prefix cached (bounded); values are checked with one table
  ``bytes.translate`` (no CR, LF, NUL or other control byte but HTAB, else
  ``RuntimeError``). A refused response writes nothing; the connection is closed.
- the server's default headers (``date``, ``server`` and ``--header``) are rendered once
  per change (once a second), not per response;
- the head is held until the first body message and written with it in one
  ``transport.write``; a chunked response that starts and then waits (SSE) has its head
  written at the end of the current event-loop iteration (``loop.call_soon``).

``receive`` returns the buffered body at once when the whole request is in (no
``asyncio.Event`` per request); otherwise it waits, as uvicorn's does, for more body, the
response's end or a disconnect. Imported by the edge protocol only when httptools is
installed (uvicorn's status lines come from its httptools module).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from gateway.server.compat import (
    STATUS_LINE,
    FlowControl,
    ServerState,
    get_client_addr,
    get_path_with_query_string,
)


class Connection(Protocol):
    """What a request cycle reads from its connection (``EdgeProtocol``), declared here so
    that the cycle does not import the protocol that imports it."""

    @property
    def transport(self) -> asyncio.Transport: ...
    @property
    def flow(self) -> FlowControl: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def server_state(self) -> ServerState: ...
    @property
    def access_log(self) -> bool: ...
    @property
    def expect_100_continue(self) -> bool: ...
    def on_response_complete(self) -> None: ...


_logger = logging.getLogger("uvicorn.error")
_access_logger = logging.getLogger("uvicorn.access")

# RFC 9110 tchar: the only bytes allowed in a header name.
_TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Bytes refused in a header value: controls but HTAB, and DEL (as uvicorn's HEADER_VALUE_RE).
_VALUE_BAD = bytes(range(0x00, 0x09)) + bytes(range(0x0A, 0x20)) + b"\x7f"
# Every refused byte mapped to NUL, every other byte to itself: ``0 in
# value.translate(_TO_NUL)`` is the check. A translation with a table and no deletions is
# one pass and returns the value itself when nothing changed; ``translate(None, bad)``
# builds a 256-entry table on every call. The int ``0``, not ``b"\0"``:
# ``bytes.__contains__`` first tries its argument as an int, and a bytes argument costs a
# raised and cleared TypeError every time.
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


def _noop() -> None:
    return None

class EdgeCycle:
    """One request and its response: the ASGI ``receive`` and ``send`` callables.

    ``send`` checks what uvicorn's ``RequestResponseCycle.send`` checks and writes the
    same bytes, with the cheaper head (module docstring). ``receive`` returns the
    buffered body at once when the whole request has arrived (the usual case: no
    event, no future); otherwise it waits, as uvicorn's does, for more body, the
    response's end or a disconnect."""

    __slots__ = (
        "access_log",
        "body",
        "chunked_encoding",
        "default_headers",
        "disconnected",
        "expected_content_length",
        "flow",
        "head",
        "keep_alive",
        "loop",
        "method",
        "more_body",
        "on_response",
        "ready",
        "response_complete",
        "response_started",
        "scope",
        "transport",
        "waiters",
        "waiting_for_100_continue",
    )

    def __init__(
        self, scope: dict[str, Any], method: str, protocol: Connection, keep_alive: bool
    ) -> None:
        self.scope = scope
        self.method = method
        self.transport = protocol.transport
        self.flow = protocol.flow
        self.loop = protocol.loop
        self.default_headers = protocol.server_state.default_headers
        self.access_log = protocol.access_log
        self.on_response: Any = protocol.on_response_complete
        self.keep_alive = keep_alive
        self.waiting_for_100_continue = protocol.expect_100_continue
        self.disconnected = False
        self.body: bytes | bytearray = b""
        self.more_body = True
        self.response_started = False
        self.response_complete = False
        self.chunked_encoding: bool | None = None
        self.expected_content_length = 0
        self.head: bytes | None = None  # rendered, not yet written
        self.ready = False  # something arrived that receive() has not returned yet
        self.waiters: list[asyncio.Future[None]] | None = None

    async def run_asgi(self, app: Any) -> None:
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            _logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self.send_500_response()
            else:
                self.transport.close()
        else:
            if result is not None:
                _logger.error("ASGI callable should return None, but returned '%s'.",
                              result)
                self.transport.close()
            elif not self.response_started and not self.disconnected:
                _logger.error("ASGI callable returned without starting response.")
                await self.send_500_response()
            elif not self.response_complete and not self.disconnected:
                _logger.error("ASGI callable returned without completing response.")
                self.transport.close()
        finally:
            self.on_response = _noop

    async def send_500_response(self) -> None:
        await self.send({
            "type": "http.response.start",
            "status": 500,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"21"),
                (b"connection", b"close"),
            ],
        })
        await self.send(
            {"type": "http.response.body", "body": b"Internal Server Error", "more_body": False}
        )

    def wake(self) -> None:
        """More body, the end of the request, or a disconnect: receive() may return."""
        self.ready = True
        waiters = self.waiters
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def receive(self) -> dict[str, Any]:
        if self.waiting_for_100_continue and not self.transport.is_closing():
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.waiting_for_100_continue = False
        if not self.disconnected and not self.response_complete:
            flow = self.flow
            if flow.read_paused:
                flow.resume_reading()
            if not self.ready:
                waiter: asyncio.Future[None] = self.loop.create_future()
                waiters = self.waiters
                if waiters is None:
                    waiters = self.waiters = []
                waiters.append(waiter)
                try:
                    await waiter
                finally:
                    waiters.remove(waiter)
            self.ready = False
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body = self.body
        self.body = b""
        if type(body) is bytearray:
            body = bytes(body)
        return {"type": "http.request", "body": body, "more_body": self.more_body}

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
            if self.chunked_encoding:
                # A streamed body may come much later (SSE): the head goes out at the
                # end of this loop iteration if no body has come with it by then. A
                # Content-Length response's head waits for its body (no callback per
                # JSON response; it comes in the same step).
                self.loop.call_soon(self._flush_head)
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
        if self.access_log and _access_logger.isEnabledFor(logging.INFO):
            scope: Any = self.scope
            _access_logger.info(
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
            and self.method != "HEAD"
            and status_code not in (204, 304)
        ):
            self.chunked_encoding = True
            parts.append(b"transfer-encoding: chunked\r\n")
        parts.append(b"\r\n")
        self.head = b"".join(parts)

    def _flush_head(self) -> None:
        head = self.head
        if head is not None:
            self.head = None
            if not self.disconnected and not self.transport.is_closing():
                self.transport.write(head)

    def _body(self, body: bytes, more_body: bool) -> None:
        head = self.head
        self.head = None
        if self.method == "HEAD":
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
            self.wake()
            if not self.keep_alive:
                self.transport.close()
            self.on_response()


def complete_body_size(receive: Any) -> int | None:
    """See ``gateway.server.protocol.complete_body_size``."""
    cycle = getattr(receive, "__self__", None)
    if type(cycle) is EdgeCycle and not cycle.more_body:
        return len(cycle.body)
    return None

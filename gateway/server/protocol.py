"""The gateway's HTTP/1.1 server protocol for uvicorn: httptools parsing, edge guards
and a lean request path.

uvicorn runs the server (sockets, workers, lifespan, graceful shutdown, the default
``date`` header); ``EdgeProtocol`` is what it builds per connection instead of its own
``HttpToolsProtocol``, whose bytes on the wire it reproduces (framing, keep-alive and
``connection: close``, HEAD, 204/304, expect-100, pipelining, flow control, 400 on a
malformed request, 503 past ``limit_concurrency``; ``tests/gateway/test_edge_protocol.py``
compares the two over real sockets). What it adds:

- **a header deadline**: the request line and headers must arrive within
  ``timeout_keep_alive`` (``[server] keepalive_timeout_s``) of a connection opening or a
  request's first byte; otherwise ``408`` and the connection is closed. uvicorn bounds
  only idle keep-alive connections, so a slowloris client could hold one for ever;
- **a header size cap**: request line and headers over ``h11_max_incomplete_event_size``
  (``[server] max_header_bytes``) get ``431`` and the connection is closed.

Both reuse uvicorn ``Config`` fields, so they work with ``--workers``. What it saves,
per request (figures in ``docs/performance.md``):

- one deadline per connection (keep-alive or headers) and at most one timer
  (``gateway.server.timers.MovingDeadline``), instead of a timer set and cancelled per request;
- the request's ``receive`` and ``send`` (``gateway.server.cycle.EdgeCycle``): the body
  returned at once when it is all in, and a cheaper response head written with the body;
- slotted per-request state, the scope built in one step.

No WebSocket or h2c: ``serve_options`` sets ``ws="none"``, and a request with
``Upgrade`` (or ``CONNECT``) is plain HTTP, its body read by its own Content-Length or
chunked framing like any other's. httptools ends such a request at its headers, and
uvicorn (without a WebSocket library) then parses the body as the next request: a request
smuggled in a body. ``EdgeProtocol._reframe`` reads the body instead. Use
``serve_options(settings)`` for the uvicorn keyword arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.util
import logging
import urllib.parse
from collections import deque
from typing import Any

import orjson

from gateway.server.timers import MovingDeadline
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
    import httptools

    from gateway.server.compat import (
        HIGH_WATER_LIMIT,
        STATUS_LINE,
        TRACE_LOG_LEVEL,
        Config,
        FlowControl,
        ServerState,
        get_local_addr,
        get_remote_addr,
        is_ssl,
        service_unavailable,
    )
    from gateway.server.cycle import EdgeCycle
    from gateway.server.cycle import complete_body_size as _complete_body_size

    _logger = logging.getLogger("uvicorn.error")
    _access_logger = logging.getLogger("uvicorn.access")  # EdgeCycle logs to it too

    # What the connection's one deadline timer enforces (see EdgeProtocol._on_deadline).
    _NO_DEADLINE = 0
    _KEEP_ALIVE = 1  # idle between requests: closed silently, as uvicorn does
    _HEADERS = 2  # a request's line and headers are arriving: 408, then closed

    class EdgeProtocol(asyncio.Protocol):
        """HTTP/1.1 over httptools for uvicorn's server: the edge guards and the lean
        request path (module docstring). Built by uvicorn per connection, as its own
        ``HttpToolsProtocol`` is (``http="gateway.server.protocol:EdgeProtocol"``)."""

        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            if not config.loaded:
                config.load()
            self.config = config
            self.app = config.loaded_app
            self.loop = _loop or asyncio.get_event_loop()
            self.access_log = _access_logger.hasHandlers()
            self.parser = self._new_parser()
            self.reframing = False  # feeding _reframe's stand-in head
            self.root_path: str = config.root_path
            self.asgi_version = config.asgi_version
            self.limit_concurrency = config.limit_concurrency
            self.reset_contextvars = bool(getattr(config, "reset_contextvars", False))
            self.app_state = app_state
            self.server_state = server_state
            self.connections: set[Any] = server_state.connections
            self.tasks = server_state.tasks
            self.timeout = float(config.timeout_keep_alive)
            self.header_cap = int(config.h11_max_incomplete_event_size or 32 * 1024)

            self.transport: asyncio.Transport = None  # type: ignore[assignment]
            self.flow: FlowControl = None  # type: ignore[assignment]
            self.server: tuple[str, int | None] | None = None
            self.client: tuple[str, int] | None = None
            self.scheme = "http"
            self.pipeline: deque[tuple[EdgeCycle, Any]] = deque()
            self.cycle: EdgeCycle | None = None
            # the request being parsed
            self.url = b""
            self.headers: list[tuple[bytes, bytes]] = []
            self.header_bytes = 0
            self.expect_100_continue = False
            self.awaiting_headers = False
            self.refused = False
            # one deadline and at most one timer per connection (_on_deadline)
            self.deadline_kind = _NO_DEADLINE
            self.deadline = MovingDeadline(self.loop, self._on_deadline)

        # asyncio.Protocol

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.connections.add(self)
            self.transport = transport
            self.flow = FlowControl(transport)
            self.server = get_local_addr(transport)
            self.client = get_remote_addr(transport)
            self.scheme = "https" if is_ssl(transport) else "http"
            if _logger.level <= TRACE_LOG_LEVEL:
                _logger.log(TRACE_LOG_LEVEL, "%sHTTP connection made", self._peer())
            self._set_deadline(_HEADERS)

        def connection_lost(self, exc: Exception | None) -> None:
            self.connections.discard(self)
            if _logger.level <= TRACE_LOG_LEVEL:
                _logger.log(TRACE_LOG_LEVEL, "%sHTTP connection lost", self._peer())
            cycle = self.cycle
            if cycle is not None:
                if not cycle.response_complete:
                    cycle.disconnected = True
                cycle.wake()
            if self.flow is not None:
                self.flow.resume_writing()
            if exc is None:
                self.transport.close()
            self.deadline_kind = _NO_DEADLINE
            self.deadline.cancel()
            self.parser = None  # type: ignore[assignment]

        def _peer(self) -> str:
            return f"{self.client[0]}:{self.client[1]} - " if self.client else ""

        def eof_received(self) -> None:
            pass

        def pause_writing(self) -> None:
            self.flow.pause_writing()

        def resume_writing(self) -> None:
            self.flow.resume_writing()

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            if self.deadline_kind == _KEEP_ALIVE:
                # The first bytes of a new request on an idle keep-alive connection: its
                # headers must arrive within the deadline, which is set only if this chunk
                # did not complete them (it usually does).
                self.deadline_kind = _NO_DEADLINE
                self.awaiting_headers = True
                self._feed(data)
                if self.awaiting_headers and not self.refused:
                    self.awaiting_headers = False
                    self._set_deadline(_HEADERS)
                return
            self._feed(data)

        def _new_parser(self) -> httptools.HttpRequestParser:
            parser = httptools.HttpRequestParser(self)
            # answer the first of pipelined requests even if the client half-closed
            with contextlib.suppress(AttributeError):  # httptools < 0.6.3 lacks it
                parser.set_dangerous_leniencies(lenient_data_after_close=True)
            return parser

        def _feed(self, data: bytes) -> None:
            rest: bytes | memoryview = data
            try:
                while True:
                    try:
                        self.parser.feed_data(rest)
                        return
                    except httptools.HttpParserUpgrade as upgrade:
                        if self.refused:
                            return
                        # No WebSocket or h2c here (serve_options sets ws="none"): the
                        # request is plain HTTP, and what follows its headers is its
                        # body and the next requests, never another protocol.
                        _logger.warning("Unsupported upgrade request.")
                        rest = memoryview(rest)[upgrade.args[0]:]  # no copy
                        self._reframe()
                        if not rest:
                            return
            except httptools.HttpParserError:
                msg = "Invalid HTTP request received."
                _logger.warning(msg)
                self._send_400(msg)

        def _reframe(self) -> None:
            """Continue an upgrade request as plain HTTP: httptools ends such a request at
            its headers (what follows would be the new protocol), so a body would be
            parsed as the next request. A fresh parser is fed a stand-in head with the
            request's own framing headers: llhttp then reads the body by them, hands it
            to the request, completes it, and parses what follows as the next request.
            The stand-in's own callbacks only reset the parse state for the next request;
            its headers complete no request (``reframing``)."""
            version = self.parser.get_http_version()
            framing = [
                name + b": " + value + b"\r\n"
                for name, value in self.headers
                if name in (b"content-length", b"transfer-encoding")
            ]
            self.parser = self._new_parser()
            self.reframing = True
            try:
                self.parser.feed_data(
                    b"POST / HTTP/" + version.encode() + b"\r\n" + b"".join(framing) + b"\r\n"
                )
            finally:
                self.reframing = False

        # httptools callbacks

        def on_message_begin(self) -> None:
            self.url = b""
            self.headers = []
            self.header_bytes = 0
            self.expect_100_continue = False

        def on_url(self, url: bytes) -> None:
            self.url += url
            self._count(len(url))

        def on_header(self, name: bytes, value: bytes) -> None:
            self.header_bytes += len(name) + len(value) + 4
            if self.header_bytes > self.header_cap:
                self._count(0)  # refuses
            name = name.lower()
            if name == b"expect" and value.lower() == b"100-continue":
                self.expect_100_continue = True
            self.headers.append((name, value))

        def on_headers_complete(self) -> None:
            if self.reframing:  # _reframe's stand-in head: its request is already running
                return
            self.awaiting_headers = False
            self.deadline_kind = _NO_DEADLINE
            if self.refused:
                return
            parser = self.parser
            http_version = parser.get_http_version()
            method = parser.get_method().decode("ascii")
            parsed_url = httptools.parse_url(self.url)
            raw_path = parsed_url.path
            path = raw_path.decode("ascii")
            if "%" in path:
                path = urllib.parse.unquote(path)
            root_path = self.root_path
            scope = {
                "type": "http",
                "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
                "http_version": http_version,
                "server": self.server,
                "client": self.client,
                "scheme": self.scheme,
                "root_path": root_path,
                "headers": self.headers,
                "state": self.app_state.copy(),
                "method": method,
                "path": root_path + path if root_path else path,
                "raw_path": root_path.encode("ascii") + raw_path if root_path else raw_path,
                "query_string": parsed_url.query or b"",
            }
            limit = self.limit_concurrency
            if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
                app = service_unavailable
                _logger.warning("Exceeded concurrency limit.")
            else:
                app = self.app
            existing = self.cycle
            self.cycle = cycle = EdgeCycle(
                scope, method, self, http_version != "1.0" and parser.should_keep_alive()
            )
            if existing is None or existing.response_complete:
                self._run(cycle, app)
            else:  # pipelined: queued until the one before it has been answered
                self.flow.pause_reading()
                self.pipeline.appendleft((cycle, app))

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                return
            buffered = cycle.body
            if not buffered:
                cycle.body = buffered = body
            elif type(buffered) is bytes:  # a second piece: a bytearray from here on
                cycle.body = buffered = bytearray(buffered)
                buffered += body
            else:
                buffered += body
            if len(buffered) > HIGH_WATER_LIMIT:
                self.flow.pause_reading()
            cycle.wake()

        def on_message_complete(self) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete or self.parser.should_upgrade():
                return  # an upgrade request is completed after _reframe reads its body
            cycle.more_body = False
            cycle.wake()

        # requests and responses

        def _run(self, cycle: EdgeCycle, app: Any) -> None:
            if self.reset_contextvars:  # uvicorn's opt-in (https://github.com/python/cpython/issues/140947)
                task = self.loop.create_task(cycle.run_asgi(app), context=contextvars.Context())
            else:
                task = self.loop.create_task(cycle.run_asgi(app))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

        def on_response_complete(self) -> None:
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            flow = self.flow
            if flow.read_paused:
                flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._run(cycle, app)
            else:
                self._set_deadline(_KEEP_ALIVE)

        def shutdown(self) -> None:
            """Called by the server to start a graceful shutdown."""
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                self.transport.close()
            else:
                cycle.keep_alive = False

        # the deadline: keep-alive idle, and the header read timeout

        def _set_deadline(self, kind: int) -> None:
            """From now, ``timeout`` seconds for the next request's first byte (keep-alive)
            or for the rest of its headers (one timer per connection, not one set and
            cancelled per request: ``MovingDeadline``)."""
            timeout = self.timeout
            if timeout <= 0:
                if kind == _KEEP_ALIVE:  # uvicorn closes at once
                    self.transport.close()
                return
            self.deadline_kind = kind
            self.deadline.set(self.loop.time() + timeout)

        def _on_deadline(self) -> None:
            kind = self.deadline_kind
            if kind == _NO_DEADLINE or self.transport.is_closing():
                return
            if kind == _KEEP_ALIVE:
                self.transport.close()
            else:
                self._refuse(
                    _refusal(408, "Request Timeout", "request_timeout",
                             "The request headers did not arrive in time.")
                )

        # refusals

        def _count(self, n: int) -> None:
            self.header_bytes += n
            if self.header_bytes > self.header_cap:
                self._refuse(
                    _refusal(431, "Request Header Fields Too Large", "headers_too_large",
                             f"Request line and headers exceed {self.header_cap} bytes.")
                )

        def _refuse(self, raw: bytes) -> None:
            self.refused = True
            self.deadline_kind = _NO_DEADLINE
            if not self.transport.is_closing():
                self.transport.write(raw)
                self.transport.close()

        def _send_400(self, msg: str) -> None:
            content = [STATUS_LINE[400]]
            for name, value in self.server_state.default_headers:
                content.extend([name, b": ", value, b"\r\n"])
            content.extend([
                b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(msg)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                msg.encode("ascii"),
            ])
            self.transport.write(b"".join(content))
            self.transport.close()


def complete_body_size(receive: Any) -> int | None:
    """The request body's size when ``receive`` is an ``EdgeProtocol`` request's and the
    whole body has already arrived (0 once it has been read); None otherwise (another
    server, or more body to come). Then no body deadline or size cap needs to wrap
    ``receive``: the body is in, and its size is known."""
    return _complete_body_size(receive) if _HTTPTOOLS else None


def serve_options(settings: Settings) -> dict[str, Any]:
    """uvicorn keyword arguments for the edge limits (``http`` protocol and its two knobs)."""
    options: dict[str, Any] = {
        "timeout_keep_alive": settings.keepalive_timeout_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
    }
    if _HTTPTOOLS:
        options["http"] = "gateway.server.protocol:EdgeProtocol"
        options["ws"] = "none"  # no WebSocket routes; an upgrade is served as plain HTTP
    else:
        options["http"] = "h11"  # h11 enforces h11_max_incomplete_event_size itself
    return options

"""Pure-ASGI middleware: request ids, the body cap, the one error handler, the ledger hook.

``GatewayMiddleware`` wraps the whole app:

- gives every request a ``RequestContext`` (``scope["state"]["ctx"]``) with a fresh
  ``request_id``, echoed as ``x-request-id`` on every response, errors included;
- refuses a body over ``max_body_bytes`` with 413 *before* buffering it (Content-Length
  checked up front; chunked bodies counted as they arrive);
- turns any ``GatewayError`` into the unified envelope, and any other exception into a
  logged 500 envelope (never a traceback to the client);
- records one ``UsageRecord`` per metered request (``POST /v1/...``) whatever the outcome:
  into the ledger's local spool just before the response's last body message goes out (so
  no answered request can lose its row to a crash), or after the request ends when no
  response completed; and hands the ledger to the context, which spools a provisional
  row before each upstream call;
- with ``limits`` (issue #9, ``gateway.middleware.limits``): refuses a metered request over
  ``max_inflight`` with 503 ``overloaded`` + ``retry-after``, bounds the body read
  (408 ``request_timeout``, connection closed) and gives every request one deadline
  (``request_timeout_s``) that holds until its response starts (504 past it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.context import RequestContext
from gateway.errors import GatewayError, PayloadTooLarge, UpstreamTimeout
from gateway.middleware.limits import (
    Deadlines,
    EdgeLimits,
    InflightGate,
    TaskDeadline,
    body_deadline,
    reset_request_deadline,
    set_request_deadline,
)
from gateway.server.protocol import complete_body_size
from gateway.usage.base import Ledger

logger = logging.getLogger("syntic.http")
_rng = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rng.seed)
_random_bits = _rng.getrandbits

_JSON = (b"content-type", b"application/json")


class RequestObserver(Protocol):
    """Told when each HTTP request starts and finishes (``observability.ops.RequestObserver``)."""

    def started(self, ctx: RequestContext) -> None: ...
    def finished(self, ctx: RequestContext) -> None: ...


def new_request_id() -> str:
    """``req_`` + 12 hex digits of the wall clock in milliseconds + 16 random hex digits.

    Time-ordered, so the ledger's primary key (``usage_records.request_id``) grows at the
    end of its B-tree instead of at a random place: on SQLite, inserting 200,000 rows cost
    27.6 us per row with random ids and 8.4 us with these (#8,
    ``tests/bench/ledger_insert_bench.py``; PostgreSQL, 100,000 rows: 22.5 and 17.9 us).
    64 random bits per millisecond keep ids unique across a fleet; they come from a
    private PRNG (seeded from os.urandom, reseeded in forked workers, never reseeded by
    tests that seed ``random``) instead of one urandom syscall per request: a request id
    must be unique, not secret."""
    return f"req_{int(time.time() * 1000):012x}{_random_bits(64):016x}"


def request_context(scope: Scope) -> RequestContext:
    """The context the middleware attached to this request."""
    ctx: RequestContext = scope["state"]["ctx"]
    return ctx


def error_body(exc: GatewayError, request_id: str) -> bytes:
    return orjson.dumps(exc.envelope(request_id))


class GatewayMiddleware:
    """The outermost middleware (see module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        ledger: Callable[[], Ledger | None],
        observer: RequestObserver | None = None,
        limits: EdgeLimits | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.ledger = ledger
        self.observer = observer
        self.limits = limits
        self.gate = InflightGate(limits.max_inflight if limits else 0)
        self._deadlines: Deadlines | None = None  # the request and body deadlines' timer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        ctx = RequestContext.start(new_request_id(), path)
        scope.setdefault("state", {})["ctx"] = ctx
        if self.observer is not None:
            self.observer.started(ctx)
        metered = scope["method"] == "POST" and path.startswith("/v1/")
        ledger = self.ledger() if metered else None
        ctx.journal = ledger
        started = False
        recorded = ledger is None
        deadline: TaskDeadline | None = None

        async def send_wrapper(message: Message) -> None:
            nonlocal started, recorded
            if message["type"] == "http.response.start":
                started = True
                if deadline is not None:
                    deadline.disarm()  # a started response is bounded elsewhere
                ctx.status = message["status"]
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *ctx.response_headers()]
            elif not recorded and not message.get("more_body", False):
                # The response completes with this message: its row is spooled first.
                recorded = True
                assert ledger is not None
                ledger.record(ctx.usage_record())
            await send(message)

        try:
            # The usual request has all its body in by now (EdgeProtocol says so): no body
            # deadline or size cap to wrap receive in, the size is known (#8).
            buffered = complete_body_size(receive)
            size = buffered if buffered is not None else _content_length(scope)
            if size is not None and size > self.max_body_bytes:
                raise PayloadTooLarge(self._too_large_message())
            if self.limits is None:
                await self.app(
                    scope, receive if buffered is not None else self._capped(receive),
                    send_wrapper,
                )
            else:
                if metered:
                    self.gate.enter()  # not a context manager: a generator per request (#8)
                try:
                    budget = self.limits.request_timeout_s
                    token = set_request_deadline(time.monotonic() + budget if budget else None)
                    try:
                        loop = asyncio.get_running_loop()
                        task = asyncio.current_task()
                        assert task is not None
                        deadlines = self._deadlines
                        if deadlines is None or deadlines.loop is not loop:
                            deadlines = self._deadlines = Deadlines(loop)
                        if buffered is None:
                            receive = self._capped(body_deadline(
                                receive, self.limits.body_timeout_s, loop=loop, task=task,
                                deadlines=deadlines,
                            ))
                        deadline = (
                            deadlines.arm(task, loop.time() + budget) if budget else None
                        )
                        await self.app(scope, receive, send_wrapper)
                    except asyncio.CancelledError:
                        if deadline is None or not deadline.expired_here():
                            raise
                        raise UpstreamTimeout(
                            f"The request did not complete within its {budget:g}s deadline."
                        ) from None
                    finally:
                        if deadline is not None:
                            deadline.disarm()
                        deadline = None  # an error response after this is not bounded
                        reset_request_deadline(token)
                finally:
                    if metered:
                        self.gate.leave()
        except GatewayError as exc:
            ctx.error_code = exc.code
            if started:
                ctx.status = ctx.status or exc.status
                logger.warning("error after response start %s: %s", ctx.request_id, exc.code)
            else:
                await self._send_error(exc, ctx, send_wrapper)
        except ClientDisconnect:
            # The client went away before its body arrived: nothing to answer, not an
            # internal error (recorded as 499 below).
            ctx.error_code = "client_disconnected"
            logger.info("client disconnected during request %s", ctx.request_id)
        except Exception:
            logger.exception("unhandled error in request %s", ctx.request_id)
            ctx.error_code = "internal_error"
            if not started:
                internal = GatewayError("Internal server error.", code="internal_error")
                await self._send_error(internal, ctx, send_wrapper)
        finally:
            if not recorded:
                if not started and ctx.status == 0:
                    ctx.status = 499  # client went away before any response
                assert ledger is not None
                ledger.record(ctx.usage_record())
            if self.observer is not None:
                self.observer.finished(ctx)  # metrics and the request log line

    def _too_large_message(self) -> str:
        return f"Request body is larger than the {self.max_body_bytes} byte limit."

    def _capped(self, receive: Receive) -> Receive:
        limit = self.max_body_bytes
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(self._too_large_message())
            return message

        return capped

    @staticmethod
    async def _send_error(exc: GatewayError, ctx: RequestContext, send: Send) -> None:
        body = error_body(exc, ctx.request_id)
        headers: list[tuple[bytes, bytes]] = [
            _JSON,
            (b"content-length", str(len(body)).encode()),
        ]
        headers.extend((k.lower().encode(), v.encode()) for k, v in exc.headers.items())
        await send({"type": "http.response.start", "status": exc.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive) -> bytes:
    """The whole request body, read straight from ``receive`` (what Starlette's
    ``Request.body()`` does, without its per-chunk generator: #8). Raises Starlette's
    ``ClientDisconnect`` if the client goes away first, as ``Request.body()`` does."""
    message = await receive()
    if message["type"] != "http.request":
        raise ClientDisconnect()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class JsonResponse(Response):
    """A 200 ``application/json`` response of ready bytes: what ``Response(body,
    media_type="application/json")`` sends, byte for byte, without its per-call render
    and header building (#8: the two chat endpoints answer with one per request)."""

    media_type = "application/json"

    def __init__(self, body: bytes) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [(b"content-length", b"%d" % len(body)), _JSON]


def json_bytes(payload: Any) -> bytes:
    return orjson.dumps(payload)

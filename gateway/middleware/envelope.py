"""Pure-ASGI middleware: request ids, the body cap, the one error handler, the ledger hook.

``GatewayMiddleware`` wraps the whole app:

- gives every request a ``RequestContext`` (``scope["state"]["ctx"]``) with a fresh
  ``request_id``, echoed as ``x-request-id`` on every response, errors included;
- refuses a body over ``max_body_bytes`` with 413 *before* buffering it (Content-Length
  checked up front, and the server frames the body by it; chunked bodies counted as they
  arrive);
- turns any ``GatewayError`` into the unified envelope in the path's dialect vocabulary
  (``errors.dialect_of``) with ``x-should-retry`` where a retry cannot help, and any other
  exception into a logged 500 envelope (never a traceback to the client);
- records one ``UsageRecord`` per metered request (``POST /v1/...``) whatever the outcome:
  into the ledger's local spool just before the response's last body message goes out (so
  no answered request can lose its row to a crash), or after the request ends when no
  response completed; and hands the ledger to the context, which spools a provisional
  row before each upstream call;
- refuses a metered request with 503 ``ledger_unavailable`` + ``retry-after`` while the
  ledger is not ``accepting`` (too many rows neither its spool nor its database took):
  no request is answered without a row kept somewhere; the refusal itself has no row;
- with ``limits`` (``gateway.middleware.limits``): refuses a metered request over
  ``max_inflight`` slots (one per upstream call it may run at once: ``n`` for ``n``
  choices, taken at admission) with 503 ``overloaded`` + ``retry-after``, bounds the body read
  (408 ``request_timeout``, connection closed) and gives every request one deadline
  (``request_timeout_s``, kept as ``RequestContext.deadline``) that holds until its
  response starts (504 past it).

What endpoints share (``JsonResponse``, ``read_body``, ``error_body``) is in ``gateway.web``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.context import RequestContext
from gateway.errors import GatewayError, Overloaded, PayloadTooLarge, UpstreamTimeout, dialect_of
from gateway.middleware.limits import EdgeLimits, InflightGate, default_key_limit
from gateway.server.deadlines import Deadlines, TaskDeadline, body_deadline
from gateway.usage.base import Ledger
from gateway.web import JSON_HEADER, content_length, error_body, rate_limit_headers

logger = logging.getLogger("syntic.http")
# Random bytes from the OS CSPRNG, read 4 KiB at a time (one syscall per 512 ids) and
# never reused: a forked worker starts with an empty buffer, so no two processes share one.
_ENTROPY_CHUNK = 4096
_entropy = bytearray()


def _forget_entropy() -> None:
    _entropy.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_entropy)


def _random_hex8() -> str:
    """Eight bytes of fresh OS randomness, as 16 hex digits."""
    if len(_entropy) < 8:
        _entropy[:] = os.urandom(_ENTROPY_CHUNK)
    out = _entropy[-8:].hex()
    del _entropy[-8:]
    return out


class RequestObserver(Protocol):
    """Told when each HTTP request starts and finishes (``observability.observer``)."""

    def started(self, ctx: RequestContext) -> None: ...
    def finished(self, ctx: RequestContext) -> None: ...


def new_request_id() -> str:
    """``req_`` + 12 hex digits of the wall clock in milliseconds + 16 random hex digits.

    Time-ordered, so the ledger's primary key (``usage_records.request_id``) grows at the
    end of its B-tree instead of at a random place, which makes inserts markedly cheaper
    (``tests/bench/ledger_insert_bench.py``; figures in ``docs/performance.md``).
    The 64 random bits come from the OS CSPRNG (``os.urandom``, what ``secrets`` uses),
    read in batches: the response id a client gets is this id's digits, and an id drawn
    from a seeded PRNG could be predicted from the ones before it."""
    return f"req_{int(time.time() * 1000):012x}{_random_hex8()}"


class _Exchange:
    """One request's response side: the ``send`` the app gets, what it has sent so far,
    and whether the request's ledger row is recorded. A slotted object and one bound
    method instead of a closure over six cells."""

    __slots__ = ("ctx", "deadline", "downstream", "ledger", "metered", "recorded", "started")

    def __init__(
        self, ctx: RequestContext, ledger: Ledger | None, metered: bool, downstream: Send
    ) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.metered = metered
        self.downstream = downstream
        self.started = False
        self.recorded = ledger is None
        self.deadline: TaskDeadline | None = None

    def send(self, message: Message) -> Awaitable[None]:
        # Not a coroutine: the downstream send's awaitable is returned, one coroutine
        # fewer per message; what raises here raises inside the caller's ``await``.
        if message["type"] == "http.response.start":
            self.started = True
            deadline = self.deadline
            if deadline is not None:
                deadline.disarm()  # a started response is bounded elsewhere
            ctx = self.ctx
            ctx.status = message["status"]
            message = dict(message)
            headers = [*message.get("headers", ()), *ctx.response_headers()]
            if ctx.rate is not None:
                headers.extend(rate_limit_headers(ctx.rate))
            message["headers"] = headers
        elif not self.recorded and not message.get("more_body", False):
            # The response completes with this message: its row is spooled first.
            self.recorded = True
            assert self.ledger is not None
            self.ledger.record(self.ctx.usage_record())
        return self.downstream(message)


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
        self.gate = (
            InflightGate(
                limits.max_inflight,
                default_key_limit(limits.max_inflight, limits.max_concurrent_per_key),
                limits.model_share_per_key,
            )
            if limits is not None
            else InflightGate(0)
        )
        self._deadlines: Deadlines | None = None  # the request and body deadlines' timer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = self._open(scope, send)
        send = exchange.send
        try:
            ledger = exchange.ledger
            if ledger is not None and not ledger.accepting:
                exchange.recorded = True  # its row would be one more the ledger can't keep
                raise _ledger_unavailable()
            if not self._check_size(scope):
                receive = self._capped(receive)
            if self.limits is None:
                await self.app(scope, receive, send)
            else:
                if exchange.metered:
                    self.gate.enter(exchange.ctx)  # no context manager: no generator
                try:
                    receive = self._arm(exchange, receive)
                    await self.app(scope, receive, send)
                except asyncio.CancelledError:
                    if not self._expired(exchange):
                        raise
                    raise self._timeout_error() from None
                finally:
                    self._disarm(exchange)
                    if exchange.metered:
                        self.gate.leave(exchange.ctx)
        except GatewayError as exc:
            await self._fail(exchange, exc)
        except ClientDisconnect:
            # The client went away before its body arrived: nothing to answer, not an
            # internal error (recorded as 499 below).
            exchange.ctx.error_code = "client_disconnected"
            logger.info("client disconnected during request %s", exchange.ctx.request_id)
        except Exception:
            logger.exception("unhandled error in request %s", exchange.ctx.request_id)
            exchange.ctx.error_code = "internal_error"
            if not exchange.started:
                internal = GatewayError("Internal server error.", code="internal_error")
                await self._send_error(internal, exchange.ctx, send)
        finally:
            self._close(exchange)

    # The steps of one request, in order.

    def _open(self, scope: Scope, send: Send) -> _Exchange:
        """A request context with a fresh id, the observer told, the ledger handed over."""
        path: str = scope["path"]
        ctx = RequestContext.start(new_request_id(), path)
        scope.setdefault("state", {})["ctx"] = ctx
        if self.observer is not None:
            self.observer.started(ctx)
        metered = scope["method"] == "POST" and path.startswith("/v1/")
        ledger = self.ledger() if metered else None
        ctx.journal = ledger
        return _Exchange(ctx, ledger, metered, send)

    def _check_size(self, scope: Scope) -> bool:
        """413 up front when the declared size is over the cap; whether a size is declared.
        A body with one is framed by it (the server reads that many bytes and no more); a
        chunked body is counted as it is read (``_capped``)."""
        size = content_length(scope)
        if size is None:
            return False
        if size > self.max_body_bytes:
            raise PayloadTooLarge(self._too_large_message())
        return True

    def _arm(self, exchange: _Exchange, receive: Receive) -> Receive:
        """The request deadline set (on the context, for the layers below, and as a task
        deadline until the response starts); the body read bounded."""
        assert self.limits is not None
        budget = self.limits.request_timeout_s
        exchange.ctx.deadline = time.monotonic() + budget if budget else None
        task = asyncio.current_task()
        assert task is not None
        # The task's loop is the running one; asking for that too would cost a getpid().
        loop = task.get_loop()
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            deadlines = self._deadlines = Deadlines(loop)
        receive = body_deadline(
            receive,
            self.limits.body_timeout_s,
            loop=loop,
            task=task,
            deadlines=deadlines,
        )
        if budget:
            exchange.deadline = deadlines.arm(task, loop.time() + budget)
        return receive

    @staticmethod
    def _expired(exchange: _Exchange) -> bool:
        """Whether a cancellation is the request deadline's (else it came from outside)."""
        deadline = exchange.deadline
        return deadline is not None and deadline.expired_here()

    def _timeout_error(self) -> UpstreamTimeout:
        assert self.limits is not None
        budget = self.limits.request_timeout_s
        return UpstreamTimeout(f"The request did not complete within its {budget:g}s deadline.")

    @staticmethod
    def _disarm(exchange: _Exchange) -> None:
        deadline = exchange.deadline
        if deadline is not None:
            deadline.disarm()
        exchange.deadline = None  # an error response after this is not bounded

    async def _fail(self, exchange: _Exchange, exc: GatewayError) -> None:
        """The error envelope, unless a response already started (then only logged)."""
        ctx = exchange.ctx
        ctx.error_code = exc.code
        if exchange.started:
            ctx.status = ctx.status or exc.status
            logger.warning("error after response start %s: %s", ctx.request_id, exc.code)
        else:
            await self._send_error(exc, ctx, exchange.send)

    def _close(self, exchange: _Exchange) -> None:
        """The ledger row of a request no response completed; the observer told."""
        ctx = exchange.ctx
        if not exchange.recorded:
            if not exchange.started and ctx.status == 0:
                ctx.status = 499  # client went away before any response
            assert exchange.ledger is not None
            exchange.ledger.record(ctx.usage_record())
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
        body = error_body(exc, ctx.request_id, dialect_of(ctx.endpoint))
        headers: list[tuple[bytes, bytes]] = [
            JSON_HEADER,
            (b"content-length", str(len(body)).encode()),
        ]
        headers.extend((k.lower().encode(), v.encode()) for k, v in exc.response_headers().items())
        await send({"type": "http.response.start", "status": exc.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _ledger_unavailable() -> Overloaded:
    return Overloaded(
        "Usage records cannot be stored right now; retry shortly.",
        code="ledger_unavailable",
        headers={"retry-after": "1"},
    )

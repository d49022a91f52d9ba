"""``Idempotency-Key`` for non-streaming ``POST /v1/chat/completions``, ``/v1/messages`` and
``/v1/responses``.

A client that retries a request (a timeout, a dropped connection) with the same
``Idempotency-Key`` gets the stored response back instead of a second upstream call:

- the first request with a key *claims* it (per API key id + idempotency key), runs, and
  stores its response (status, body, ``content-type``, ``x-syntic-schema-retries``) for
  ``idempotency_ttl_s`` (24 h by default);
- the claim is a *lease* of ``idempotency_lease_s`` that the running owner renews (every
  third of it): a claim whose owner died (SIGKILL, OOM kill, lost node) expires within
  one lease, and the next attempt runs afresh;
- a repeat with the same body gets the stored response, marked ``idempotent-replayed: true``;
  one that arrives while the first is still running waits for it (so concurrent duplicates
  make exactly one upstream call), for at most ``idempotency_wait_s`` (and never past its
  own deadline), then gets 409 ``idempotency_in_progress`` with ``retry-after``; a waiter
  stops as soon as its client disconnects or the process starts shutting down;
- the same key with a different body (or endpoint) is refused: 422
  ``idempotency_key_reused``;
- failures worth retrying (5xx, 408, 429) are not stored: the claim is released and the
  next attempt runs afresh.

Storage (``gateway.middleware.idempotency_store``) is Redis when ``redis_url`` is set, else
in process (bounded LRU, per worker process: use Redis for a fleet or ``--workers``). If
Redis cannot be asked, the request is refused with 503 ``idempotency_unavailable`` and
``retry-after``: without the shared claim a second replica could make a second upstream
call for the same key, which is what the key exists to prevent (counted in
``fallbacks``). Streaming requests pass through unchanged.

Example::

    app = Starlette(middleware=[..., Middleware(AuthMiddleware, ...),
                                Middleware(IdempotencyMiddleware, settings=settings)])
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Awaitable

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.context import RequestContext
from gateway.errors import (
    Conflict,
    GatewayError,
    InvalidRequest,
    Overloaded,
    UnprocessableOutput,
    dialect_of,
)
from gateway.middleware.idempotency_store import (
    IdempotencyStore,
    IdempotencyStoreUnavailable,
    StoredResponse,
    store_for,
)
from gateway.server.draining import Draining
from gateway.service import ChatService
from gateway.settings import Settings
from gateway.web import content_length, error_body, has_header, read_body, request_context

log = logging.getLogger("syntic.idempotency")

HEADER = b"idempotency-key"
MAX_KEY_LENGTH = 255
_KEEP_HEADERS = frozenset({"content-type", "x-syntic-schema-retries"})
_NOT_STORED = frozenset({408, 429})
_POLL_S = 0.02
_POLL_MAX_S = 0.25  # a waiter asks again at least this often


class IdempotencyKeyReused(UnprocessableOutput):
    default_code = "idempotency_key_reused"


class IdempotencyInProgress(Conflict):
    """Another attempt with this key is still running (409, ``retry-after``)."""


class IdempotencyMiddleware:
    """Runs inside ``AuthMiddleware`` (the principal is known); see module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        store: IdempotencyStore | None = None,
        draining: Draining | None = None,
        paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.paths = paths  # the routes that honour the header (gateway.routes.table)
        self.ttl_s = settings.idempotency_ttl_s
        self.lease_s = settings.idempotency_lease_s
        self.wait_s = settings.idempotency_wait_s
        self.draining = draining if draining is not None else Draining()
        self._settings = settings
        self._store = store

    @property
    def store(self) -> IdempotencyStore:
        if self._store is None:  # created on the serving loop (redis.asyncio binds to it)
            self._store = store_for(self._settings)
        return self._store

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself: a request without the header is handed to the inner
        # app's awaitable directly, one coroutine frame fewer on every suspension.
        key = _idempotency_key(scope, self.paths)
        if key is None:
            return self.app(scope, receive, send)
        return self._idempotent(scope, receive, send, key)

    async def _idempotent(self, scope: Scope, receive: Receive, send: Send, key: str) -> None:
        ctx = request_context(scope)
        # A large body's key pays before anything looks inside it (a key over its limit
        # costs no parse, nor its upload when it is declared); a stored answer replayed
        # gives the tokens back.
        service: ChatService = scope["app"].service
        declared = content_length(scope)
        if declared is not None and service.offload.off_loop(declared):
            await service.admit_body(ctx, declared // 4)
        body = await read_body(receive)
        size = service.offload.cost(body)
        if ctx.charged is None and service.offload.off_loop(size):
            await service.admit_body(ctx, len(body) // 4)
        charged = ctx.charged is not None
        replay = _replaying(body, receive)
        if charged:  # looked at in another process: see gateway.offload
            depth = service.settings.max_json_depth
            streaming = (await service.offload.inspect(body, size, depth)).streaming
        else:
            streaming = _streaming(body)
        fingerprint = await service.offload.run(size, _fingerprint, scope["path"], body)
        if streaming:
            await self.app(scope, replay, send)
            return
        principal = ctx.principal.key_id if ctx.principal is not None else "anonymous"
        store_key = f"{principal}:{hashlib.sha256(key.encode()).hexdigest()}"
        owner = ctx.request_id  # unique per attempt: only this attempt renews or releases
        waiting = _Waiting(receive, self.draining, self._wait_limit(ctx))
        try:
            while True:
                try:
                    claim = await self.store.claim(store_key, fingerprint, owner, self.lease_s)
                except IdempotencyStoreUnavailable:
                    raise Overloaded(
                        "Idempotency-Key cannot be checked right now; retry shortly.",
                        code="idempotency_unavailable",
                        headers={"retry-after": "1"},
                    ) from None
                if claim is None:
                    waiting.stop()
                    await self._run_and_store(scope, replay, send, store_key, fingerprint, owner)
                    return
                if claim.fingerprint != fingerprint:
                    raise IdempotencyKeyReused(
                        "This Idempotency-Key was already used with a different request body.",
                        param="Idempotency-Key",
                    )
                if isinstance(claim, StoredResponse):
                    if charged:
                        await service.refused_early(ctx)  # one request, no tokens
                    await _send_stored(claim, send)
                    return
                # Another attempt is running: wait for its answer, its lease to lapse, our
                # client to leave, shutdown, or the end of the wait.
                if not await waiting.pause():
                    retry = max(1, math.ceil(min(claim.lease_left_s, self.lease_s)))
                    raise IdempotencyInProgress(
                        "A request with this Idempotency-Key is still in progress; retry "
                        "after the retry-after delay.",
                        param="Idempotency-Key",
                        headers={"retry-after": str(retry)},
                    )
        finally:
            waiting.stop()

    def _wait_limit(self, ctx: RequestContext) -> float:
        left = ctx.remaining_s()
        if left is None:
            return float(self.wait_s)
        return max(0.0, min(float(self.wait_s), float(left) - _DEADLINE_MARGIN_S))

    async def _run_and_store(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: str,
        fingerprint: str,
        owner: str,
    ) -> None:
        status = 0
        headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []
        complete = False

        async def capture(message: Message) -> None:
            nonlocal status, complete
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", ()):
                    text = name.decode("latin-1").lower()
                    if text in _KEEP_HEADERS and text != "x-syntic-schema-retries":
                        headers.append((text, value.decode("latin-1")))
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                complete = not message.get("more_body", False)
            await send(message)

        stored: StoredResponse | None = None
        renewing = asyncio.create_task(self._renew(key, owner), name="syntic-idem-lease")
        try:
            await self.app(scope, receive, capture)
            if complete and status < 500 and status not in _NOT_STORED:
                headers.extend(_context_headers(scope))
                stored = StoredResponse(fingerprint, status, tuple(headers), b"".join(chunks))
        except GatewayError as exc:
            if status == 0 and exc.status < 500 and exc.status not in _NOT_STORED:
                ctx = request_context(scope)
                envelope_headers = [("content-type", "application/json")]
                envelope_headers.extend(exc.response_headers().items())
                envelope_headers.extend(_context_headers(scope))
                stored = StoredResponse(
                    fingerprint,
                    exc.status,
                    tuple(envelope_headers),
                    error_body(exc, ctx.request_id, dialect_of(ctx.endpoint)),
                )
            raise
        finally:
            renewing.cancel()
            await asyncio.shield(self._settle(key, owner, stored))

    async def _renew(self, key: str, owner: str) -> None:
        """Keep this attempt's lease alive while it runs."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not await self.store.renew(key, owner, self.lease_s):
                log.warning("idempotency: lease on a running request could not be renewed")

    async def _settle(self, key: str, owner: str, stored: StoredResponse | None) -> None:
        if stored is not None:
            await self.store.complete(key, owner, stored, self.ttl_s)
        else:
            await self.store.release(key, owner)


_DEADLINE_MARGIN_S = 0.25  # a waiter answers 409 this long before its request deadline


class _Waiting:
    """A waiter's pauses between claim attempts: growing from ``_POLL_S`` to ``_POLL_MAX_S``,
    within ``limit_s`` in all; ``pause()`` is False once the wait is over (time is up or
    the process is stopping) and raises ``ClientDisconnect`` when the client has left."""

    def __init__(self, receive: Receive, draining: Draining, limit_s: float) -> None:
        self._receive = receive
        self._draining = draining
        self._until = time.monotonic() + limit_s
        self._poll = _POLL_S
        self._client: asyncio.Task[Message] | None = None
        self._stopping: asyncio.Task[None] | None = None

    async def pause(self) -> bool:
        left = self._until - time.monotonic()
        if left <= 0 or self._draining.active:
            return False
        if self._client is None:
            # The body is in: the next message can only be the client's disconnect.
            self._client = asyncio.ensure_future(self._receive())
            self._stopping = asyncio.ensure_future(self._draining.wait())
        assert self._stopping is not None
        await asyncio.wait(
            {self._client, self._stopping},
            timeout=min(self._poll, left),
            return_when=asyncio.FIRST_COMPLETED,
        )
        self._poll = min(self._poll * 2, _POLL_MAX_S)
        if self._client.done():
            raise ClientDisconnect()
        return not self._draining.active

    def stop(self) -> None:
        for task in (self._client, self._stopping):
            if task is not None and not task.done():
                task.cancel()
        self._client = self._stopping = None


def _context_headers(scope: Scope) -> list[tuple[str, str]]:
    """``x-syntic-schema-retries``: added by the outer middleware, so not captured above."""
    ctx = request_context(scope)
    if ctx.enforced and ctx.tally is not None:
        return [("x-syntic-schema-retries", str(ctx.tally.retries))]
    return []


def _idempotency_key(scope: Scope, paths: frozenset[str]) -> str | None:
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in paths:
        return None
    if not has_header(scope, HEADER):  # most requests carry none: one C pass, no loop
        return None
    for name, value in scope["headers"]:
        if name == HEADER:
            key: str = value.decode("latin-1").strip()
            if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
                raise InvalidRequest(
                    f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable characters.",
                    code="invalid_idempotency_key",
                    param="Idempotency-Key",
                )
            return key
    return None


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _fingerprint(path: str, body: bytes) -> str:
    return hashlib.sha256(path.encode() + b"\0" + body).hexdigest()


def _streaming(body: bytes) -> bool:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and data.get("stream") is True


async def _send_stored(stored: StoredResponse, send: Send) -> None:
    headers = [(k.encode(), v.encode()) for k, v in stored.headers]
    headers.append((b"content-length", str(len(stored.body)).encode()))
    headers.append((b"idempotent-replayed", b"true"))
    await send({"type": "http.response.start", "status": stored.status, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body})

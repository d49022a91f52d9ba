"""``Idempotency-Key`` for non-streaming ``POST /v1/chat/completions`` and ``/v1/messages``.

A client that retries a request (a timeout, a dropped connection) with the same
``Idempotency-Key`` gets the stored response back instead of a second upstream call:

- the first request with a key *claims* it (per API key id + idempotency key), runs, and
  stores its response (status, body, ``content-type``, ``x-syntic-schema-retries``) for
  ``idempotency_ttl_s`` (24 h by default);
- a repeat with the same body gets the stored response, marked ``idempotent-replayed: true``;
  one that arrives while the first is still running waits for it (so concurrent duplicates
  make exactly one upstream call);
- the same key with a different body (or endpoint) is refused: 422
  ``idempotency_key_reused``;
- failures worth retrying (5xx, 408, 429) are not stored: the claim is released and the
  next attempt runs afresh.

Storage is Redis when ``redis_url`` is set (``SET NX`` for the claim, the result with a
TTL), else in process (bounded LRU, per worker process: use Redis for a fleet or
``--workers``). If Redis fails the in-process store takes over for
that request (counted in ``fallbacks``). Streaming requests pass through unchanged.

Example::

    app = Starlette(middleware=[..., Middleware(AuthMiddleware, ...),
                                Middleware(IdempotencyMiddleware, settings=settings)])
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import GatewayError, InvalidRequest, UnprocessableOutput
from gateway.http import error_body, request_context
from gateway.settings import Settings

log = logging.getLogger("syntic.idempotency")

PATHS = frozenset({"/v1/chat/completions", "/v1/messages"})
HEADER = b"idempotency-key"
MAX_KEY_LENGTH = 255
_KEEP_HEADERS = frozenset({"content-type", "x-syntic-schema-retries"})
_NOT_STORED = frozenset({408, 429})
_POLL_S = 0.02


class IdempotencyKeyReused(UnprocessableOutput):
    default_code = "idempotency_key_reused"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A finished response, as stored (``fingerprint`` identifies the request body)."""

    fingerprint: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def dumps(self) -> bytes:
        return orjson.dumps({
            "state": "done", "fp": self.fingerprint, "status": self.status,
            "headers": self.headers, "body": base64.b64encode(self.body).decode(),
        })


@dataclass(frozen=True, slots=True)
class Pending:
    """Another request holds the claim and is still running."""

    fingerprint: str


Claim = StoredResponse | Pending | None  # None: the caller now owns the key


def _load(raw: bytes | str) -> StoredResponse | Pending:
    data: Any = orjson.loads(raw)
    if data.get("state") == "done":
        return StoredResponse(
            str(data["fp"]), int(data["status"]),
            tuple((str(k), str(v)) for k, v in data["headers"]),
            base64.b64decode(data["body"]),
        )
    return Pending(str(data["fp"]))


class IdempotencyStore(Protocol):
    async def claim(self, key: str, fingerprint: str, pending_ttl_s: float) -> Claim: ...
    async def complete(self, key: str, response: StoredResponse, ttl_s: float) -> None: ...
    async def release(self, key: str) -> None: ...


class MemoryStore:
    """In-process store: an LRU of at most ``max_entries`` keys, each with an expiry."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, StoredResponse | Pending]] = OrderedDict()

    async def claim(self, key: str, fingerprint: str, pending_ttl_s: float) -> Claim:
        found = self._entries.get(key)
        if found is not None and found[0] > time.monotonic():
            return found[1]
        self._put(key, Pending(fingerprint), pending_ttl_s)
        return None

    async def complete(self, key: str, response: StoredResponse, ttl_s: float) -> None:
        self._put(key, response, ttl_s)

    async def release(self, key: str) -> None:
        self._entries.pop(key, None)

    def _put(self, key: str, value: StoredResponse | Pending, ttl_s: float) -> None:
        self._entries[key] = (time.monotonic() + ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


class RedisStore:
    """Redis store (``SET NX EX`` claims, results with a TTL); falls back to ``fallback``
    for a request when Redis fails."""

    def __init__(self, url: str, *, prefix: str = "syntic:idem:") -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=1.0, socket_connect_timeout=1.0, max_connections=64
        )
        self.prefix = prefix
        self.fallback = MemoryStore()
        self.fallbacks = 0

    def _failed(self, exc: Exception) -> None:
        self.fallbacks += 1
        log.warning("idempotency: Redis unavailable, using the in-process store: %s",
                    type(exc).__name__)

    async def claim(self, key: str, fingerprint: str, pending_ttl_s: float) -> Claim:
        from redis.exceptions import RedisError

        name = self.prefix + key
        pending = orjson.dumps({"state": "pending", "fp": fingerprint})
        try:
            if await self._redis.set(name, pending, nx=True, px=_ms(pending_ttl_s)):
                return None
            raw = await self._redis.get(name)
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return await self.fallback.claim(key, fingerprint, pending_ttl_s)
        if raw is None:  # expired between SET and GET: try once more
            return await self.claim(key, fingerprint, pending_ttl_s)
        return _load(raw)

    async def complete(self, key: str, response: StoredResponse, ttl_s: float) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis.set(self.prefix + key, response.dumps(), px=_ms(ttl_s))
        except (RedisError, OSError) as exc:
            self._failed(exc)
            await self.fallback.complete(key, response, ttl_s)

    async def release(self, key: str) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis.delete(self.prefix + key)
        except (RedisError, OSError) as exc:
            self._failed(exc)
        await self.fallback.release(key)

    async def aclose(self) -> None:
        await self._redis.aclose()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def store_for(settings: Settings) -> IdempotencyStore:
    return RedisStore(settings.redis_url) if settings.redis_url else MemoryStore()


class IdempotencyMiddleware:
    """Runs inside ``AuthMiddleware`` (the principal is known); see module docstring."""

    def __init__(
        self, app: ASGIApp, *, settings: Settings, store: IdempotencyStore | None = None
    ) -> None:
        self.app = app
        self.ttl_s = settings.idempotency_ttl_s
        self.pending_ttl_s = settings.request_timeout_s + 30.0
        self._settings = settings
        self._store = store

    @property
    def store(self) -> IdempotencyStore:
        if self._store is None:  # created on the serving loop (redis.asyncio binds to it)
            self._store = store_for(self._settings)
        return self._store

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself: a request without the header is handed to the inner
        # app's awaitable directly, one coroutine frame fewer on every suspension (#8).
        key = _idempotency_key(scope)
        if key is None:
            return self.app(scope, receive, send)
        return self._idempotent(scope, receive, send, key)

    async def _idempotent(self, scope: Scope, receive: Receive, send: Send, key: str) -> None:
        body = await _read_body(receive)
        replay = _replaying(body, receive)
        if _streaming(body):
            await self.app(scope, replay, send)
            return
        ctx = request_context(scope)
        owner = ctx.principal.key_id if ctx.principal is not None else "anonymous"
        store_key = f"{owner}:{hashlib.sha256(key.encode()).hexdigest()}"
        fingerprint = hashlib.sha256(scope["path"].encode() + b"\0" + body).hexdigest()
        while True:
            claim = await self.store.claim(store_key, fingerprint, self.pending_ttl_s)
            if claim is None:
                await self._run_and_store(scope, replay, send, store_key, fingerprint)
                return
            if claim.fingerprint != fingerprint:
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was already used with a different request body.",
                    param="Idempotency-Key",
                )
            if isinstance(claim, StoredResponse):
                await _send_stored(claim, send)
                return
            await asyncio.sleep(_POLL_S)  # the first request is still running; the
            # request deadline (gateway.limits) bounds this wait

    async def _run_and_store(
        self, scope: Scope, receive: Receive, send: Send, key: str, fingerprint: str
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
        try:
            await self.app(scope, receive, capture)
            if complete and status < 500 and status not in _NOT_STORED:
                headers.extend(_context_headers(scope))
                stored = StoredResponse(fingerprint, status, tuple(headers), b"".join(chunks))
        except GatewayError as exc:
            if status == 0 and exc.status < 500 and exc.status not in _NOT_STORED:
                ctx = request_context(scope)
                envelope_headers = [("content-type", "application/json")]
                envelope_headers.extend(_context_headers(scope))
                stored = StoredResponse(
                    fingerprint, exc.status, tuple(envelope_headers),
                    error_body(exc, ctx.request_id),
                )
            raise
        finally:
            await asyncio.shield(self._settle(key, stored))

    async def _settle(self, key: str, stored: StoredResponse | None) -> None:
        if stored is not None:
            await self.store.complete(key, stored, self.ttl_s)
        else:
            await self.store.release(key)


def _context_headers(scope: Scope) -> list[tuple[str, str]]:
    """``x-syntic-schema-retries``: added by the outer middleware, so not captured above."""
    ctx = request_context(scope)
    if ctx.enforced and ctx.tally is not None:
        return [("x-syntic-schema-retries", str(ctx.tally.retries))]
    return []


def _idempotency_key(scope: Scope) -> str | None:
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in PATHS:
        return None
    for name, value in scope.get("headers", ()):
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


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # client gone: the endpoint sees an empty body and fails cleanly
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


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

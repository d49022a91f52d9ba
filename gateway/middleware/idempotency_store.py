"""Where ``Idempotency-Key`` claims and stored responses live: in process (a bounded LRU,
per worker) or in Redis (one script per claim: ``SET NX PX`` or the current value and its
remaining lease; renewals and releases only by the owner). The middleware that uses them
is ``gateway.middleware.idempotency``.
"""

from __future__ import annotations

import base64
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.settings import Settings

log = logging.getLogger("syntic.idempotency")


class IdempotencyStoreUnavailable(Exception):
    """The store could not say whether the key is claimed."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A finished response, as stored (``fingerprint`` identifies the request body)."""

    fingerprint: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def dumps(self) -> bytes:
        return orjson.dumps(
            {
                "state": "done",
                "fp": self.fingerprint,
                "status": self.status,
                "headers": self.headers,
                "body": base64.b64encode(self.body).decode(),
            }
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """Another request holds the claim and is still running; its lease has
    ``lease_left_s`` to go unless renewed."""

    fingerprint: str
    lease_left_s: float = 0.0


Claim = StoredResponse | Pending | None  # None: the caller now owns the key


def _load(raw: bytes | str, lease_left_s: float = 0.0) -> StoredResponse | Pending:
    data: Any = orjson.loads(raw)
    if data.get("state") == "done":
        return StoredResponse(
            str(data["fp"]),
            int(data["status"]),
            tuple((str(k), str(v)) for k, v in data["headers"]),
            base64.b64decode(data["body"]),
        )
    return Pending(str(data["fp"]), lease_left_s)


class IdempotencyStore(Protocol):
    async def claim(self, key: str, fingerprint: str, owner: str, lease_s: float) -> Claim:
        """Claim ``key`` for ``owner`` (a token unique to this attempt) for ``lease_s``,
        or say who has it. Raises ``IdempotencyStoreUnavailable``."""
        ...

    async def renew(self, key: str, owner: str, lease_s: float) -> bool:
        """Extend ``owner``'s lease; False if the claim is no longer its own."""
        ...

    async def complete(self, key: str, owner: str, response: StoredResponse, ttl_s: float) -> None:
        """Store ``owner``'s response in place of its claim."""
        ...

    async def release(self, key: str, owner: str) -> None:
        """Drop ``owner``'s claim (never someone else's)."""
        ...


class MemoryStore:
    """In-process store: an LRU of at most ``max_entries`` keys, each with an expiry."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, StoredResponse | Pending, str]] = OrderedDict()

    async def claim(self, key: str, fingerprint: str, owner: str, lease_s: float) -> Claim:
        found = self._entries.get(key)
        now = time.monotonic()
        if found is not None and found[0] > now:
            value = found[1]
            if isinstance(value, Pending):
                return Pending(value.fingerprint, found[0] - now)
            return value
        self._put(key, Pending(fingerprint), lease_s, owner)
        return None

    async def renew(self, key: str, owner: str, lease_s: float) -> bool:
        found = self._entries.get(key)
        if found is None or found[2] != owner or not isinstance(found[1], Pending):
            return False
        self._put(key, found[1], lease_s, owner)
        return True

    async def complete(self, key: str, owner: str, response: StoredResponse, ttl_s: float) -> None:
        self._put(key, response, ttl_s, "")

    async def release(self, key: str, owner: str) -> None:
        found = self._entries.get(key)
        if found is not None and found[2] == owner:
            del self._entries[key]

    def _put(self, key: str, value: StoredResponse | Pending, ttl_s: float, owner: str) -> None:
        self._entries[key] = (time.monotonic() + ttl_s, value, owner)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


# Claim in one round trip: take the key, or read what holds it and how long it has left.
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1} end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
"""
# Renew or release only a claim that is still the caller's own (its value names the owner).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _pending_value(fingerprint: str, owner: str) -> bytes:
    return orjson.dumps({"state": "pending", "fp": fingerprint, "owner": owner})


class RedisStore:
    """Redis store: leased claims, results with a TTL (see module docstring). It keeps
    the value of each claim it holds, so a renewal or release names that exact value."""

    def __init__(self, url: str, *, prefix: str = "syntic:idem:") -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=1.0, socket_connect_timeout=1.0, max_connections=64
        )
        self._claim = self._redis.register_script(_CLAIM)
        self._renew = self._redis.register_script(_RENEW)
        self._release = self._redis.register_script(_RELEASE)
        self.prefix = prefix
        self.fallbacks = 0  # requests refused because Redis could not be asked
        self._owned: dict[tuple[str, str], bytes] = {}

    def _failed(self, what: str, exc: Exception) -> None:
        self.fallbacks += 1
        log.warning("idempotency: Redis unavailable (%s): %s", what, type(exc).__name__)

    async def claim(self, key: str, fingerprint: str, owner: str, lease_s: float) -> Claim:
        from redis.exceptions import RedisError

        value = _pending_value(fingerprint, owner)
        try:
            reply = await self._claim(keys=[self.prefix + key], args=[value, _ms(lease_s)])
        except (RedisError, OSError) as exc:
            self._failed("claim", exc)
            raise IdempotencyStoreUnavailable(str(type(exc).__name__)) from exc
        if int(reply[0]) == 1:
            self._owned[(key, owner)] = value
            return None
        return _load(reply[1], max(0, int(reply[2])) / 1000)

    async def renew(self, key: str, owner: str, lease_s: float) -> bool:
        from redis.exceptions import RedisError

        value = self._owned.get((key, owner))
        if value is None:
            return False
        try:
            return bool(await self._renew(keys=[self.prefix + key], args=[value, _ms(lease_s)]))
        except (RedisError, OSError) as exc:
            self._failed("renew", exc)
            return False

    async def complete(self, key: str, owner: str, response: StoredResponse, ttl_s: float) -> None:
        from redis.exceptions import RedisError

        self._owned.pop((key, owner), None)
        try:
            await self._redis.set(self.prefix + key, response.dumps(), px=_ms(ttl_s))
        except (RedisError, OSError) as exc:
            # The lease then lapses and a retry runs afresh: nothing else can be done.
            self._failed("store the response", exc)

    async def release(self, key: str, owner: str) -> None:
        from redis.exceptions import RedisError

        value = self._owned.pop((key, owner), None)
        if value is None:
            return
        try:
            await self._release(keys=[self.prefix + key], args=[value])
        except (RedisError, OSError) as exc:
            self._failed("release", exc)  # the lease lapses by itself

    async def aclose(self) -> None:
        await self._redis.aclose()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def store_for(settings: Settings) -> IdempotencyStore:
    return RedisStore(settings.redis_url) if settings.redis_url else MemoryStore()

"""Limits shared by every replica: one atomic Lua script per check, on Redis server time.

The script reads the key's window (hash ``w``/``r``/``t``: window start in microseconds,
requests, tokens), starts a new one when a full window has passed since the current one
began (by Redis ``TIME``, so replica clocks don't matter; windows are anchored at the key's
first request, never split at clock minutes),
and admits and charges in the same step: no read-modify-write race between replicas.

One round trip per request (#8): the token settle (actual minus estimated, known only when
the request has finished) is not sent on its own. ``add_tokens`` adds it to a per-key
pending delta in this process; the key's next ``check`` sends it with the check, and the
script applies it to the window before deciding, in the same atomic step. A delta no
request picks up is flushed by a background task after ``settle_delay_s`` (50 ms by
default), so other replicas see it at most that late; ``aclose`` flushes what is left.
A delta that arrives after its window has ended is dropped, as a settle always was.

Redis down: the same rule is applied per process (``LocalRateLimiter``), the outage is
logged once, each locally decided request counts in ``fallback_count``, and Redis is
retried after a short, growing backoff. ``check`` never raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.ratelimit.local import LocalRateLimiter
from gateway.ratelimit.resp import RespClient, supports
from gateway.ratelimit.window import WINDOW_S, unlimited

log = logging.getLogger("syntic.ratelimit")

# ARGV: rpm, tpm (-1: unlimited), cost, window seconds, pending settle delta (tokens).
CHECK_SCRIPT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local win_us = tonumber(ARGV[4]) * 1000000
local start = now_us
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local delta = tonumber(ARGV[5]) or 0
local v = redis.call('HMGET', KEYS[1], 'w', 'r', 't')
local r = 0
local tk = 0
local settled = 0
if v[1] and now_us - tonumber(v[1]) < win_us then
  start = tonumber(v[1])
  r = tonumber(v[2]) or 0
  tk = tonumber(v[3]) or 0
  if delta ~= 0 then
    tk = tk + delta
    if tk < 0 then tk = 0 end
    settled = 1
  end
end
local reset_ms = math.floor((start + win_us - now_us) / 1000)
local ok = 1
if rpm >= 0 and r + 1 > rpm then ok = 0 end
if ok == 1 and tpm >= 0 and tk > 0 and tk + cost > tpm then ok = 0 end
if ok == 1 then
  r = r + 1
  tk = tk + cost
  redis.call('HSET', KEYS[1], 'w', start, 'r', r, 't', tk)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) * 2000)
elseif settled == 1 then
  redis.call('HSET', KEYS[1], 't', tk)
end
return {ok, r, tk, reset_ms}
"""

ADD_TOKENS_SCRIPT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HGET', KEYS[1], 'w')
if v and now_us - tonumber(v) < tonumber(ARGV[2]) * 1000000 then
  local tk = (tonumber(redis.call('HGET', KEYS[1], 't')) or 0) + tonumber(ARGV[1])
  if tk < 0 then tk = 0 end
  redis.call('HSET', KEYS[1], 't', tk)
end
return 1
"""

_FAILURES = (RedisError, OSError, asyncio.TimeoutError)


class RedisRateLimiter:
    """Implements ``RateLimiter`` on Redis, with a per-process fallback."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "syntic:",
        timeout_s: float = 1.0,
        max_connections: int = 32,
        backoff_s: float = 0.5,
        max_backoff_s: float = 5.0,
        window_s: int = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        settle_delay_s: float = 0.05,
    ) -> None:
        # At most ``max_connections`` scripts in flight: a burst queues on the semaphore
        # (latency, not failure) instead of opening hundreds of connections, which on a busy
        # host turns into connect timeouts and false "outages". Pool exhaustion therefore
        # never happens and never counts as Redis being down.
        self._slots = asyncio.Semaphore(max_connections)
        pool = aioredis.ConnectionPool.from_url(
            url,
            max_connections=max_connections + 4,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._pool: Any = pool
        self._redis: Any = aioredis.Redis(connection_pool=pool)
        self._check = self._redis.register_script(CHECK_SCRIPT)
        self._add = self._redis.register_script(ADD_TOKENS_SCRIPT)
        # redis:// goes through the pipelined client (~20 us a script instead of ~100 us
        # through redis-py, #8); other schemes (rediss://, unix://) through redis-py.
        self._resp = RespClient.from_url(url, timeout_s=timeout_s) if supports(url) else None
        self.prefix = prefix
        self.window_s = window_s
        self.local = LocalRateLimiter(window_s=window_s)
        self._clock = clock
        self._base_backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._backoff = backoff_s
        self._down_until: float | None = None
        # Metrics: requests decided locally because Redis was down, and outages seen.
        self.fallback_count = 0
        self.outage_count = 0
        # Settles not yet sent, per key id (see module docstring), and their flush.
        self.settle_delay_s = settle_delay_s
        self._pending: dict[str, tuple[Principal, int]] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()

    def _key(self, principal: Principal) -> str:
        return f"{self.prefix}rl:{{{principal.key_id}}}"

    @property
    def redis_down(self) -> bool:
        """True while requests are being limited per process."""
        return self._down_until is not None

    def _use_redis(self) -> bool:
        return self._down_until is None or self._clock() >= self._down_until

    def _failed(self, exc: BaseException) -> None:
        now = self._clock()
        if self._down_until is None:
            self.outage_count += 1
            log.warning("rate limits: Redis unavailable, using per-process limits: %r", exc)
            self._backoff = self._base_backoff
        elif now >= self._down_until:
            self._backoff = min(self._backoff * 2, self._max_backoff)  # a retry probe failed
        else:
            return  # another in-flight call of the same outage
        self._down_until = now + self._backoff

    def _recovered(self) -> None:
        if self._down_until is not None:
            log.warning("rate limits: Redis reachable again, limits shared across replicas")
            self._down_until = None
            self._backoff = self._base_backoff

    async def check(self, principal: Principal, tokens: int) -> RateDecision:
        """Admit or refuse one request costing ``tokens``; never raises."""
        if principal.rpm is None and principal.tpm is None:
            return unlimited()
        if self._use_redis():
            delta = 0
            try:
                async with self._slots:
                    # Re-checked after queueing: once an outage is seen, the queue drains
                    # to local limits instead of each waiter timing out in turn.
                    res = None
                    if self._use_redis():
                        # Taken as late as possible: every settle so far rides along.
                        pending = self._pending.pop(principal.key_id, None)
                        delta = 0 if pending is None else pending[1]
                        res = await self._script(
                            self._check,
                            keys=[self._key(principal)],
                            args=[
                                -1 if principal.rpm is None else principal.rpm,
                                -1 if principal.tpm is None else principal.tpm,
                                max(0, int(tokens)),
                                self.window_s,
                                delta,
                            ],
                        )
            except _FAILURES as exc:
                self._failed(exc)
                if delta:  # not applied: charged locally, as a failed settle always was
                    await self.local.add_tokens(principal, delta)
            else:
                if res is not None:
                    self._recovered()
                    return _decision(principal, res)
        self.fallback_count += 1
        return await self.local.check(principal, tokens)

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        """Charge tokens learned after the request; never raises, never waits on Redis:
        the delta rides on the key's next check, or is flushed after ``settle_delay_s``."""
        if principal.tpm is None or tokens == 0:
            return
        if not self._use_redis():
            await self.local.add_tokens(principal, tokens)
            return
        pending = self._pending
        before = pending.get(principal.key_id)
        delta = int(tokens) if before is None else before[1] + int(tokens)
        pending[principal.key_id] = (principal, delta)
        if self._flush_timer is None:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(self.settle_delay_s, self._flush_later)

    @property
    def pending_settles(self) -> int:
        """Keys with a token settle not yet sent to Redis."""
        return len(self._pending)

    def _flush_later(self) -> None:
        self._flush_timer = None
        if self._pending:
            task = asyncio.ensure_future(self.flush())
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def flush(self) -> None:
        """Send every pending settle now (one script per key, pipelined); never raises.
        A settle Redis does not take is charged to the per-process limits instead."""
        pending, self._pending = self._pending, {}
        if pending:
            await asyncio.gather(*(self._settle(p, d) for p, d in pending.values() if d))

    async def _settle(self, principal: Principal, tokens: int) -> None:
        if self._use_redis():
            try:
                async with self._slots:
                    await self._script(
                        self._add, keys=[self._key(principal)], args=[tokens, self.window_s]
                    )
            except _FAILURES as exc:
                self._failed(exc)
            else:
                self._recovered()
                return
        await self.local.add_tokens(principal, tokens)

    async def _script(self, script: Any, *, keys: list[str], args: list[int]) -> Any:
        if self._resp is not None:
            return await self._resp.evalsha(script.sha, script.script, keys=keys, args=args)
        return await script(keys=keys, args=args)

    async def aclose(self) -> None:
        """Send the pending settles, then close the connection pool."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        try:
            await self.flush()
            if self._flushes:
                await asyncio.gather(*self._flushes)
        finally:
            await self._close()

    async def _close(self) -> None:
        if self._resp is not None:
            await self._resp.aclose()
        await self._redis.aclose()
        await self._pool.disconnect()


def _decision(principal: Principal, res: list[Any]) -> RateDecision:
    ok, used_r, used_t, reset_ms = (int(x) for x in res)
    reset_s = reset_ms / 1000.0
    rpm, tpm = principal.rpm, principal.tpm
    return RateDecision(
        allowed=bool(ok),
        limit_requests=rpm,
        remaining_requests=None if rpm is None else max(0, rpm - used_r),
        limit_tokens=tpm,
        remaining_tokens=None if tpm is None else max(0, tpm - used_t),
        reset_s=reset_s,
        retry_after_s=0.0 if ok else reset_s,
    )

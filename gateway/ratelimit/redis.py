"""Limits shared by every replica: one atomic Lua script per check, on Redis server time.

The script reads the key's window (hash ``w``/``r``/``t``: window start in microseconds,
requests, tokens), starts a new one when a full window has passed since the current one
began (by Redis ``TIME``, so replica clocks don't matter; windows are anchored at the key's
first request, never split at clock minutes),
and admits and charges in the same step: no read-modify-write race between replicas.

One round trip per request: the token settle (actual minus estimated, known only when
the request has finished) is not sent on its own. ``add_tokens`` adds it to a per-key
pending delta in this process; the key's next ``check`` sends it with the check, and the
script applies it to the window before deciding, in the same atomic step. A delta no
request picks up is flushed by a background task after ``settle_delay_s`` (50 ms by
default), so other replicas see it at most that late; ``aclose`` flushes what is left.
A delta that arrives after its window has ended is dropped, as a settle always was.

Leases: with ``lease_max > 1`` (``[server] rate_limit_lease_max``, 64 by default in
``syntic serve``), a busy key does not pay a round trip per request. The check script may
reserve extra request slots (and, for a ``tpm`` key, token headroom at this request's cost
per slot) in the same atomic step that admits the request; this process then admits the
key's next requests from that reservation without asking Redis, until it runs out or its
window ends. Reserved slots are counted in Redis like admitted requests, so the fleet
never admits more than the limit; the price is that a replica may refuse while another
still holds unused slots. That is bounded: a reservation is at most 1/32 of the window's
remaining room (keys under 33 rpm never reserve), it starts at one slot and doubles only
while the key keeps coming back within ``lease_grow_s``, unused slots ride back to Redis
with the key's next check, and a reservation idle for ``lease_idle_s`` (1 s) or left at
shutdown is returned. While one reservation is being fetched, the key's other requests wait
for it instead of each asking Redis.

Redis down: the same rule is applied per process (``LocalRateLimiter``), the outage is
logged once, each locally decided request counts in ``fallback_count``, and Redis is
retried after a short, growing backoff. ``check`` never raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.ratelimit.local import LocalRateLimiter
from gateway.ratelimit.scripts import ADD_TOKENS_SCRIPT, CHECK_SCRIPT, REFUND_SCRIPT
from gateway.ratelimit.window import WINDOW_S, unlimited

log = logging.getLogger("syntic.ratelimit")

_FAILURES = (RedisError, OSError, asyncio.TimeoutError)
_MARGIN_S = 0.01  # a reservation stops being used this long before its window's end


@dataclass(slots=True)
class _Lease:
    """One key's reservation in this process (see module docstring)."""

    reqs: int = 0  # unused reserved slots
    toks: int = 0  # unused reserved tokens
    window: int = -1  # the Redis window start (us) they belong to
    until: float = 0.0  # usable until (local clock)
    ends: float = 0.0  # the window's end (local clock), for ``reset_s``
    used_r: int = 0  # Redis's counts after the last grant, reservations included
    used_t: int = 0
    size: int = 1  # slots to ask for next (this request included)
    last_trip: float = -1e18
    last_use: float = 0.0
    refill: asyncio.Future[None] | None = None  # a grant in flight for this key


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
        lease_max: int = 1,
        lease_grow_s: float = 0.05,
        lease_idle_s: float = 1.0,
        max_leases: int = 10_000,
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
        self._refund = self._redis.register_script(REFUND_SCRIPT)
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
        # Reservations (see module docstring): per key id; 1 turns them off.
        self.lease_max = max(1, int(lease_max))
        self.lease_grow_s = lease_grow_s
        self.lease_idle_s = lease_idle_s
        self._leases: dict[str, _Lease] = {}
        self.max_leases = max_leases  # keys with a lease entry, before empty ones are purged
        self._sweep_timer: asyncio.TimerHandle | None = None
        self.leased_count = 0  # requests admitted from a reservation, without Redis
        self.trip_count = 0  # check scripts sent

    def _key(self, key_id: str) -> str:
        return f"{self.prefix}rl:{{{key_id}}}"

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

    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        """Admit or refuse a request costing ``tokens`` and counting ``requests``; never
        raises. One counting several is decided by Redis itself (reservations hold
        single-request slots)."""
        if principal.rpm is None and principal.tpm is None:
            return unlimited()
        cost = int(tokens)
        if cost < 0:
            cost = 0
        single = requests <= 1
        # Empty unless reservations are on (``lease_max > 1``): ``_lease_args`` fills it.
        lease = self._leases.get(principal.key_id) if single else None
        if lease is not None:
            held = self._from_lease(lease, principal, cost)
            if held is not None:
                return held
            refill = lease.refill
            if refill is not None:  # another request is fetching a reservation: wait
                await asyncio.shield(refill)
                held = self._from_lease(lease, principal, cost)
                if held is not None:
                    return held
        if self._use_redis():
            delta = 0
            try:
                async with self._slots:
                    # Re-checked after queueing: once an outage is seen, the queue drains
                    # to local limits instead of each waiter timing out in turn.
                    res = None
                    if lease is not None:  # a reservation may have arrived meanwhile
                        held = self._from_lease(lease, principal, cost)
                        if held is not None:
                            return held
                    if self._use_redis():
                        # Taken as late as possible: every settle so far rides along.
                        pending = self._pending.pop(principal.key_id, None)
                        delta = 0 if pending is None else pending[1]
                        args = [
                            -1 if principal.rpm is None else principal.rpm,
                            -1 if principal.tpm is None else principal.tpm,
                            cost,
                            self.window_s,
                            delta,
                        ]
                        sent_at = self._clock()
                        if single:
                            mine = self._lease_args(principal, args, sent_at)
                        else:
                            mine = None
                            args += [1, 0, 0, -1, requests]
                        try:
                            self.trip_count += 1
                            res = await self._script(
                                self._check, keys=[self._key(principal.key_id)], args=args
                            )
                            if mine is not None:
                                self._granted(mine, res, sent_at)
                        finally:
                            if mine is not None and mine.refill is not None:
                                mine.refill.set_result(None)
                                mine.refill = None
            except _FAILURES as exc:
                self._failed(exc)
                if delta:  # not applied: charged locally, as a failed settle always was
                    await self.local.add_tokens(principal, delta)
            else:
                if res is not None:
                    self._recovered()
                    decision = _decision(principal, res)
                    if not decision.allowed and lease is not None:
                        # A reservation granted to a concurrent request may serve this one.
                        held = self._from_lease(lease, principal, cost)
                        if held is not None:
                            return held
                    return decision
        self.fallback_count += 1
        return await self.local.check(principal, tokens, requests)

    def _from_lease(self, lease: _Lease, principal: Principal, cost: int) -> RateDecision | None:
        """Admit from this process's reservation, or None if it can't."""
        reqs = lease.reqs - 1
        if reqs < 0:
            return None
        tpm = principal.tpm
        toks = lease.toks
        if tpm is not None:
            toks -= cost
            if toks < 0:
                return None
        now = self._clock()
        if now >= lease.until:
            return None
        lease.reqs = reqs
        lease.toks = toks
        lease.last_use = now
        self.leased_count += 1
        rpm = principal.rpm
        left_r = left_t = None
        if rpm is not None:
            left_r = rpm - lease.used_r + reqs
            if left_r < 0:
                left_r = 0
        if tpm is not None:
            left_t = tpm - lease.used_t + toks
            if left_t < 0:
                left_t = 0
        return RateDecision(
            allowed=True,
            limit_requests=rpm,
            remaining_requests=left_r,
            limit_tokens=tpm,
            remaining_tokens=left_t,
            reset_s=lease.ends - now,  # positive: ``until`` is ``_MARGIN_S`` before ``ends``
            retry_after_s=0.0,
        )

    def _lease_args(self, principal: Principal, args: list[int], now: float) -> _Lease | None:
        """Add the reservation arguments to a check (slots wanted, unused ones returned);
        the key's lease if this trip fetches a reservation for it."""
        if self.lease_max <= 1:
            return None
        lease = self._leases.get(principal.key_id)
        if lease is None:
            if len(self._leases) >= self.max_leases:
                self._purge_leases()
            lease = self._leases[principal.key_id] = _Lease(last_use=now)
        if lease.refill is not None:  # one fetch per key at a time; this one asks for 1
            want = 1
            mine = None
        else:
            if now - lease.last_trip < self.lease_grow_s:
                lease.size = min(lease.size * 2, self.lease_max)
            else:
                lease.size = max(1, lease.size // 2)
            lease.last_trip = now
            want = lease.size
            mine = lease
            lease.refill = asyncio.get_running_loop().create_future()
        refund_r, refund_t = lease.reqs, lease.toks
        lease.reqs = lease.toks = 0
        if want > 1 or refund_r or refund_t:
            args += [want, refund_r, refund_t, lease.window]
        return mine

    def _purge_leases(self) -> None:
        """Forget every key's lease that holds nothing and is not being refilled (the
        dict is bounded by ``max_leases``; amortized over that many new keys)."""
        self._leases = {
            k: v for k, v in self._leases.items() if v.reqs or v.toks or v.refill is not None
        }

    def _granted(self, lease: _Lease, res: list[Any], sent_at: float) -> None:
        """Keep the slots a check reserved (the reply to ``_lease_args``'s trip)."""
        if len(res) < 7 or not int(res[0]):
            return
        extra, held, window = int(res[4]), int(res[5]), int(res[6])
        if window != lease.window:
            lease.reqs = lease.toks = 0  # left from an ended window: gone with it
            lease.window = window
        lease.ends = sent_at + int(res[3]) / 1000.0
        lease.until = lease.ends - _MARGIN_S
        lease.used_r, lease.used_t = int(res[1]), int(res[2])
        if extra or held:
            lease.reqs += extra
            lease.toks += held
            self._arm_sweep()

    def _arm_sweep(self) -> None:
        if self._sweep_timer is None:
            loop = asyncio.get_running_loop()
            self._sweep_timer = loop.call_later(self.lease_idle_s, self._sweep)

    def _sweep(self) -> None:
        """Return reservations idle for ``lease_idle_s``; forget ended ones."""
        self._sweep_timer = None
        now = self._clock()
        returns: list[tuple[str, int, int, int]] = []
        holding = False
        for key_id, lease in list(self._leases.items()):
            if lease.refill is not None:
                holding = True
                continue
            if lease.reqs or lease.toks:
                if now - lease.last_use >= self.lease_idle_s or now >= lease.until:
                    returns.append((key_id, lease.reqs, lease.toks, lease.window))
                    lease.reqs = lease.toks = 0
                else:
                    holding = True
            elif now >= lease.until and now - lease.last_trip >= self.lease_idle_s:
                del self._leases[key_id]
        if returns:
            task = asyncio.ensure_future(self._refund_all(returns))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        if holding:
            self._arm_sweep()

    async def _refund_all(self, returns: list[tuple[str, int, int, int]]) -> None:
        await asyncio.gather(*(self._give_back(*r) for r in returns))

    async def _give_back(self, key_id: str, reqs: int, toks: int, window: int) -> None:
        if not self._use_redis():
            return  # lost: counted in Redis until the window ends (never over the limit)
        try:
            async with self._slots:
                await self._script(
                    self._refund,
                    keys=[self._key(key_id)],
                    args=[reqs, toks, window],
                )
        except _FAILURES as exc:
            self._failed(exc)

    @property
    def reserved(self) -> int:
        """Reserved request slots this process holds, unused, over all keys."""
        return sum(lease.reqs for lease in self._leases.values())

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        """Charge tokens learned after the request; never raises, never waits on Redis:
        the delta rides on the key's next check, or is flushed after ``settle_delay_s``."""
        if principal.tpm is None or tokens == 0:
            return
        down_until = self._down_until  # ``_use_redis``, inline: this runs per request
        if down_until is not None and self._clock() < down_until:
            await self.local.add_tokens(principal, tokens)
            return
        pending = self._pending
        key_id = principal.key_id
        before = pending.get(key_id)
        delta = int(tokens) if before is None else before[1] + int(tokens)
        pending[key_id] = (principal, delta)
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
                        self._add, keys=[self._key(principal.key_id)], args=[tokens, self.window_s]
                    )
            except _FAILURES as exc:
                self._failed(exc)
            else:
                self._recovered()
                return
        await self.local.add_tokens(principal, tokens)

    async def _script(self, script: Any, *, keys: list[str], args: list[int]) -> Any:
        return await script(keys=keys, args=args)

    async def aclose(self) -> None:
        """Return unused reservations, send the pending settles, then close the pool."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        try:
            returns = [
                (k, v.reqs, v.toks, v.window) for k, v in self._leases.items() if v.reqs or v.toks
            ]
            self._leases.clear()
            if returns:
                await self._refund_all(returns)
            await self.flush()
            if self._flushes:
                await asyncio.gather(*self._flushes)
        finally:
            await self._close()

    async def _close(self) -> None:
        await self._redis.aclose()
        await self._pool.disconnect()


def _decision(principal: Principal, res: list[Any]) -> RateDecision:
    ok = bool(int(res[0]))
    used_r, used_t = int(res[1]), int(res[2])
    if len(res) >= 6:  # slots reserved for later requests are not this one's count
        used_r -= int(res[4])
        used_t -= int(res[5])
    reset_s = int(res[3]) / 1000.0
    rpm, tpm = principal.rpm, principal.tpm
    return RateDecision(
        allowed=ok,
        limit_requests=rpm,
        remaining_requests=None if rpm is None else max(0, rpm - used_r),
        limit_tokens=tpm,
        remaining_tokens=None if tpm is None else max(0, tpm - used_t),
        reset_s=reset_s,
        retry_after_s=0.0 if ok else reset_s,
    )

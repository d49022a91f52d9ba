"""In-flight slots: how many upstream calls this process, and each key, runs at once.

A metered request takes one slot as it arrives (``enter``, in the outer middleware, before
its body is read); once it is admitted it holds one slot per upstream call it runs at once
(``hold``: ``n`` for a chat request with ``n`` choices), counted for its key too; every
slot it holds is given back when it ends (``leave``). Nothing queues:

- past ``limit`` slots in the process: 503 ``overloaded`` + ``retry-after``;
- past the key's own bound (``Principal.max_concurrent``, else ``key_limit``): 429
  ``concurrency_limit_exceeded`` + ``retry-after``, so one key cannot hold the whole
  process's share of the upstreams (by default at most half of ``limit``).

A request also holds its ``n`` slots against its model's upstream (``hold_model``, once
the model is known): a model's ``max_concurrent`` bounds the calls to it
in flight, and one key's requests hold at most ``share`` of those, so a tenant flooding a
model leaves the rest of its upstream to the others (a model without one is bounded by
``limit`` and ``key_limit`` alone):

- past the key's share of the model: 429 ``concurrency_limit_exceeded`` + ``retry-after``;
- past the model's slots: 503 ``overloaded`` + ``retry-after``.

A 429 tells the key's client to slow down (both SDKs retry it with backoff) and costs the
gateway nothing; a queue would hold the connection, its memory and its deadline, and hide
the bound from the client. The slots a request holds are kept on its ``RequestContext``
(``slots``, ``key_slots``). Single event loop, so plain counters are enough.

Example::

    gate = InflightGate(512, key_limit=256)
    gate.enter(ctx)                   # raises Overloaded when full
    try:
        gate.hold(ctx, 4, principal)  # n = 4: three more, and four of the key's
        ...
    finally:
        gate.leave(ctx)
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from typing import TypeVar

from gateway.context import RequestContext
from gateway.errors import InvalidRequest, Overloaded, RateLimited
from gateway.keys.base import Principal

_K = TypeVar("_K", bound=Hashable)


def _overloaded() -> Overloaded:
    return Overloaded(
        "The gateway is handling too many requests; retry shortly.",
        headers={"retry-after": "1"},
    )


def _busy_key(held: int, limit: int, what: str) -> RateLimited:
    return RateLimited(
        f"This API key already has {held} upstream call(s) in flight{what}, its limit "
        f"is {limit}; retry when one finishes.",
        code="concurrency_limit_exceeded",
        headers={"retry-after": "1"},
    )


def model_share(limit: int, share: float) -> int:
    """The slots of a model's ``limit`` one key may hold: ``share`` of them, at least one
    (0: unbounded)."""
    return max(1, int(limit * share)) if limit else 0


def default_key_limit(limit: int, configured: int) -> int:
    """A key's bound when it has none of its own: ``configured``, else half of ``limit``
    (at least 1); 0 (unbounded) when both are 0."""
    if configured:
        return configured
    return max(1, limit // 2) if limit else 0


class InflightGate:
    """Counts the slots admitted requests hold, in all and per key; 0: unbounded."""

    __slots__ = (
        "_keys",
        "_model_keys",
        "_models",
        "inflight",
        "key_limit",
        "key_refused",
        "limit",
        "model_refused",
        "refused",
        "share",
    )

    def __init__(self, limit: int, key_limit: int = 0, share: float = 0.5) -> None:
        self.limit = limit
        self.key_limit = key_limit
        self.share = share  # of a model's slots, one key's at most
        self.model_refused = 0  # 429s and 503s for a model's slots
        self._models: dict[str, int] = {}  # model -> slots its requests hold
        self._model_keys: dict[tuple[str, str], int] = {}  # (model, key id) -> slots
        self.inflight = 0
        self.refused = 0  # 503s
        self.key_refused = 0  # 429s for a key's own bound
        self._keys: dict[str, int] = {}  # key id -> slots its requests hold

    def enter(self, ctx: RequestContext) -> None:
        """One slot for a request that just arrived (raises ``Overloaded`` when full); the
        caller must call ``leave(ctx)`` exactly once after it succeeded."""
        if self.limit and self.inflight >= self.limit:
            self.refused += 1
            raise _overloaded()
        self.inflight += 1
        ctx.slots = 1
        ctx.gate = self

    def limit_for(self, principal: Principal | None) -> int:
        """The slots one key's requests may hold at once (0: unbounded)."""
        if principal is not None and principal.max_concurrent is not None:
            return principal.max_concurrent
        return self.key_limit

    def hold(self, ctx: RequestContext, n: int, principal: Principal | None = None) -> None:
        """Make the request hold ``n`` slots, one per upstream call it runs at once, and
        ``n`` of its key's (429 past the key's bound, 503 past the process's)."""
        key_limit = self.key_limit  # limit_for(principal), inline: once per request
        if principal is not None and principal.max_concurrent is not None:
            key_limit = principal.max_concurrent
        key_extra = 0
        if key_limit and principal is not None:
            key_extra = n - ctx.key_slots
            held = self._keys.get(principal.key_id, 0)
            if key_extra > 0 and held + key_extra > key_limit:
                self.key_refused += 1
                raise _busy_key(held, key_limit, "")
        extra = n - ctx.slots
        if extra > 0:
            if self.limit and self.inflight + extra > self.limit:
                self.refused += 1
                raise _overloaded()
            self.inflight += extra
            ctx.slots = n
        if key_extra > 0:
            assert principal is not None
            self._keys[principal.key_id] = self._keys.get(principal.key_id, 0) + key_extra
            ctx.key_slots = n

    def hold_model(
        self,
        ctx: RequestContext,
        model: str,
        limit: int,
        n: int,
        principal: Principal | None = None,
    ) -> None:
        """Hold ``n`` of ``model``'s ``limit`` upstream slots, at most ``share`` of them the
        key's (see module docstring); 0: the model has no bound of its own (the process's
        and the key's still apply)."""
        if not limit:
            return
        share = model_share(limit, self.share)
        if n > share:
            raise InvalidRequest(
                f"n = {n} runs {n} upstream calls at once, more than the {share} one key "
                f"may run on {model!r} at once: the request could never be admitted.",
                code="n_above_limit",
                param="n",
            )
        extra = n - ctx.model_slots
        if extra <= 0:
            return
        if principal is not None:
            held = self._model_keys.get((model, principal.key_id), 0)
            if held + extra > share:
                self.model_refused += 1
                raise _busy_key(held, share, f" on {model!r}")
        used = self._models.get(model, 0)
        if used + extra > limit:
            self.model_refused += 1
            raise Overloaded(
                f"The model {model!r} has all its {limit} upstream call(s) in flight; retry "
                "shortly.",
                headers={"retry-after": "1"},
            )
        self._models[model] = used + extra
        if principal is not None:
            at = (model, principal.key_id)
            self._model_keys[at] = self._model_keys.get(at, 0) + extra
        ctx.model_slots = n
        ctx.slot_model = model

    def leave(self, ctx: RequestContext) -> None:
        """Give back every slot the request holds."""
        self.inflight -= ctx.slots
        ctx.slots = 0
        if ctx.model_slots:
            self._release_model(ctx)
        if ctx.key_slots:
            assert ctx.principal is not None
            key_id = ctx.principal.key_id
            left = self._keys.get(key_id, 0) - ctx.key_slots
            if left > 0:
                self._keys[key_id] = left
            else:
                self._keys.pop(key_id, None)
            ctx.key_slots = 0

    def _release_model(self, ctx: RequestContext) -> None:
        model, n = ctx.slot_model, ctx.model_slots
        assert model is not None
        _drop(self._models, model, n)
        if ctx.principal is not None:
            _drop(self._model_keys, (model, ctx.principal.key_id), n)
        ctx.model_slots = 0
        ctx.slot_model = None

    def held_by(self, key_id: str) -> int:
        """Slots the key's requests hold right now."""
        return self._keys.get(key_id, 0)

    @contextlib.contextmanager
    def admit(self, ctx: RequestContext) -> Iterator[None]:
        """``enter`` and ``leave`` around a block."""
        self.enter(ctx)
        try:
            yield
        finally:
            self.leave(ctx)


def _drop(counts: dict[_K, int], at: _K, n: int) -> None:
    left = counts.get(at, 0) - n
    if left > 0:
        counts[at] = left
    else:
        counts.pop(at, None)

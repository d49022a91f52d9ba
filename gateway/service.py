"""Orchestration of one chat request, dialect-neutral and free of HTTP types.

``ChatService.complete`` runs the request path of the architecture picture::

    rate limit -> model lookup -> request-side check (lint, cached) -> upstream.complete
      -> enforcement (validate, one correction per invalid call, or 422) -> usage

The rate limit comes first so that every request a key sends counts against its limits,
the ones answered 404 or 400 included; a refused one gets its tokens back (``admitted``).
An endpoint admits a large body before it parses it (``admit_body``: one request, the
body's bytes / 4 tokens), so a key over its limit costs no parse; the admission after
decoding then charges only the rest (more choices, a stored history's tokens), and a
refusal after it costs that one request. A request its endpoint refuses in between (the
body does not decode) is settled by ``refused_early``.
Once the model is known, the request holds its calls against the model's upstream slots
(at most a share of them one key's: ``gateway.ratelimit.inflight``).
Streaming and the Messages dialect reuse ``admitted`` and the enforcement functions; every
layer fills the ``RequestContext`` the HTTP layer turns into headers and the ledger row.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import validator
from gateway.bounds import name_list
from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Screen,
    Usage,
)
from gateway.canonical.dropped import answer_drops
from gateway.canonical.model import AnswerWire
from gateway.canonical.record import record
from gateway.context import RequestContext, Tally
from gateway.enforcement import (
    EnforceContext,
    LintCache,
    ParamPaths,
    StrictPlan,
    check_request,
    enforce_response,
    upstream_view,
)
from gateway.enforcement.choices import first_failure_or_results
from gateway.errors import GatewayError, InvalidRequest, NotFound, RateLimited, UpstreamError
from gateway.offload import Offload
from gateway.ratelimit.base import RateDecision, RateLimiter
from gateway.settings import ModelConfig, Settings
from gateway.upstream.base import TokenCount, TokenCounter, Upstream
from gateway.upstream.registry import UpstreamRegistry
from gateway.upstream.retry import RetryingUpstream, RetryPolicy
from gateway.upstream.tokens import estimate_tokens


@record
class Prepared:
    """A request that passed the request-side checks: its model, plan and the request as
    it goes to the upstream (``strict`` stripped unless the model is constrained)."""

    model: ModelConfig
    plan: StrictPlan
    upstream: Upstream
    upstream_request: ChatRequest

    def enforce_context(self, tally: Tally) -> EnforceContext:
        on_invalid = self.upstream_request.on_invalid or self.model.on_invalid
        # Positional (the last is ``tool_errors``): a class called with keywords builds a dict.
        return EnforceContext(
            self.upstream, self.model, self.plan, tally, on_invalid == "tool_error"
        )


def screen_fields(screen: Screen, ctx: RequestContext | None) -> None:
    """The field policy's verdict for the model's upstream: the first field it refuses is
    a 400 ``unsupported_parameter``; those it drops are named in ``x-syntic-dropped``."""
    if screen.refused:
        param, message = screen.refused[0]
        raise InvalidRequest(message, param=param, code="unsupported_parameter")
    if screen.dropped and ctx is not None:
        ctx.drop(screen.dropped)


# The wire an answer part came from (``AnswerWire``), by the client dialect that speaks it.
_ANSWER_WIRE: dict[str, AnswerWire] = {
    "chat": "openai",
    "responses": "responses",
    "messages": "anthropic",
}


def drop_items(request: ChatRequest, responses: list[ChatResponse], ctx: RequestContext) -> None:
    """What of a non-streamed answer the client's wire cannot carry (another wire's
    reasoning, hosted tools' items, custom calls, server tools' blocks, citations, the
    answer's own fields: ``answer_drops``), named in ``x-syntic-dropped``: a stream has
    sent its headers before it meets them."""
    origin = request.origin
    if origin is None:
        return
    wire = _ANSWER_WIRE[origin.wire]
    for response in responses:
        names = answer_drops(response, wire)
        if names:
            ctx.drop(names)


def _token_counter(adapter: object) -> TokenCounter | None:
    """The adapter itself or the one a wrapper holds (``inner``): a count is not a model
    call, so a wrapper that times model calls is skipped."""
    while not isinstance(adapter, TokenCounter):
        adapter = getattr(adapter, "inner", None)
        if adapter is None:
            return None
    return adapter


class ChatService:
    """One per app: owns the lint cache, reads the model catalogue and the registry."""

    def __init__(
        self,
        settings: Settings,
        registry: UpstreamRegistry,
        limiter: RateLimiter | None,
        *,
        offload: Offload | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.retry_policy = RetryPolicy(retries=settings.upstream_retries)
        self.limiter = limiter
        # One byte bound for both caches that keep compiled schemas alive.
        max_bytes = settings.schema_cache_max_bytes
        self.lint_cache = LintCache(max_bytes=max_bytes)
        validator.configure_cache(max_bytes=max_bytes)
        # Large bodies are parsed, decoded and re-encoded here, off the event loop.
        self.offload = offload or Offload(
            settings.body_offload_bytes, settings.body_offload_workers
        )

    def model(self, name: str) -> ModelConfig:
        model = self.settings.model(name)
        if model is None:
            raise NotFound(
                f"The model {name!r} does not exist.", code="model_not_found", param="model"
            )
        return model

    async def prepare(
        self, request: ChatRequest, paths: ParamPaths, ctx: RequestContext | None = None
    ) -> Prepared:
        """Model lookup and request-side checks; raises 404/400 before any upstream call.
        With ``ctx``: whether the plan enforces and which tools the projection could not
        make strict are kept on it, for the HTTP layer's headers and the ledger's row."""
        model = self.model(request.model)
        if request.origin is not None and request.origin.screens:
            screen_fields(request.origin.screen(model.wire), ctx)
        plan = await check_request(
            request,
            model,
            paths=paths,
            lint_cache=self.lint_cache,
            max_tools=self.settings.max_tools,
        )
        if ctx is not None:
            if plan.enforced:
                ctx.enforced = True
            if plan.refused:  # the HTTP layer's x-syntic-strict-refused, and the ledger's
                ctx.strict_refused = name_list([quote(name, safe="-_.") for name in plan.refused])
        return Prepared(model, plan, self.upstream(model, ctx), upstream_view(request, model, plan))

    async def admitted(
        self,
        request: ChatRequest,
        paths: ParamPaths,
        ctx: RequestContext,
        estimated_tokens: int,
    ) -> Prepared:
        """``admit``, then ``prepare``: the key pays for the request before any routing or
        lint, so an unknown model or a schema the lint refuses still costs one request.
        Its tokens are charged in the same step (one limiter round trip) and given back
        when ``prepare`` refuses: a request that never reaches an upstream costs none.
        ``request.n`` choices count ``n`` requests and hold ``n`` in-flight slots."""
        await self.admit(ctx, estimated_tokens, request.n)
        try:
            prepared = await self.prepare(request, paths, ctx)
            if ctx.gate is not None:
                model = prepared.model
                ctx.gate.hold_model(ctx, model.name, model.max_concurrent, request.n, ctx.principal)
            return prepared
        except BaseException:
            if self.limiter is not None and ctx.principal is not None and estimated_tokens:
                await self.limiter.add_tokens(ctx.principal, -estimated_tokens)
            raise

    async def refused_early(self, ctx: RequestContext) -> None:
        """Count a request its endpoint refused before ``admitted`` (a body that does not
        decode, an unknown ``previous_response_id``): one request, no tokens, and 429
        instead of the refusal once the key is over its limit. One ``admit_body`` admitted
        is not counted again; its tokens are given back."""
        await self.admit(ctx, 0, calls=False)

    async def admit_body(self, ctx: RequestContext, estimated_tokens: int) -> None:
        """Admit a request before its body is parsed: one request costing
        ``estimated_tokens`` (429 here, so a key over its limit costs no parse), one
        in-flight slot of its key's. The admission after decoding charges the rest."""
        await self.admit(ctx, estimated_tokens)
        ctx.charged = (1, estimated_tokens)

    def upstream(self, model: ModelConfig, ctx: RequestContext | None) -> Upstream:
        """The model's adapter for one request: safe failures retried within its deadline,
        each attempt announced to it first (a crash mid-call still bills it)."""
        adapter = self.registry.get(model)
        return RetryingUpstream(adapter, self.retry_policy, ctx)

    async def admit(
        self, ctx: RequestContext, estimated_tokens: int, n: int = 1, *, calls: bool = True
    ) -> None:
        """Ask the rate limiter, its decision kept as ``ctx.rate`` (the HTTP layer's
        ``x-ratelimit-*`` headers); raise 429 with ``retry-after`` when it refuses.

        A request of ``n`` concurrent upstream calls (``n`` choices; ``estimated_tokens``
        covers them all) counts ``n`` requests against the key's rpm and holds ``n``
        in-flight slots, ``n`` of its key's too (``calls``: it will call an upstream).
        Slots are taken before the limiter charges anything: 429
        ``concurrency_limit_exceeded`` past the key's bound, 503 ``overloaded`` past the
        process's. An ``n`` that could never be admitted (more than the key's rpm, its
        concurrency bound or the process's) is 400 ``n_above_limit``, counted as one
        request."""
        ctx.prompt_estimate = estimated_tokens // n
        if n > 1:
            refusal = self._n_refusal(ctx, n)
            if refusal is not None:
                await self.admit(ctx, 0, calls=False)
                raise refusal
        if calls and ctx.gate is not None:
            ctx.gate.hold(ctx, n, ctx.principal)
        if self.limiter is None or ctx.principal is None:
            return
        if ctx.charged is not None:
            await self._charge_rest(ctx, ctx.charged, estimated_tokens, n)
            return
        decision = await self.limiter.check(ctx.principal, estimated_tokens, n)
        self._admitted(ctx, decision)

    @staticmethod
    def _admitted(ctx: RequestContext, decision: RateDecision) -> None:
        # Kept for the HTTP layer's x-ratelimit-* (a later decision replaces an earlier one).
        ctx.rate = decision
        if not decision.allowed:
            retry = str(max(1, math.ceil(decision.retry_after_s)))
            raise RateLimited(
                "Rate limit exceeded for this API key.", headers={"retry-after": retry}
            )

    async def _charge_rest(
        self, ctx: RequestContext, charged: tuple[int, int], tokens: int, n: int
    ) -> None:
        """After ``admit_body``: the requests past those already counted are admitted
        (429 gives back every token charged); tokens the body did not show (a stored
        history's) are charged as a settle is, and an over-estimate given back."""
        assert self.limiter is not None and ctx.principal is not None
        requests, paid = charged
        rest = tokens - paid
        if n > requests:
            decision = await self.limiter.check(ctx.principal, max(0, rest), n - requests)
            if not decision.allowed:
                ctx.charged = (requests, 0)
                if paid:
                    await self.limiter.add_tokens(ctx.principal, -paid)
            self._admitted(ctx, decision)  # 429 when refused
            rest = min(0, rest)
        if rest:
            await self.limiter.add_tokens(ctx.principal, rest)
        ctx.charged = (max(requests, n), tokens)

    @staticmethod
    def _n_refusal(ctx: RequestContext, n: int) -> InvalidRequest | None:
        rpm = ctx.principal.rpm if ctx.principal is not None else None
        if rpm is not None and n > rpm:
            return InvalidRequest(
                f"n = {n} counts as {n} requests, more than this key's limit of {rpm} per "
                "minute: the request could never be admitted.",
                code="n_above_limit",
                param="n",
            )
        gate = ctx.gate
        if gate is None:
            return None
        for limit, whose in (
            (gate.limit_for(ctx.principal), "this key may run"),
            (gate.limit, "this gateway runs"),
        ):
            if limit and n > limit:
                return InvalidRequest(
                    f"n = {n} runs {n} upstream calls at once, more than the {limit} "
                    f"{whose} at once: the request could never be admitted.",
                    code="n_above_limit",
                    param="n",
                )
        return None

    async def count_tokens(
        self,
        request: ChatRequest,
        body: Mapping[str, Any],
        ctx: RequestContext,
        *,
        body_bytes: int,
    ) -> TokenCount:
        """A prompt's input tokens from the model's upstream when it can count
        (``TokenCounter``), else bytes / 4. Admitted as one request with no tokens; safe
        failures retried as a message would be."""
        model = self.model(request.model)
        await self.admit(ctx, 0)
        counter = _token_counter(self.registry.get(model))
        if counter is None:
            return TokenCount(estimate_tokens(body_bytes), "estimate")
        attempt = 0
        while True:
            try:
                return await counter.count_tokens(request, body, model)
            except UpstreamError as exc:
                wait = self.retry_policy.delay(attempt, exc, ctx.remaining_s())
                if wait is None:
                    raise
            attempt += 1
            await asyncio.sleep(wait)

    async def settle(self, ctx: RequestContext, estimated_tokens: int) -> None:
        """Once usage is known, charge actual minus estimated tokens (may be negative)."""
        if self.limiter is None or ctx.principal is None or ctx.tally is None:
            return
        delta = ctx.tally.total.total_tokens - estimated_tokens
        if delta:
            await self.limiter.add_tokens(ctx.principal, delta)

    async def complete(
        self,
        request: ChatRequest,
        ctx: RequestContext,
        paths: ParamPaths,
        *,
        estimated_tokens: int = 0,
    ) -> ChatResponse:
        """A non-streaming request end to end; ``response.usage`` sums every upstream call."""
        prepared = await self.admitted(request, paths, ctx, estimated_tokens)
        if ctx.tally is None:
            ctx.tally = Tally()
        try:
            response = await self._choice(prepared, ctx.tally)
        finally:
            await self.settle(ctx, estimated_tokens)
        drop_items(request, [response], ctx)
        return response

    async def complete_choices(
        self,
        request: ChatRequest,
        ctx: RequestContext,
        paths: ParamPaths,
        *,
        estimated_tokens: int = 0,
    ) -> list[ChatResponse]:
        """``request.n`` choices: one upstream call each, concurrently, every choice's strict
        calls validated and corrected on its own; the first failure fails the request with
        its own error and cancels the other choices (invalid arguments are never
        returned). ``ctx.tally`` counts every call, the cancelled ones included."""
        prepared = await self.admitted(request, paths, ctx, estimated_tokens)
        if ctx.tally is None:
            ctx.tally = Tally()
        tally = ctx.tally
        tasks = [asyncio.ensure_future(self._choice(prepared, tally)) for _ in range(request.n)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            results = first_failure_or_results(tasks)
            drop_items(request, results, ctx)
            return results
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.settle(ctx, estimated_tokens)

    async def _choice(self, prepared: Prepared, tally: Tally) -> ChatResponse:
        try:
            first = await prepared.upstream.complete(prepared.upstream_request, prepared.model)
        except GatewayError:
            tally.add_first(Usage())  # the call happened; its tokens are unknown
            raise
        tally.add_first(first.usage)
        return await enforce_response(
            first, prepared.upstream_request, prepared.enforce_context(tally)
        )

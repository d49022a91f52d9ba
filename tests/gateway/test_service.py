"""``ChatService`` on its own: fakes for the ``Upstream`` and ``RateLimiter`` protocols, no
HTTP. Model lookup, rate limiting, the correction path and the usage tally."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Message,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from gateway.context import RequestContext
from gateway.enforcement import OPENAI_PATHS
from gateway.errors import GatewayError, NotFound, RateLimited, UnprocessableOutput
from gateway.keys.base import Principal
from gateway.ratelimit.base import RateDecision
from gateway.service import ChatService
from gateway.settings import ModelConfig, Settings
from gateway.upstream.errors import UpstreamStatusError
from gateway.upstream.registry import UpstreamRegistry
from gateway.web import rate_limit_headers
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, REFUND_SCHEMA

MODEL = ModelConfig(name="m", provider="openai", upstream_model="u")
PRINCIPAL = Principal("key_s", "svc", rpm=10)
USAGE = Usage(10, 5)


class FakeUpstream:
    """Answers from a script, in order; records every request it was given."""

    def __init__(self, *script: ChatResponse | GatewayError) -> None:
        self.script = list(script)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        self.requests.append(request)
        step = self.script.pop(0)
        if isinstance(step, GatewayError):
            raise step
        return step

    def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        raise AssertionError("the service's non-streaming path never streams")

    async def aclose(self) -> None:
        pass


class FakeLimiter:
    def __init__(self, decision: RateDecision) -> None:
        self.decision = decision
        self.checked: list[int] = []
        self.added: list[int] = []

    async def check(self, principal: Principal, tokens: int, requests: int = 1) -> RateDecision:
        self.checked.append(tokens)
        return self.decision

    async def add_tokens(self, principal: Principal, tokens: int) -> None:
        self.added.append(tokens)


def reply(*calls: str, usage: Usage = USAGE, content: str | None = None) -> ChatResponse:
    tool_calls = tuple(ToolCall(f"call_{i}", "create_refund", args) for i, args in enumerate(calls))
    return ChatResponse(
        id="r",
        model="u",
        content=content,
        tool_calls=tool_calls,
        finish_reason="tool_calls" if calls else "stop",
        usage=usage,
    )


def request(model: str = "m", strict: bool = True, n: int = 1) -> ChatRequest:
    tool = ToolSpec(name="create_refund", parameters=REFUND_SCHEMA, strict=strict)
    return ChatRequest(
        model=model, messages=(Message("user", (TextPart("refund"),)),), tools=(tool,), n=n
    )


def service(
    upstream: FakeUpstream, limiter: FakeLimiter | None = None, retries: int = 0
) -> ChatService:
    settings = Settings(models=(MODEL,), upstream_retries=retries)
    return ChatService(settings, UpstreamRegistry({"openai": upstream}), limiter)


def context(principal: Principal | None = PRINCIPAL) -> RequestContext:
    ctx = RequestContext.start("req_svc", "/v1/chat/completions")
    ctx.principal = principal
    return ctx


def headers(ctx: RequestContext) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in ctx.response_headers()}


def rate_headers(ctx: RequestContext) -> dict[str, str]:
    """The ``x-ratelimit-*`` headers the HTTP layer gives the response from ``ctx``."""
    assert ctx.rate is not None
    return {k.decode(): v.decode() for k, v in rate_limit_headers(ctx.rate)}


async def test_an_unknown_model_is_404_after_the_rate_check_and_gets_its_tokens_back() -> None:
    upstream, limiter = FakeUpstream(reply(GOOD_ARGS)), FakeLimiter(RateDecision(True))
    with pytest.raises(NotFound) as info:
        await service(upstream, limiter).complete(
            request("nope"), context(), OPENAI_PATHS, estimated_tokens=40
        )
    assert (info.value.status, info.value.code, info.value.param) == (
        404,
        "model_not_found",
        "model",
    )
    assert "'nope'" in info.value.message
    # The request counts against the key; its estimated tokens are given back.
    assert upstream.requests == [] and limiter.checked == [40] and limiter.added == [-40]


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            RateDecision(
                False, limit_requests=3, remaining_requests=0, reset_s=12, retry_after_s=2.2
            ),
            {
                "retry-after": "3",
                "x-ratelimit-limit-requests": "3",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset": "12s",
            },
        ),
        (
            RateDecision(
                False, limit_tokens=1000, remaining_tokens=40, reset_s=0.5, retry_after_s=0.01
            ),
            {
                "retry-after": "1",
                "x-ratelimit-limit-tokens": "1000",
                "x-ratelimit-remaining-tokens": "40",
                "x-ratelimit-reset": "0.5s",
            },
        ),
        (RateDecision(False, retry_after_s=0), {"retry-after": "1"}),
    ],
    ids=["requests", "tokens-retry-rounds-up", "no-limit-headers"],
)
async def test_a_refused_rate_check_is_429_with_its_headers_and_no_upstream_call(
    decision: RateDecision, expected: dict[str, str]
) -> None:
    upstream, limiter = FakeUpstream(reply(GOOD_ARGS)), FakeLimiter(decision)
    ctx = context()
    with pytest.raises(RateLimited) as info:
        await service(upstream, limiter).complete(request(), ctx, OPENAI_PATHS, estimated_tokens=42)
    assert (info.value.status, info.value.code) == (429, "rate_limit_exceeded")
    # The service keeps the decision; the HTTP layer renders its x-ratelimit-* headers.
    assert ctx.rate is decision
    assert {**info.value.headers, **rate_headers(ctx)} == expected
    assert limiter.checked == [42]
    assert upstream.requests == []


async def test_an_admitted_request_carries_the_rate_headers() -> None:
    decision = RateDecision(True, limit_requests=10, remaining_requests=9, reset_s=60)
    ctx = context()
    await service(FakeUpstream(reply(GOOD_ARGS)), FakeLimiter(decision)).complete(
        request(), ctx, OPENAI_PATHS
    )
    got = rate_headers(ctx)
    assert (
        got["x-ratelimit-limit-requests"],
        got["x-ratelimit-remaining-requests"],
        got["x-ratelimit-reset"],
    ) == ("10", "9", "60s")


@pytest.mark.parametrize("principal", [None, PRINCIPAL], ids=["no-principal", "no-limiter"])
async def test_without_a_limiter_or_a_principal_nothing_is_checked(
    principal: Principal | None,
) -> None:
    limiter = FakeLimiter(RateDecision(False))  # would refuse, if it were asked
    svc = service(FakeUpstream(reply(GOOD_ARGS)), limiter if principal is None else None)
    answer = await svc.complete(request(), context(principal), OPENAI_PATHS)
    assert answer.tool_calls[0].raw_arguments == GOOD_ARGS
    assert limiter.checked == []


async def test_a_valid_call_goes_through_untouched_and_the_upstream_sees_no_strict() -> None:
    first = reply(GOOD_ARGS)
    upstream = FakeUpstream(first)
    ctx = context()
    answer = await service(upstream).complete(request(), ctx, OPENAI_PATHS)
    assert answer is first  # nothing corrected: the upstream's own object
    assert [t.strict for t in upstream.requests[0].tools] == [False]  # the gateway enforces
    assert ctx.tally is not None
    assert (ctx.tally.upstream_calls, ctx.tally.retries) == (1, 0)
    assert headers(ctx)["x-syntic-schema-retries"] == "0"


async def test_an_invalid_call_is_corrected_once_and_usage_sums_both_calls() -> None:
    upstream = FakeUpstream(
        reply(BAD_ARGS, usage=Usage(10, 5)), reply(GOOD_ARGS, usage=Usage(30, 7))
    )
    ctx = context()
    answer = await service(upstream).complete(request(), ctx, OPENAI_PATHS)
    (call,) = answer.tool_calls
    assert (call.id, call.name, orjson.loads(call.raw_arguments)) == (
        "call_0",
        "create_refund",
        orjson.loads(GOOD_ARGS),
    )
    assert answer.usage == Usage(40, 12)
    assert ctx.tally is not None
    assert (ctx.tally.upstream_calls, ctx.tally.retries) == (2, 1)
    assert (ctx.tally.first_usage, ctx.tally.correction_usage) == (Usage(10, 5), Usage(30, 7))
    assert headers(ctx)["x-syntic-schema-retries"] == "1"
    correction = upstream.requests[1]
    assert len(correction.messages) > len(upstream.requests[0].messages)  # with feedback
    assert BAD_ARGS in str(correction.messages)  # the model is shown what it sent


async def test_a_correction_that_stays_invalid_is_422_never_returned() -> None:
    upstream = FakeUpstream(reply(BAD_ARGS), reply(BAD_ARGS))
    ctx = context()
    with pytest.raises(UnprocessableOutput) as info:
        await service(upstream).complete(request(), ctx, OPENAI_PATHS)
    assert (info.value.status, info.value.code) == (422, "tool_arguments_invalid")
    assert len(upstream.requests) == 2  # one correction, not more
    assert ctx.tally is not None and ctx.tally.upstream_calls == 2


@pytest.mark.parametrize(
    ("script", "estimated", "added"),
    [
        ([reply(GOOD_ARGS, usage=Usage(60, 40))], 30, [70]),  # charged the difference
        ([reply(GOOD_ARGS, usage=Usage(20, 10))], 100, [-70]),  # refunded the estimate
        ([reply(GOOD_ARGS, usage=Usage(20, 10))], 30, []),  # the estimate was exact
        (
            [reply(BAD_ARGS, usage=Usage(20, 10)), reply(GOOD_ARGS, usage=Usage(25, 5))],
            0,
            [60],
        ),  # the correction counts too
        ([UpstreamStatusError("no", upstream_status=500)], 25, [-25]),  # failed: no tokens
    ],
    ids=["more", "less", "exact", "corrected", "failed"],
)
async def test_the_limiter_is_settled_with_actual_minus_estimated_tokens(
    script: list[ChatResponse | GatewayError], estimated: int, added: list[int]
) -> None:
    limiter = FakeLimiter(RateDecision(True))
    svc = service(FakeUpstream(*script), limiter)
    try:
        await svc.complete(request(), context(), OPENAI_PATHS, estimated_tokens=estimated)
    except GatewayError:
        assert isinstance(script[-1], GatewayError)
    assert limiter.checked == [estimated]
    assert limiter.added == added


async def test_a_failed_upstream_call_is_tallied_with_unknown_tokens() -> None:
    ctx = context()
    with pytest.raises(UpstreamStatusError):
        await service(FakeUpstream(UpstreamStatusError("no", upstream_status=500))).complete(
            request(), ctx, OPENAI_PATHS
        )
    assert ctx.tally is not None
    assert (ctx.tally.upstream_calls, ctx.tally.total) == (1, Usage())


async def test_a_retried_attempt_counts_as_an_upstream_call() -> None:
    upstream = FakeUpstream(
        UpstreamStatusError("busy", upstream_status=503, retry_after_s=0), reply(GOOD_ARGS)
    )
    ctx = context()
    await service(upstream, retries=1).complete(request(), ctx, OPENAI_PATHS)
    assert ctx.tally is not None
    assert ctx.tally.upstream_calls == 2
    assert ctx.tally.retried_attempts == {"503": 1}


async def test_choices_are_one_call_each_and_one_failure_fails_them_all() -> None:
    ctx = context()
    answers = await service(FakeUpstream(reply(GOOD_ARGS), reply(GOOD_ARGS))).complete_choices(
        request(n=2), ctx, OPENAI_PATHS
    )
    assert len(answers) == 2 and ctx.tally is not None and ctx.tally.upstream_calls == 2
    failing = FakeUpstream(reply(GOOD_ARGS), UpstreamStatusError("no", upstream_status=500))
    with pytest.raises(UpstreamStatusError):
        await service(failing).complete_choices(request(n=2), context(), OPENAI_PATHS)


def _strict_flags(upstream: FakeUpstream) -> list[bool]:
    return [t.strict for r in upstream.requests for t in r.tools]


async def test_a_constrained_model_gets_the_strict_flag_through() -> None:
    constrained = ModelConfig(name="c", provider="openai", upstream_model="u", constrained=True)
    upstream = FakeUpstream(reply(GOOD_ARGS))
    svc = ChatService(Settings(models=(constrained,)), UpstreamRegistry({"openai": upstream}), None)
    await svc.complete(request("c"), context(), OPENAI_PATHS)
    assert _strict_flags(upstream) == [True]

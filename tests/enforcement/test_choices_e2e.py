"""``n > 1`` on chat completions: every choice's strict calls validated and corrected on
their own, streamed too; usage and ``x-syntic-schema-retries`` count every correction."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import openai
import pytest

from tests.dialects.test_openai_stream_e2e import ledger_row, sdk_stream
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, make_chat, refund_tool
from tests.support.scripted_upstream import Call, RecordedRequest, Reply, ScriptedUpstream, Step

GOOD = json.loads(GOOD_ARGS)


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # shared: tests/support/fixtures.py


def responder(bad_firsts: int, correction: str) -> Callable[[RecordedRequest], Step]:
    """The first ``bad_firsts`` first-attempt requests get invalid arguments, the others
    valid ones; a correction (its last message is the tool feedback) gets ``correction``.
    Decided per request, since the choices' requests arrive concurrently."""
    count = itertools.count()
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Step:
        if request.body["messages"][-1]["role"] == "tool":
            return Reply(tool_calls=[Call("create_refund", correction)])
        with lock:
            k = next(count)
        return Reply(tool_calls=[Call("create_refund", BAD_ARGS if k < bad_firsts else GOOD_ARGS)])

    return respond


def test_each_choice_is_corrected_on_its_own(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = responder(bad_firsts=1, correction=GOOD_ARGS)
    result = make_chat("sync", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()], n=3)
    choices = result.completion.choices
    assert [c.index for c in choices] == [0, 1, 2]
    for choice in choices:
        [call] = choice.message.tool_calls or []
        assert json.loads(call.function.arguments) == GOOD  # type: ignore[union-attr]
        assert choice.finish_reason == "tool_calls"
    assert result.headers["x-syntic-schema-retries"] == "1"
    usage = result.completion.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (40, 20)  # 3 firsts + 1 fix
    assert (usage.model_extra or {})["schema_retries"] == 1
    assert len(upstream.requests) == 4
    assert all("n" not in r.body for r in upstream.requests)  # one choice per call


def test_two_bad_choices_count_two_retries(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.responder = responder(bad_firsts=2, correction=GOOD_ARGS)
    result = make_chat("async", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()], n=2)
    assert result.headers["x-syntic-schema-retries"] == "2"
    assert len(result.completion.choices) == 2


def test_a_choice_still_invalid_fails_the_request(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = responder(bad_firsts=1, correction=BAD_ARGS)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        make_chat("sync", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()], n=2)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("tool_arguments_invalid", "/amount_pence")
    assert info.value.response.headers["x-syntic-schema-retries"] == "1"


def test_streamed_choices(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    upstream.responder = responder(bad_firsts=1, correction=GOOD_ARGS)
    out = sdk_stream("sync", gw, n=2)
    assert out.error is None and out.completion is not None
    assert sorted(c.index for c in out.completion.choices) == [0, 1]
    for choice in out.completion.choices:
        [call] = choice.message.tool_calls or []
        assert json.loads(call.function.arguments) == GOOD  # type: ignore[union-attr]
    released = [
        tc.function.arguments
        for c in out.chunks
        for ch in c.choices
        for tc in ch.delta.tool_calls or []
        if tc.function is not None and tc.function.arguments
    ]
    assert BAD_ARGS not in released
    usage = out.chunks[-1].usage
    assert usage is not None and (usage.model_extra or {})["schema_retries"] == 1
    assert (usage.prompt_tokens, usage.completion_tokens) == (30, 15)  # 2 firsts + 1 fix
    row = ledger_row(gw, out.headers["x-request-id"])
    assert (row["schema_retries"], row["upstream_calls"]) == (1, 3)


def test_streamed_choice_still_invalid_is_an_in_band_error(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = responder(bad_firsts=1, correction=BAD_ARGS)
    out = sdk_stream("async", gw, n=2)
    assert out.error is not None and out.error.code == "tool_arguments_invalid"
    assert not any(
        tc.function is not None and tc.function.arguments == BAD_ARGS
        for c in out.chunks
        for ch in c.choices
        for tc in ch.delta.tool_calls or []
    )


def test_n_above_the_cap_is_refused(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        make_chat("sync", gw.base_url + "/v1", gw.api_key)(tools=[refund_tool()], n=17)
    assert info.value.response.json()["error"]["param"] == "n"
    assert upstream.requests == []

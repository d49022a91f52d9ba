"""``n > 1`` when one choice fails while the others are still running, through HTTP.

The scripted upstream holds the other choices' calls open (``Hang``) and fails one only once
every call is in (``after=``), so the failure always lands while the rest are in flight.
The request ends with that failure's own envelope (never a 500), the other calls are
cancelled (the upstream sees them leave), and the ledger row counts every call the
upstream received, the cancelled ones included.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.reliability.helpers import ledger_rows
from tests.support.gateway_proc import GatewayProcess
from tests.support.openai_helpers import BAD_ARGS, MESSAGES, refund_tool
from tests.support.scripted_upstream import (
    Call,
    Hang,
    HttpError,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    Step,
)

N = 4
REJECTED = {
    "error": {
        "message": "the vendor refuses this one",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }
}


def _is_correction(request: RecordedRequest) -> bool:
    return bool(request.body["messages"][-1]["role"] == "tool")


def _one_fails_last(
    first: Callable[[int], Step], corrections: Callable[[int], Step]
) -> Callable[[RecordedRequest], Step]:
    """Steps by arrival order, first calls and corrections counted apart (the choices'
    requests arrive concurrently)."""
    counters = {False: itertools.count(), True: itertools.count()}
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Step:
        fix = _is_correction(request)
        with lock:
            k = next(counters[fix])
        return corrections(k) if fix else first(k)

    return respond


def _rejected_first(k: int) -> Step:
    # the last choice to arrive is refused once all N are in; the others never answer
    return HttpError(400, REJECTED, after=N) if k == N - 1 else Hang()


def _bad_first(k: int) -> Step:
    return Reply(tool_calls=[Call("create_refund", BAD_ARGS)])


def _bad_correction(k: int) -> Step:
    # every choice needs a correction; the last one in stays invalid (422) once all are in
    return (
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)], after=2 * N) if k == N - 1 else Hang()
    )


def _create(gw: GatewayProcess, stream: bool) -> tuple[openai.APIStatusError | None, str]:
    """One ``n = N`` request; the error the SDK raised (None: none) and the request id."""
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    ) as client:
        kw: dict[str, Any] = {
            "model": "strict-model",
            "messages": MESSAGES,
            "tools": [refund_tool()],
            "n": N,
        }
        try:
            raw = client.chat.completions.with_raw_response.create(stream=stream, **kw)
        except openai.APIStatusError as exc:
            return exc, exc.response.headers["x-request-id"]
        if stream:
            for _ in raw.parse():
                pass
        return None, raw.headers["x-request-id"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_failing_choice_ends_the_request_with_its_own_error_and_bills_every_call(
    gateway: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.responder = _one_fails_last(_rejected_first, _bad_correction)
    error, request_id = _create(gateway, stream)
    assert error is not None and error.status_code == 400, error
    body = error.response.json()["error"]
    assert (body["code"], body["param"], body["message"]) == (
        "upstream_rejected",
        "messages",
        "the vendor refuses this one",
    )
    # the other choices were cancelled: the upstream saw each of them leave
    assert sum(upstream.wait_for_disconnect(i) for i in range(N)) == N - 1
    row = ledger_rows(gateway, [request_id])[request_id]
    assert (row["status"], row["error_code"]) == (400, "upstream_rejected")
    assert row["upstream_calls"] == len(upstream.requests) == N


def test_a_choice_still_invalid_after_its_correction_is_422_and_bills_every_correction(
    gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.responder = _one_fails_last(_bad_first, _bad_correction)
    error, request_id = _create(gateway, stream=False)
    assert error is not None and error.status_code == 422, error
    assert error.response.json()["error"]["code"] == "tool_arguments_invalid"
    assert len(upstream.wait_for_requests(2 * N)) == 2 * N
    assert sum(upstream.wait_for_disconnect(i) for i in range(2 * N)) == N - 1
    row = ledger_rows(gateway, [request_id])[request_id]
    assert (row["status"], row["error_code"]) == (422, "tool_arguments_invalid")
    # N first calls and N corrections reached the upstream; N - 1 corrections were cut off
    assert row["upstream_calls"] == len(upstream.requests) == 2 * N

"""Large bodies cannot block the event loop or cost a refused key a parse: through HTTP on
gateways with PostgreSQL and Redis, every dialect's SDK as the client.

- ``max_input_items`` bounds messages / input items and the content blocks in them,
  counted together: 400 ``too_many_input_items`` with the ``param`` of the first one over;
- a body of ``body_offload_bytes`` or more is parsed, decoded and re-encoded in a worker
  (``syntic_body_offloaded_total``) and answered exactly as one handled inline;
- while a worker parses a huge body, the loop answers other requests;
- a large body from a key over its rate limit is refused before anything parses it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.ops.helpers import scrape
from tests.support.databases import pg_database
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream

REDIS = "redis://127.0.0.1:6379/0"
OFFLOAD_BYTES = 64 * 1024
MAX_ITEMS = 50
OFFLOADED = ("syntic_body_offloaded_total", ())
BUSY = ("syntic_body_workers_busy", ())


def _gateway(workdir: Path, upstream: ScriptedUpstream, url: str, **server: Any) -> GatewayProcess:
    return start_gateway(
        workdir,
        [model_table("m", upstream.base_url)],
        server={"body_offload_workers": 1, **server},
        env={"SYNTIC_DATABASE_URL": url, "SYNTIC_REDIS_URL": REDIS},
    )


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with pg_database("syntic_large_bodies") as url:
        yield url


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
    database: str,
) -> Iterator[GatewayProcess]:
    """Bodies of 64 KiB and more off the loop; at most 50 items."""
    gw = _gateway(
        tmp_path_factory.mktemp("large-bodies"),
        scripted_upstream_server,
        database,
        body_offload_bytes=OFFLOAD_BYTES,
        max_input_items=MAX_ITEMS,
    )
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def upstream(scripted_upstream_server: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    scripted_upstream_server.reset()
    scripted_upstream_server.responder = lambda _r: Reply(content="ok")
    yield scripted_upstream_server
    scripted_upstream_server.reset()


def oa(gw: GatewayProcess, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=key or gw.api_key, max_retries=0, timeout=60
    )


def an(gw: GatewayProcess, key: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=gw.base_url, api_key=key or gw.api_key, max_retries=0, timeout=60
    )


def offloaded(gw: GatewayProcess) -> float:
    return scrape(gw.base_url).get(OFFLOADED, 0.0)


def text_messages(n: int, text: str = "hi") -> list[Any]:
    return [{"role": "user", "content": text} for _ in range(n)]


def padded(size: int) -> list[Any]:
    """A few messages of ``size`` bytes of text in all."""
    return text_messages(4, "x" * (size // 4))


# -- max_input_items ---------------------------------------------------------------------


def _refused(call: Any) -> tuple[int, str, str]:
    try:
        call()
    except (openai.APIStatusError, anthropic.APIStatusError) as exc:
        error = exc.response.json()["error"]
        return exc.status_code, error["code"], error["param"]
    raise AssertionError("the request was not refused")


def test_max_input_items_on_chat(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    with oa(gw) as client:
        assert (
            client.chat.completions.create(model="m", messages=text_messages(MAX_ITEMS))
            .choices[0]
            .message.content
            == "ok"
        )
        over = lambda: client.chat.completions.create(  # noqa: E731
            model="m", messages=text_messages(MAX_ITEMS + 1)
        )
        assert _refused(over) == (400, "too_many_input_items", f"messages[{MAX_ITEMS}]")
        one: Any = [{"role": "user", "content": [{"type": "text", "text": "hi"}] * MAX_ITEMS}]
        blocks = lambda: client.chat.completions.create(model="m", messages=one)  # noqa: E731
        # One message and its 50 parts: the 50th part is the 51st item.
        assert _refused(blocks) == (
            400,
            "too_many_input_items",
            f"messages[0].content[{MAX_ITEMS - 1}]",
        )
    assert len(upstream.requests) == 1


def test_max_input_items_on_responses(gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    items: Any = [{"role": "user", "content": "hi"} for _ in range(MAX_ITEMS + 1)]
    with oa(gw) as client:
        over = lambda: client.responses.create(model="m", input=items)  # noqa: E731
        assert _refused(over) == (400, "too_many_input_items", f"input[{MAX_ITEMS}]")
        assert client.responses.create(model="m", input=items[:MAX_ITEMS]).output_text == "ok"


def test_max_input_items_on_messages_and_count_tokens(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    messages: Any = text_messages(MAX_ITEMS + 1)
    with an(gw) as client:
        over = lambda: client.messages.create(  # noqa: E731
            model="m", max_tokens=16, messages=messages
        )
        assert _refused(over) == (400, "too_many_input_items", f"messages[{MAX_ITEMS}]")
        count = lambda: client.messages.count_tokens(model="m", messages=messages)  # noqa: E731
        assert _refused(count) == (400, "too_many_input_items", f"messages[{MAX_ITEMS}]")
        system: Any = [{"type": "text", "text": "be brief"} for _ in range(MAX_ITEMS)]

        def with_system() -> Any:
            return client.messages.create(
                model="m", max_tokens=16, system=system, messages=messages[:1]
            )

        assert _refused(with_system) == (400, "too_many_input_items", "messages[0]")
        assert (
            client.messages.count_tokens(model="m", messages=messages[:MAX_ITEMS]).input_tokens > 0
        )
    assert upstream.requests == []


# -- off the loop, same answer -------------------------------------------------------------


@pytest.fixture(scope="module")
def inline_gw(
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
    database: str,
) -> Iterator[GatewayProcess]:
    """The same gateway with every body handled on the loop."""
    gw = _gateway(
        tmp_path_factory.mktemp("inline-bodies"),
        scripted_upstream_server,
        database,
        body_offload_bytes=1 << 40,
        max_input_items=MAX_ITEMS,
    )
    try:
        yield gw
    finally:
        gw.stop()


def _sent(upstream: ScriptedUpstream) -> list[Any]:
    """What the upstream received (its JSON, parsed)."""
    got: list[RecordedRequest] = list(upstream.requests)
    upstream.requests.clear()
    return [r.body for r in got]


def test_a_large_body_is_answered_off_the_loop_as_inline(
    gw: GatewayProcess, inline_gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    messages: Any = padded(4 * OFFLOAD_BYTES)
    answers: list[Any] = []
    sent: list[Any] = []
    for target in (gw, inline_gw):
        before = offloaded(target)
        with oa(target) as client:
            chat = client.chat.completions.create(model="m", messages=messages)
            first = client.responses.create(model="m", input=messages, store=True)
            # A continuation reads the stored conversation (over the threshold) back.
            then = client.responses.create(
                model="m", input="and then?", previous_response_id=first.id
            )
        answers.append((chat.choices[0].message.content, first.output_text, then.output_text))
        sent.append(_sent(upstream))
        if target is gw:
            # Each body parsed, each re-encoded, the stored conversation read and rebuilt.
            assert offloaded(target) - before >= 7
        else:
            assert offloaded(target) == before == 0
    assert answers[0] == answers[1] == ("ok", "ok", "ok")
    assert sent[0] == sent[1] and len(sent[0]) == 3


# -- the loop stays free -------------------------------------------------------------------


@pytest.fixture(scope="module")
def roomy_gw(
    scripted_upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
    database: str,
) -> Iterator[GatewayProcess]:
    """Room for a huge body of tiny items: seconds of decoding in one worker."""
    gw = _gateway(
        tmp_path_factory.mktemp("roomy-bodies"),
        scripted_upstream_server,
        database,
        max_input_items=2_000_000,
        max_body_bytes=32 * 1024 * 1024,
    )
    try:
        yield gw
    finally:
        gw.stop()


def test_the_loop_answers_while_a_huge_body_parses(
    roomy_gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    gw = roomy_gw
    # ~900,000 tiny messages (28 MB): the decode alone takes seconds, in the worker.
    huge = orjson.dumps({"model": "no-such-model", "messages": text_messages(900_000)})
    headers = {"authorization": f"Bearer {gw.api_key}", "content-type": "application/json"}
    done = threading.Event()

    def send_huge() -> int:
        try:
            return httpx.post(
                gw.base_url + "/v1/chat/completions", content=huge, headers=headers, timeout=300
            ).status_code
        finally:
            done.set()

    with ThreadPoolExecutor(1) as pool, oa(gw) as client:
        big = pool.submit(send_huge)
        while scrape(gw.base_url).get(BUSY, 0.0) < 1:  # the worker has the huge body
            assert not done.wait(0.02), "the huge body was answered before a worker took it"
        small = client.chat.completions.create(model="m", messages=text_messages(1))
        still = scrape(gw.base_url).get(BUSY, 0.0)
        answered_meanwhile = not done.is_set()
        assert small.choices[0].message.content == "ok"
        assert (still, answered_meanwhile) == (1.0, True)
        assert big.result(timeout=300) == 404  # decoded in full, then the unknown model


# -- a refused key costs no parse ----------------------------------------------------------


@pytest.mark.parametrize("shape", ["large", "idempotency-key", "dense"])
def test_a_rate_limited_keys_large_body_is_refused_without_a_parse(
    gw: GatewayProcess, upstream: ScriptedUpstream, shape: str
) -> None:
    """A body past the threshold, one sent with an ``Idempotency-Key``, and one under it
    but dense with objects (2,100 tiny messages, refused at max_input_items when parsed)."""
    key = gw.create_key(f"rpm1-{shape}", "--rpm", "1")
    dense = shape == "dense"
    messages = text_messages(2100, "x") if dense else padded(2 * OFFLOAD_BYTES)
    body = orjson.dumps({"model": "m", "messages": messages})
    assert (len(body) < OFFLOAD_BYTES) == dense
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}

    def post(n: int) -> httpx.Response:
        extra = {"idempotency-key": f"large-{n}"} if shape == "idempotency-key" else {}
        return httpx.post(
            gw.base_url + "/v1/chat/completions",
            content=body,
            headers={**headers, **extra},
            timeout=60,
        )

    before = offloaded(gw)
    assert post(1).status_code == (400 if dense else 200)
    parsed = offloaded(gw)
    assert parsed > before  # the admitted one was looked at off the loop
    refused = post(2)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert offloaded(gw) == parsed  # nothing looked inside the refused body
    assert len(upstream.requests) == (0 if dense else 1)

"""What one key can make the gateway do, bounded: through HTTP on a gateway with PostgreSQL
and Redis (and the session's SQLite gateway for the stores).

- every request counts against the key's rate limit before routing or lint: unknown models
  (404) and lint refusals (400) run into 429, and give back their estimated tokens;
- ``model`` is at most 256 bytes, tool names follow ``^[a-zA-Z0-9_-]{1,64}$`` (400 with
  ``param``), ``x-syntic-strict-refused`` is capped, a key pasted into ``model`` is masked
  in the ledger as in the log;
- JSON nested deeper than 128 levels is ``400 invalid_json`` with the path, wherever a
  client's JSON is read;
- a malformed response id is 404 without a database call, on both stores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import anthropic
import asyncpg
import httpx
import openai
import orjson
import pytest

from gateway.keys.secrets import generate_key
from tests.support.databases import pg_database, run_sync
from tests.support.fixtures import e2e_models
from tests.support.gateway_proc import GatewayProcess, start_gateway
from tests.support.scripted_upstream import Reply, ScriptedUpstream

REDIS = "redis://127.0.0.1:6379/0"
USER: list[Any] = [{"role": "user", "content": "hi"}]
LINT_REFUSED = {"type": "object", "properties": {"order": {"type": "string"}}}  # strict: no


class PgGateway:
    def __init__(self, gw: GatewayProcess, database_url: str) -> None:
        self.gw = gw
        self.database_url = database_url

    def rows(self, request_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The ledger rows of ``request_ids``, waiting until each is written."""

        async def fetch() -> dict[str, dict[str, Any]]:
            conn = await asyncpg.connect(self.database_url)
            try:
                for _ in range(400):
                    got = await conn.fetch(
                        "SELECT * FROM usage_records WHERE request_id = ANY($1::text[])",
                        request_ids,
                    )
                    if len(got) == len(request_ids):
                        return {r["request_id"]: dict(r) for r in got}
                    await conn.execute("SELECT pg_sleep(0.025)")
                raise AssertionError(f"ledger rows missing: {len(got)} of {len(request_ids)}")
            finally:
                await conn.close()

        return run_sync(fetch())

    def max_model_bytes(self) -> int:
        async def fetch() -> int:
            conn = await asyncpg.connect(self.database_url)
            try:
                value = await conn.fetchval(
                    "SELECT COALESCE(MAX(octet_length(model)), 0) FROM usage_records"
                )
                return int(value)
            finally:
                await conn.close()

        return run_sync(fetch())


@pytest.fixture(scope="module")
def pg(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PgGateway]:
    with pg_database("syntic_abuse") as url:
        gw = start_gateway(
            tmp_path_factory.mktemp("abuse-gw"),
            e2e_models(scripted_upstream_server.base_url),
            env={"SYNTIC_DATABASE_URL": url, "SYNTIC_REDIS_URL": REDIS},
            key_name="abuse",
        )
        try:
            yield PgGateway(gw, url)
        finally:
            gw.stop()


def oa(gw: GatewayProcess, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=key or gw.api_key, max_retries=0, timeout=20
    )


def an(gw: GatewayProcess, key: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=gw.base_url, api_key=key or gw.api_key, max_retries=0, timeout=20
    )


def post(gw: GatewayProcess, path: str, body: bytes, key: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key or gw.api_key}", "content-type": "application/json"}
    return httpx.post(gw.base_url + path, content=body, headers=headers, timeout=20)


# -- admission before work ---------------------------------------------------------------


def test_unknown_models_count_against_rpm_until_429(pg: PgGateway) -> None:
    key = pg.gw.create_key("rpm3-unknown", "--rpm", "3")
    with oa(pg.gw, key) as client:
        for _ in range(3):
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="no-such-model", messages=USER)
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="no-such-model", messages=USER)
    assert info.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert int(info.value.response.headers["retry-after"]) >= 1


def test_lint_refusals_count_against_rpm_until_429(
    pg: PgGateway, upstream: ScriptedUpstream
) -> None:
    key = pg.gw.create_key("rpm2-lint", "--rpm", "2")
    tool: Any = {
        "type": "function",
        "function": {"name": "lookup", "strict": True, "parameters": LINT_REFUSED},
    }
    with oa(pg.gw, key) as client:
        for _ in range(2):
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(model="strict-model", messages=USER, tools=[tool])
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="strict-model", messages=USER, tools=[tool])
    assert upstream.requests == []


def test_requests_refused_while_decoding_count_too(pg: PgGateway) -> None:
    key = pg.gw.create_key("rpm2-decode", "--rpm", "2")
    bad: Any = [{"type": "function", "function": {"name": "a b", "parameters": {}}}]
    with oa(pg.gw, key) as client:
        for _ in range(2):
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(model="plain-model", messages=USER, tools=bad)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="plain-model", messages=USER, tools=bad)
    with an(pg.gw, key) as an_client, pytest.raises(anthropic.RateLimitError):
        an_client.messages.create(model="q" * 300, max_tokens=8, messages=USER)
    assert post(pg.gw, "/v1/chat/completions", b"{not json", key).status_code == 429


def test_unknown_previous_response_ids_count_against_rpm(pg: PgGateway) -> None:
    key = pg.gw.create_key("rpm2-previous", "--rpm", "2")
    with oa(pg.gw, key) as client:
        for _ in range(2):
            with pytest.raises(openai.NotFoundError):
                client.responses.create(
                    model="plain-model", input="hi", previous_response_id="resp_0123abcd"
                )
        with pytest.raises(openai.RateLimitError):
            client.responses.create(
                model="plain-model", input="hi", previous_response_id="resp_0123abcd"
            )


def test_refused_requests_give_their_tokens_back(pg: PgGateway, upstream: ScriptedUpstream) -> None:
    # Each body is estimated at ~500 tokens: were the refusals charged, the third would
    # already be over this key's 1000 tokens per minute.
    key = pg.gw.create_key("tpm1000", "--tpm", "1000")
    padded: Any = [{"role": "user", "content": "x" * 2000}]
    with oa(pg.gw, key) as client:
        for _ in range(5):
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="no-such-model", messages=padded)
        upstream.queue(Reply(content="ok", usage=(10, 5)))
        raw = client.chat.completions.with_raw_response.create(model="plain-model", messages=padded)
    assert raw.parse().choices[0].message.content == "ok"


# -- bounded strings -----------------------------------------------------------------------


def test_a_model_over_256_bytes_is_400_and_reaches_neither_ledger_nor_log(pg: PgGateway) -> None:
    with oa(pg.gw) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="q" * 300, messages=USER)
        assert info.value.response.json()["error"]["param"] == "model"
        with pytest.raises(openai.NotFoundError) as found:  # 256 bytes: allowed, unknown
            client.chat.completions.create(model="q" * 256, messages=USER)
        with pytest.raises(openai.BadRequestError) as multibyte:  # 129 x 2 bytes
            client.chat.completions.create(model="é" * 129, messages=USER)
    assert multibyte.value.response.json()["error"]["param"] == "model"
    with an(pg.gw) as client, pytest.raises(anthropic.BadRequestError) as an_info:
        client.messages.create(model="q" * 300, max_tokens=8, messages=USER)
    assert an_info.value.response.json()["error"]["param"] == "model"
    with oa(pg.gw) as client, pytest.raises(openai.BadRequestError) as resp_info:
        client.responses.create(model="q" * 300, input="hi")
    assert resp_info.value.response.json()["error"]["param"] == "model"
    ids = [
        e.response.headers["x-request-id"]
        for e in (info.value, found.value, an_info.value, resp_info.value)
    ]
    rows = pg.rows(ids)
    assert rows[ids[1]]["model"] == "q" * 256
    assert [rows[i]["model"] for i in (ids[0], ids[2], ids[3])] == [None, None, None]
    assert pg.max_model_bytes() <= 256
    assert "q" * 257 not in pg.gw.log()


def test_a_model_with_a_nul_is_400(pg: PgGateway) -> None:
    r = post(pg.gw, "/v1/chat/completions", b'{"model": "m\\u0000x", "messages": []}')
    assert (r.status_code, r.json()["error"]["param"]) == (400, "model")


BAD_NAMES = ["a" * 65, "a b", "", "caf\u00e9", "dot.name"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_tool_names_follow_the_vendor_rule_on_every_dialect(pg: PgGateway, name: str) -> None:
    ok: dict[str, Any] = {"type": "object", "properties": {}}
    with oa(pg.gw) as client:
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(
                model="strict-model",
                messages=USER,
                tools=[
                    {"type": "function", "function": {"name": "fine", "parameters": ok}},
                    {"type": "function", "function": {"name": name, "parameters": ok}},
                ],
            )
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(
                model="strict-model",
                input="hi",
                tools=[
                    {"type": "function", "name": "fine", "parameters": ok, "strict": False},
                    {"type": "function", "name": name, "parameters": ok, "strict": False},
                ],
            )
    with an(pg.gw) as an_client, pytest.raises(anthropic.BadRequestError) as messages:
        an_client.messages.create(
            model="strict-model",
            max_tokens=8,
            messages=USER,
            tools=[{"name": "fine", "input_schema": ok}, {"name": name, "input_schema": ok}],
        )
    params = [e.value.response.json()["error"]["param"] for e in (chat, responses, messages)]
    assert params == ["tools[1].function.name", "tools[1].name", "tools[1].name"]


def test_a_64_char_tool_name_is_accepted(pg: PgGateway, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="ok"))
    name = "A-z_0" + "9" * 59
    with oa(pg.gw) as client:
        done = client.chat.completions.create(
            model="plain-model",
            messages=USER,
            tools=[{"type": "function", "function": {"name": name, "parameters": {}}}],
        )
    assert done.choices[0].message.content == "ok"
    assert upstream.requests[0].body["tools"][0]["function"]["name"] == name


def test_the_strict_refused_header_is_capped_with_a_count(
    pg: PgGateway, upstream: ScriptedUpstream
) -> None:
    free_form: dict[str, object] = {
        "type": "object",
        "properties": {"headers": {"additionalProperties": {}}},
    }
    names = [f"tool_{i:02d}_" + "n" * 52 for i in range(40)]  # 60 bytes each: 2.4 kB in all
    upstream.queue(Reply(content="ok"))
    with oa(pg.gw) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="strict-model",
            messages=USER,
            extra_headers={"x-syntic-strictify": "1"},
            tools=[
                {"type": "function", "function": {"name": n, "parameters": free_form}}
                for n in names
            ],
        )
    header = raw.headers["x-syntic-strict-refused"]
    assert len(header) <= 1024
    *shown, more = header.split(",")
    assert shown == names[: len(shown)] and more == f"+{40 - len(shown)}"
    [row] = pg.rows([raw.headers["x-request-id"]]).values()
    assert row["strict_refused"] == header


def test_a_key_pasted_into_model_is_masked_in_the_ledger_and_the_log(pg: PgGateway) -> None:
    pasted = generate_key("live")
    with oa(pg.gw) as client, pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model=pasted, messages=USER)
    rid = info.value.response.headers["x-request-id"]
    [row] = pg.rows([rid]).values()
    assert row["model"] == "sk_live_[REDACTED]"
    assert pasted not in pg.gw.log()


# -- depth ---------------------------------------------------------------------------------


def nest_objects(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def chat_parameters(deep: Any) -> dict[str, Any]:
    return {
        "model": "plain-model",
        "messages": USER,
        "tools": [{"type": "function", "function": {"name": "t", "parameters": deep}}],
    }


def chat_metadata(deep: Any) -> dict[str, Any]:
    return {"model": "plain-model", "messages": USER, "metadata": {"k": deep}}


def chat_strict(deep: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"x": deep}}
    return {
        "model": "strict-model",
        "messages": USER,
        "tools": [
            {"type": "function", "function": {"name": "t", "strict": True, "parameters": schema}}
        ],
    }


def messages_tool_use(deep: Any) -> dict[str, Any]:
    return {
        "model": "an-strict",
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"q": deep}}
                ],
            },
        ],
    }


def messages_schema(deep: Any) -> dict[str, Any]:
    return {
        "model": "an-strict",
        "max_tokens": 8,
        "messages": USER,
        "tools": [{"name": "t", "input_schema": {"type": "object", "properties": deep}}],
    }


def responses_parameters(deep: Any) -> dict[str, Any]:
    return {
        "model": "plain-model",
        "input": "hi",
        "tools": [{"type": "function", "name": "t", "parameters": deep, "strict": False}],
    }


def responses_input(deep: Any) -> dict[str, Any]:
    return {
        "model": "plain-model",
        "input": [{"type": "function_call_output", "call_id": "c", "output": deep}],
    }


def admin_key(deep: Any) -> dict[str, Any]:
    return {"name": "deep", "rpm": deep}


def schema_check(deep: Any) -> dict[str, Any]:
    return {"schemas": [{"type": "object", "properties": {"x": deep}}]}


PLACES: list[tuple[str, Callable[[Any], dict[str, Any]], str]] = [
    ("/v1/chat/completions", chat_parameters, "tools[0].function.parameters"),
    ("/v1/chat/completions", chat_metadata, "metadata.k"),
    ("/v1/chat/completions", chat_strict, "tools[0].function.parameters.properties.x"),
    ("/v1/messages", messages_tool_use, "messages[1].content[0].input.q"),
    ("/v1/messages", messages_schema, "tools[0].input_schema.properties"),
    ("/v1/responses", responses_parameters, "tools[0].parameters"),
    ("/v1/responses", responses_input, "input[0].output"),
    ("/v1/schemas/check", schema_check, "schemas[0].properties.x"),
    ("/admin/keys", admin_key, "rpm"),
]


@pytest.fixture(scope="module")
def admin_key_secret(pg: PgGateway) -> str:
    return pg.gw.create_key("deep-admin", "--admin")


@pytest.mark.parametrize("depth", [129, 1000])
@pytest.mark.parametrize(
    ("path", "build", "where"), PLACES, ids=[f"{p[0]}:{p[1].__name__}" for p in PLACES]
)
def test_json_deeper_than_128_is_400_with_the_path(
    pg: PgGateway,
    admin_key_secret: str,
    path: str,
    build: Callable[[Any], dict[str, Any]],
    where: str,
    depth: int,
) -> None:
    key = admin_key_secret if path.startswith("/admin") else None
    # orjson encodes at most 254 levels, so the deep value is spliced into the body as text.
    marker = "DEEP_VALUE_HERE"
    text = orjson.dumps(build(marker)).decode()
    body = text.replace(f'"{marker}"', "[" * depth + "]" * depth).encode()
    r = post(pg.gw, path, body, key)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_json"
    assert error["param"].startswith(where), error["param"]
    assert "128" in error["message"]


def test_json_128_deep_is_served(pg: PgGateway, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="ok"))
    # The body's own levels: the object, tools, the tool, function; then the parameters.
    r = post(pg.gw, "/v1/chat/completions", orjson.dumps(chat_parameters(nest_objects(124))))
    assert r.status_code == 200, r.text
    r = post(pg.gw, "/v1/chat/completions", orjson.dumps(chat_parameters(nest_objects(125))))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


# -- ids -----------------------------------------------------------------------------------


def test_response_ids_are_28_hex_digits_and_unique(
    pg: PgGateway, upstream: ScriptedUpstream
) -> None:
    seen = set()
    with oa(pg.gw) as client:
        for _ in range(20):
            upstream.queue(Reply(content="ok"))
            response = client.responses.create(model="plain-model", input="hi", store=False)
            assert re.fullmatch(r"resp_[0-9a-f]{28}", response.id), response.id
            seen.add(response.id)
    assert len(seen) == 20


MALFORMED = [
    "resp_\x00abc",
    "resp_" + "a" * 300,
    "msg_0123456789abcdef",
    "resp_caf\u00e9",
    "resp_a b",
]


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
@pytest.mark.parametrize("rid", MALFORMED, ids=["nul", "long", "prefix", "non-ascii", "space"])
def test_malformed_response_ids_are_404(
    request: pytest.FixtureRequest, backend: str, rid: str
) -> None:
    gw: GatewayProcess = (
        request.getfixturevalue("pg").gw
        if backend == "postgresql"
        else request.getfixturevalue("gateway")
    )
    url = gw.base_url + "/v1/responses/" + quote(rid, safe="")
    headers = {"authorization": f"Bearer {gw.api_key}"}
    for method in ("GET", "DELETE"):
        r = httpx.request(method, url, headers=headers, timeout=20)
        assert r.status_code == 404, (method, r.status_code, r.text)
        assert r.json()["error"]["code"] in ("response_not_found", "not_found")
        assert "retry-after" not in r.headers
    with oa(gw) as client, pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="plain-model", input="hi", previous_response_id=rid)
    error = info.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("response_not_found", "previous_response_id")
    assert rid not in info.value.response.text  # a malformed id is not echoed

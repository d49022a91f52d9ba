"""``correction = "constrained"`` on OpenAI-compatible upstreams: the openai SDK -> a gateway
subprocess -> the scripted upstream, which records the exact body of each call.

The first call goes out as it always has (tools, no schema field); the correction call asks
for the tool's arguments as a reply constrained to its schema, in the engine's own field,
and that reply becomes the call's arguments (same id). The gateway still validates it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from gateway.settings import ConfigError, load_settings
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.openai_helpers import (
    BAD_ARGS,
    GOOD_ARGS,
    MESSAGES,
    REFUND_SCHEMA,
    calls_of,
    envelope,
    make_chat,
    refund_tool,
)
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

# Each engine's documented request field for a JSON-schema-constrained reply.
EXPECTED_FIELD: dict[str, dict[str, Any]] = {
    "vllm": {"structured_outputs": {"json": REFUND_SCHEMA}},
    "llama_cpp": {"json_schema": REFUND_SCHEMA},
    "sglang": {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "create_refund", "schema": REFUND_SCHEMA, "strict": True},
        }
    },
    "openai": {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "create_refund", "schema": REFUND_SCHEMA, "strict": True},
        }
    },
}
SCHEMA_FIELDS = ("structured_outputs", "json_schema", "response_format")


@pytest.fixture(scope="module")
def cc_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    base = scripted_upstream_server.base_url
    models = [
        model_table(f"cc-{engine}", base, correction="constrained", constrained_field=engine)
        for engine in EXPECTED_FIELD
    ]
    models.append(model_table("cc-free", base))
    gw = start_gateway(tmp_path_factory.mktemp("cc-gateway"), models)
    try:
        yield gw
    finally:
        gw.stop()


def _client(gw: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    )


@pytest.mark.parametrize("engine", list(EXPECTED_FIELD))
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_correction_asks_the_engine_for_its_schema_field(
    cc_gateway: GatewayProcess, upstream: ScriptedUpstream, engine: str, kind: str
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")], usage=(100, 20)),
        Reply(content=GOOD_ARGS, usage=(140, 18)),
    )
    chat = make_chat(kind, cc_gateway.base_url + "/v1", cc_gateway.api_key)
    r = chat(model=f"cc-{engine}", tools=[refund_tool()])
    call = calls_of(r.completion)[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_orig",
        "create_refund",
        GOOD_ARGS,
    )
    assert r.completion.choices[0].finish_reason == "tool_calls"
    assert r.headers["x-syntic-schema-retries"] == "1"
    usage = r.completion.usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (240, 38)
    first, second = (q.body for q in upstream.requests)
    # The first call is untouched: tools, and no schema field of any engine.
    assert first["tools"][0]["function"]["name"] == "create_refund"
    assert not set(SCHEMA_FIELDS) & set(first)
    # The correction: exactly this engine's field, no tools, the errors in the conversation.
    assert {k: second[k] for k in SCHEMA_FIELDS if k in second} == EXPECTED_FIELD[engine]
    assert "tools" not in second and "tool_choice" not in second
    bad, feedback = second["messages"][-2:]
    assert bad["tool_calls"][0]["function"]["arguments"] == BAD_ARGS
    assert feedback["role"] == "tool" and feedback["tool_call_id"] == "call_orig"
    assert "/amount_pence" in feedback["content"]


def test_streamed_call_is_corrected_the_same_way(
    cc_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")]),
        Reply(content=GOOD_ARGS),
    )
    with _client(cc_gateway) as client:
        stream: Any = client.chat.completions.create(
            model="cc-vllm",
            messages=MESSAGES,
            tools=[refund_tool()],  # type: ignore[list-item]
            stream=True,
        )
        args = "".join(
            (c.function.arguments or "") if c.function else ""
            for chunk in stream
            if chunk.choices
            for c in chunk.choices[0].delta.tool_calls or ()
        )
    assert orjson.loads(args) == orjson.loads(GOOD_ARGS)
    first, second = (q.body for q in upstream.requests)
    assert first["stream"] is True and "structured_outputs" not in first
    assert second["structured_outputs"] == {"json": REFUND_SCHEMA}
    assert "stream" not in second


def test_an_invalid_constrained_reply_is_still_refused(
    cc_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    # An engine that ignores the field (or a schema keyword it can't express) fails open:
    # the gateway's validation still refuses what comes back.
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")]),
        Reply(content=BAD_ARGS),
    )
    with _client(cc_gateway) as client, pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(
            model="cc-llama_cpp",
            messages=MESSAGES,
            tools=[refund_tool()],  # type: ignore[list-item]
        )
    body = envelope(err.value)
    assert body["error"]["code"] == "tool_arguments_invalid"
    assert body["error"]["param"] == "/amount_pence"
    assert err.value.response.headers["x-syntic-schema-retries"] == "1"
    assert upstream.requests[1].body["json_schema"] == REFUND_SCHEMA


def test_json_output_correction_uses_the_field_too(
    cc_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    upstream.queue(Reply(content='{"n": "two"}'), Reply(content='{"n": 2}'))
    with _client(cc_gateway) as client:
        completion = client.chat.completions.create(
            model="cc-vllm",
            messages=MESSAGES,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "count", "strict": True, "schema": schema},
            },
        )
    assert completion.choices[0].message.content == '{"n": 2}'
    first, second = (q.body for q in upstream.requests)
    assert first["response_format"]["type"] == "json_schema"  # the client's own, as sent
    assert "structured_outputs" not in first
    assert second["structured_outputs"] == {"json": schema}
    assert "response_format" not in second


def test_free_correction_is_unchanged(
    cc_gateway: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS, id="call_orig")]),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)]),
    )
    with _client(cc_gateway) as client:
        client.chat.completions.create(
            model="cc-free",
            messages=MESSAGES,
            tools=[refund_tool()],  # type: ignore[list-item]
        )
    second = upstream.requests[1].body
    assert second["tool_choice"] == {"type": "function", "function": {"name": "create_refund"}}
    assert not set(SCHEMA_FIELDS) & set(second)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"provider": "openai", "correction": "constrained"}, "needs engine .*or constr"),
        ({"provider": "openai", "correction": "grammar"}, "correction must be one of"),
        ({"provider": "openai", "constrained_field": "tgi"}, "constrained_field must be one"),
        ({"provider": "local", "constrained_field": "vllm"}, 'provider "openai" only'),
        ({"provider": "anthropic", "correction": "constrained"}, "not supported"),
    ],
)
def test_bad_correction_settings_are_refused(
    tmp_path: Path, table: dict[str, str], message: str
) -> None:
    lines = ["[[models]]", 'name = "m"'] + [f'{k} = "{v}"' for k, v in table.items()]
    config = tmp_path / "syntic.toml"
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=message):
        load_settings(config, env={})

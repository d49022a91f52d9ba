"""A model whose upstream speaks the Responses API (``api = "responses"``): requests from
every dialect reach ``{base_url}/responses`` in that wire format, and its answers are
enforced exactly as a chat-completions upstream's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from gateway.settings import ConfigError, load_settings
from tests.responses.test_create import REFUND
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

BAD = '{"order_id": "A1", "amount_pence": "12.50"}'
GOOD = '{"order_id": "A1", "amount_pence": 1250}'


@pytest.fixture(scope="module")
def rgw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/responses"] = ResponsesRenderer()
    base = scripted_upstream_server.base_url
    gw = start_gateway(
        tmp_path_factory.mktemp("responses-upstream"),
        [
            model_table("rs-strict", base, api="responses"),
            model_table("rs-constrained", base, api="responses", constrained=True),
        ],
    )
    yield gw
    gw.stop()


@pytest.fixture
def rclient(rgw: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=rgw.base_url + "/v1", api_key=rgw.api_key, max_retries=0, timeout=20
    ) as c:
        yield c


def test_valid_call_through_a_responses_upstream(
    rclient: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="On it.", tool_calls=[Call("create_refund", GOOD)], usage=(21, 4)))
    response = rclient.responses.create(
        model="rs-strict",
        input="Refund A1",
        instructions="Be kind.",
        tools=[REFUND],  # type: ignore[list-item]
    )
    message, call = response.output
    assert message.type == "message" and response.output_text == "On it."
    assert call.type == "function_call" and json.loads(call.arguments)["amount_pence"] == 1250
    assert response.usage is not None and response.usage.input_tokens == 21
    sent = upstream.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.body["model"] == "rs-strict-served" and sent.body["store"] is False
    # the same wire: the client's input and instructions as sent
    assert sent.body["input"] == "Refund A1" and sent.body["instructions"] == "Be kind."
    assert sent.body["tools"][0]["strict"] is False  # the gateway enforces, not the upstream


def test_chat_client_reaches_a_responses_upstream_as_items(
    rclient: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="Hi."))
    rclient.chat.completions.create(
        model="rs-strict",
        messages=[
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "Refund A1"},
        ],
    )
    assert upstream.requests[0].body["input"] == [
        {"type": "message", "role": "system", "content": "Be kind."},
        {"type": "message", "role": "user", "content": "Refund A1"},
    ]


def test_correction_goes_back_as_responses_items(
    rclient: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(tool_calls=[Call("create_refund", BAD, id="call_x")]),
        Reply(tool_calls=[Call("create_refund", GOOD, id="call_y")]),
    )
    completion = rclient.chat.completions.create(
        model="rs-strict",
        messages=[{"role": "user", "content": "Refund A1"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "create_refund",
                    "parameters": REFUND["parameters"],
                    "strict": True,
                },
            }
        ],
    )
    [call] = completion.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments)["amount_pence"] == 1250  # type: ignore[union-attr]
    assert call.id == "call_x"  # the corrected call keeps the original id
    fix = upstream.requests[1].body
    assert fix["tool_choice"] == {"type": "function", "name": "create_refund"}
    kinds = [item["type"] for item in fix["input"]]
    assert kinds[-2:] == ["function_call", "function_call_output"]
    assert fix["input"][-2]["arguments"] == BAD
    assert "/amount_pence" in fix["input"][-1]["output"]


def test_constrained_responses_upstream_gets_strict_tools(
    rclient: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(tool_calls=[Call("create_refund", GOOD)]))
    rclient.responses.create(model="rs-constrained", input="x", tools=[REFUND])  # type: ignore[list-item]
    assert upstream.requests[0].body["tools"][0]["strict"] is True


def test_streamed_through_a_responses_upstream(
    rclient: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(content="Refunding.", tool_calls=[Call("create_refund", BAD)], fragment=4),
        Reply(tool_calls=[Call("create_refund", GOOD)]),
    )
    seen: list[str] = []
    with rclient.responses.stream(model="rs-strict", input="Refund A1", tools=[REFUND]) as s:  # type: ignore[list-item]
        for event in s:
            if event.type == "response.function_call_arguments.delta":
                seen.append(event.delta)
        final = s.get_final_response()
    assert "".join(seen) == GOOD
    assert final.output_text == "Refunding."
    assert upstream.requests[0].body["stream"] is True


def test_length_cut_and_json_output(rclient: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.queue(Reply(content="Once upon", finish_reason="length"))
    cut = rclient.responses.create(model="rs-strict", input="story", max_output_tokens=3)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    assert upstream.requests[0].body["max_output_tokens"] == 3
    upstream.queue(Reply(content='{"n": "one"}'), Reply(content='{"n": 1}'))
    fixed = rclient.responses.create(
        model="rs-strict",
        input="n?",
        text={
            "format": {
                "type": "json_schema",
                "name": "n",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                    "additionalProperties": False,
                },
            }
        },
    )
    assert json.loads(fixed.output_text) == {"n": 1}
    assert upstream.requests[1].body["text"]["format"]["strict"] is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('provider = "anthropic"\napi = "responses"', "applies to provider"),
        ('provider = "openai"\napi = "graphql"', "api must be one of"),
        (
            'provider = "openai"\napi = "responses"\nconstrained_field = "vllm"',
            "constrained_field does not apply",
        ),
    ],
)
def test_api_config_errors(tmp_path: Path, extra: str, message: str) -> None:
    config = tmp_path / "g.toml"
    config.write_text(f'[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:1/v1"\n{extra}\n')
    with pytest.raises(ConfigError, match=message):
        load_settings(config, env={})

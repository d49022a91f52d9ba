"""A gateway with one model per upstream wire, all on the session's scripted upstream:
``chat-up`` (chat completions), ``resp-up`` (Responses), ``msg-up`` (Anthropic Messages),
and ``chat-legacy`` (a chat upstream that takes the token limit as ``max_tokens``). The
official SDKs are the clients; the upstream records what reached it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import ScriptedUpstream

# Client dialect -> the model whose upstream speaks the same wire.
SAME_WIRE = {"chat": "chat-up", "responses": "resp-up", "messages": "msg-up"}
# Upstream wire -> the model that reaches it.
MODEL_FOR = SAME_WIRE


@pytest.fixture(scope="module")
def fgw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    scripted_upstream_server.renderers["/responses"] = ResponsesRenderer()
    base = scripted_upstream_server.base_url
    models: list[dict[str, Any]] = [
        model_table("chat-up", base),
        model_table("resp-up", base, api="responses"),
        model_table("msg-up", base, provider="anthropic"),
        model_table("chat-legacy", base, max_tokens_field="max_tokens"),
    ]
    gw = start_gateway(tmp_path_factory.mktemp("fidelity"), models)
    yield gw
    gw.stop()


@pytest.fixture
def oai(fgw: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=fgw.base_url + "/v1", api_key=fgw.api_key, max_retries=0, timeout=20
    ) as client:
        yield client


@pytest.fixture
def ant(fgw: GatewayProcess) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=fgw.base_url, api_key=fgw.api_key, max_retries=0, timeout=20
    ) as client:
        yield client

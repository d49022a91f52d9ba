"""A gateway in front of the scripted upstream on all three upstream wires: ``oa`` (chat
completions), ``rs`` (Responses) and ``an`` (Anthropic Messages)."""

from __future__ import annotations

from pathlib import Path

from tests.support.anthropic_wire import AnthropicRenderer
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.responses_wire import ResponsesRenderer
from tests.support.scripted_upstream import ScriptedUpstream


def start_three_wire_gateway(upstream: ScriptedUpstream, data_dir: Path) -> GatewayProcess:
    upstream.renderers["/messages"] = AnthropicRenderer()
    upstream.renderers["/responses"] = ResponsesRenderer()
    base = upstream.base_url
    return start_gateway(
        data_dir,
        [
            model_table("oa", base),
            model_table("rs", base, api="responses"),
            model_table("an", base, provider="anthropic"),
        ],
    )

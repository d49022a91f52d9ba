"""An adapter's per-model ``Target`` (URL, headers, route built once): a model's copy with
other settings gets its own, and the cache stays bounded."""

from __future__ import annotations

import dataclasses

from gateway.settings import ModelConfig
from gateway.upstream.openai import OpenAIUpstream
from gateway.upstream.transport import Target, Targets, UpstreamHttp
from tests.support.scripted_upstream import Reply, ScriptedUpstream
from tests.upstream.test_upstream_transport import REQUEST, _model


async def test_a_copy_of_a_model_is_sent_with_its_own_headers(
    upstream_http: UpstreamHttp, upstream: ScriptedUpstream
) -> None:
    adapter = OpenAIUpstream(upstream_http, {"UP_KEY": "sk-one", "OTHER_KEY": "sk-two"})
    model = _model(upstream.base_url)
    copy = dataclasses.replace(model, api_key_env="OTHER_KEY")
    upstream.queue(Reply(content="a"), Reply(content="b"), Reply(content="c"))
    await adapter.complete(REQUEST, model)
    await adapter.complete(REQUEST, copy)
    await adapter.complete(REQUEST, model)
    assert [r.headers["authorization"] for r in upstream.requests] == [
        "Bearer sk-one",
        "Bearer sk-two",
        "Bearer sk-one",
    ]


def test_targets_built_once_per_model_and_bounded(upstream_http: UpstreamHttp) -> None:
    built: list[tuple[str, bool]] = []

    def build(model: ModelConfig, stream: bool) -> Target:
        built.append((model.base_url, stream))
        return Target.build(model.base_url, {}, upstream_http.connections.route(model))

    targets = Targets(build)
    first = _model("http://127.0.0.1:1/v1")
    assert targets.get(first) is targets.get(first)
    assert targets.get(first, stream=True) is not targets.get(first)
    assert built == [("http://127.0.0.1:1/v1", False), ("http://127.0.0.1:1/v1", True)]
    others = [_model(f"http://127.0.0.1:{port}/v1") for port in range(2, Targets.MAX_ENTRIES + 2)]
    for other in others:
        targets.get(other)
    targets.get(first)  # pushed out once the cache filled: built again
    assert built.count(("http://127.0.0.1:1/v1", False)) == 2

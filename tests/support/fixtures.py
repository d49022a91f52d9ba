"""pytest fixtures shared by the gateway tests (loaded from ``tests/conftest.py``).

- ``scripted_upstream_server`` (session): one ``ScriptedUpstream`` for the session.
- ``upstream`` (function): that server, reset (empty script, no recorded requests).
- ``gateway`` (session): ``syntic serve`` in a subprocess with a SQLite DB and one key,
  catalogue ``E2E_MODELS`` (all pointing at the scripted upstream):
  ``strict-model`` (gateway enforces), ``constrained-model`` (strict passed through),
  ``plain-model`` (``strict_tools = false``), ``slow-model`` (``timeout_s = 0.5``).
- ``anthropic_gateway`` (session): the same with ``anthropic_e2e_models`` (``oa-*`` and
  ``an-*``, both upstream wire formats), for the Messages end-to-end and conformance tests.
- ``stream_gateway`` (session): both catalogues, ``stream_keepalive_s =
  STREAM_KEEPALIVE_S`` (short, so keep-alives can be tested), for the streaming tests.
- ``openai_client`` / ``async_openai_client``: SDK clients on the gateway, no retries.
- ``upstream_http`` (function): the gateway's upstream HTTP client (``UpstreamHttp``) with
  no proxies and the default trust store, closed after the test.
- ``private_redis`` (function): a started ``PrivateRedis`` of the test's own, which it may
  stop and restart (skipped when ``redis-server`` is not installed).

Modules that need a differently configured server start their own (``start_gateway``).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import openai
import pytest

from gateway.upstream.connection import Connections
from gateway.upstream.transport import UpstreamHttp
from tests.support.anthropic_wire import AnthropicRenderer, anthropic_e2e_models
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.openai_helpers import Chat, make_chat
from tests.support.private_services import PrivateRedis
from tests.support.scripted_upstream import ScriptedUpstream

E2E_BODY_LIMIT = 256 * 1024
STREAM_KEEPALIVE_S = 0.2


def e2e_models(base_url: str) -> list[dict[str, object]]:
    return [
        model_table("strict-model", base_url),
        model_table("constrained-model", base_url, constrained=True),
        model_table("plain-model", base_url, strict_tools=False),
        model_table("slow-model", base_url, timeout_s=0.5),
    ]


@pytest.fixture(scope="session")
def scripted_upstream_server() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def upstream_http() -> AsyncIterator[UpstreamHttp]:
    http = UpstreamHttp(Connections({}))
    try:
        yield http
    finally:
        await http.aclose()


@pytest.fixture
def upstream(scripted_upstream_server: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    scripted_upstream_server.reset()
    yield scripted_upstream_server
    scripted_upstream_server.reset()


def _serving(
    workdir: Path, models: list[dict[str, object]], server: dict[str, object]
) -> Iterator[GatewayProcess]:
    gw = start_gateway(workdir, models, server=server)
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="session")
def gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    yield from _serving(
        tmp_path_factory.mktemp("gateway"),
        e2e_models(scripted_upstream_server.base_url),
        {"max_body_bytes": E2E_BODY_LIMIT},
    )


@pytest.fixture(params=["sync", "async"])
def chat(request: pytest.FixtureRequest, gateway: GatewayProcess) -> Chat:
    """The openai SDK, sync and async, on the session gateway."""
    return make_chat(request.param, gateway.base_url + "/v1", gateway.api_key)


@pytest.fixture(scope="session")
def anthropic_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    yield from _serving(
        tmp_path_factory.mktemp("anthropic-gw"),
        anthropic_e2e_models(scripted_upstream_server.base_url),
        {},
    )


@pytest.fixture(scope="session")
def stream_gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    scripted_upstream_server.renderers["/messages"] = AnthropicRenderer()
    base = scripted_upstream_server.base_url
    yield from _serving(
        tmp_path_factory.mktemp("stream-gw"),
        [*e2e_models(base), *anthropic_e2e_models(base)],
        {"stream_keepalive_s": STREAM_KEEPALIVE_S},
    )


@pytest.fixture
def openai_client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(
        base_url=gateway.base_url + "/v1", api_key=gateway.api_key, max_retries=0, timeout=20
    )
    yield client
    client.close()


@pytest.fixture
async def async_openai_client(gateway: GatewayProcess) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(
        base_url=gateway.base_url + "/v1", api_key=gateway.api_key, max_retries=0, timeout=20
    )
    yield client
    await client.close()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server binary not installed")
    with PrivateRedis() as server:
        yield server

"""pytest fixtures shared by the gateway tests (loaded from ``tests/conftest.py``).

- ``scripted_upstream_server`` (session): one ``ScriptedUpstream`` for the session.
- ``upstream`` (function): that server, reset (empty script, no recorded requests).
- ``gateway`` (session): ``syntic serve`` in a subprocess with a SQLite DB and one key,
  catalogue ``E2E_MODELS`` (all pointing at the scripted upstream):
  ``strict-model`` (gateway enforces), ``constrained-model`` (strict passed through),
  ``plain-model`` (``strict_tools = false``), ``slow-model`` (``timeout_s = 0.5``).
- ``openai_client`` / ``async_openai_client``: SDK clients on the gateway, no retries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import openai
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream

E2E_BODY_LIMIT = 256 * 1024


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
def upstream(scripted_upstream_server: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    scripted_upstream_server.reset()
    yield scripted_upstream_server
    scripted_upstream_server.reset()


@pytest.fixture(scope="session")
def gateway(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gateway")
    gw = start_gateway(
        workdir,
        e2e_models(scripted_upstream_server.base_url),
        server={"max_body_bytes": E2E_BODY_LIMIT},
    )
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def openai_client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                           max_retries=0, timeout=20)
    yield client
    client.close()


@pytest.fixture
async def async_openai_client(gateway: GatewayProcess) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                                max_retries=0, timeout=20)
    yield client
    await client.close()

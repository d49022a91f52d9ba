"""``/v1/responses`` through the official SDKs against the session gateway (both upstream
catalogues: ``strict-model``/``oa-*`` speak chat completions, ``an-*`` speak Messages)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.local.conftest import local_gateway, local_runtime  # noqa: F401  (fixtures)
from tests.support.databases import db_url, pg_url  # noqa: F401  (fixtures)
from tests.support.gateway_proc import GatewayProcess


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway


@pytest.fixture
def client(gw: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    ) as c:
        yield c

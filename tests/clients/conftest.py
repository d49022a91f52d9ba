"""Client libraries pointed at a real gateway on loopback (no network: the libraries only
build schemas and speak to the gateway; the scripted upstream plays the model)."""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import GatewayProcess


@pytest.fixture(scope="module")
def gw(stream_gateway: GatewayProcess) -> GatewayProcess:
    return stream_gateway  # both catalogues: tests/support/fixtures.py

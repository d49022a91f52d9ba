"""Fixtures of the chat-completions end-to-end modules (the shared gateway processes are in
``tests.support.fixtures``)."""

from __future__ import annotations

import pytest

from tests.gateway.openai_helpers import Chat, make_chat
from tests.support.gateway_proc import GatewayProcess


@pytest.fixture(params=["sync", "async"])
def chat(request: pytest.FixtureRequest, gateway: GatewayProcess) -> Chat:
    """The openai SDK, sync and async, on the session gateway."""
    return make_chat(request.param, gateway.base_url + "/v1", gateway.api_key)

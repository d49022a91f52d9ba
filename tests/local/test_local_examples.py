"""The client examples as written (no ``SYNTIC_MODEL``) against the models a gateway with
no config file serves: what a new user gets from ``scripts/run`` and then one example."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.settings import DEFAULT_MODELS
from tests.local.conftest import passthrough_env
from tests.support.gateway_proc import GatewayProcess, start_gateway

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"^create_refund (\{.*\})$", re.MULTILINE)


@pytest.fixture(scope="module")
def default_gateway(
    local_runtime: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    tables = [dataclasses.asdict(m) for m in DEFAULT_MODELS]
    gw = start_gateway(tmp_path_factory.mktemp("default-models"), tables, env=passthrough_env())
    try:
        yield gw
    finally:
        gw.stop()


@pytest.mark.parametrize("name", ["openai_chat.py", "anthropic_messages.py"])
def test_example_as_written_gets_a_valid_refund_call(
    name: str, default_gateway: GatewayProcess
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    env.update(SYNTIC_BASE_URL=default_gateway.base_url, SYNTIC_API_KEY=default_gateway.api_key)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = CALL.search(done.stdout)
    assert found is not None, done.stdout
    arguments = json.loads(found.group(1))
    assert set(arguments) == {"order_number", "amount_pence"}
    assert re.fullmatch(r"[0-9]{6}", arguments["order_number"])
    assert isinstance(arguments["amount_pence"], int) and arguments["amount_pence"] >= 1
    assert re.search(r"^schema retries: [01]$", done.stdout, re.MULTILINE)

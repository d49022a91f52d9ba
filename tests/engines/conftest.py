"""Fixtures for the engine tests: llama-cpp-python's own OpenAI-compatible server (installed
by ``scripts/install-engine-server``) on loopback with the embedded SmolLM2 weights, and a
gateway in front of it in the three setups a user picks from: the engine constrains
(``constrained = true``), the gateway enforces (``constrained = false``), and the gateway
enforces with the correction under the engine's grammar (``correction = "constrained"``).

A missing server or weights skips these tests, saying how to install them; under
``SYNTIC_REQUIRE_ENGINE=1`` (CI) it fails instead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.upstream.local.catalog import LOCAL_MODELS, is_installed, model_file
from tests.support.engine_server import EngineServer, installed_python
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway

WEIGHTS = "smollm2-135m"  # the smallest the project ships: the engine's cost, not its wit
# Big enough to act on a correction's message (SmolLM2 repeats its first answer).
FIXING_WEIGHTS = "qwen2.5-0.5b"
CONSTRAINED = "engine-constrained"
FREE = "engine-free"
FIX = "engine-grammar-fix"
MODES = (CONSTRAINED, FREE, FIX)


def _missing(weights: str) -> str | None:
    if installed_python(os.environ) is None:
        return "llama-cpp-python's server not installed (run scripts/install-engine-server)"
    if not is_installed(LOCAL_MODELS[weights], os.environ):
        return f"{weights} weights not installed (run scripts/install-local-model)"
    return None


def _serve(weights: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    reason = _missing(weights)
    if reason is not None:
        if os.environ.get("SYNTIC_REQUIRE_ENGINE") == "1":  # CI must not skip these
            pytest.fail(f"SYNTIC_REQUIRE_ENGINE=1 but {reason}")
        pytest.skip(reason)
    python = installed_python(os.environ)
    assert python is not None
    log: Path = tmp_path_factory.mktemp("engine") / "server.log"
    with EngineServer.start(python, model_file(LOCAL_MODELS[weights], os.environ), log) as server:
        yield server


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    yield from _serve(WEIGHTS, tmp_path_factory)


@pytest.fixture(scope="session")
def fixing_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    yield from _serve(FIXING_WEIGHTS, tmp_path_factory)


@pytest.fixture(scope="session")
def engine_gateway(
    engine: EngineServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    common = {"engine": "llama_cpp_python", "upstream_model": engine.model, "timeout_s": 120.0}
    tables = [
        model_table(CONSTRAINED, engine.base_url, constrained=True, **common),
        model_table(FREE, engine.base_url, constrained=False, correction="free", **common),
        model_table(FIX, engine.base_url, constrained=False, correction="constrained", **common),
    ]
    gw = start_gateway(tmp_path_factory.mktemp("engine-gateway"), tables)
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="session")
def fixing_gateway(
    fixing_engine: EngineServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """The gateway enforces, and its correction goes under the engine's grammar."""
    common = {
        "engine": "llama_cpp_python",
        "upstream_model": fixing_engine.model,
        "timeout_s": 300.0,
    }
    tables = [
        model_table(
            FIX, fixing_engine.base_url, constrained=False, correction="constrained", **common
        )
    ]
    gw = start_gateway(tmp_path_factory.mktemp("fixing-gateway"), tables)
    try:
        yield gw
    finally:
        gw.stop()

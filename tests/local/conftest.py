"""Fixtures for the local-model tests: skip (with the fix) when the runtime or weights are
missing; a gateway subprocess serving the real local Qwen model in three modes: free
generation with a free correction, under the grammar, and free generation with the
correction under the grammar."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.upstream.local.catalog import LOCAL_MODELS, is_installed
from tests.support.gateway_proc import GatewayProcess, start_gateway

QWEN = "qwen2.5-0.5b"
FREE = "local-free"
CONSTRAINED = "local-constrained"
FREE_FIX = "local-free-grammar-fix"
MODES = (FREE, CONSTRAINED, FREE_FIX)


def missing_runtime() -> str | None:
    """Why the slow local-model tests cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("jinja2") is None:
        return "llama-cpp-python not installed (run scripts/install-local-model)"
    if not is_installed(LOCAL_MODELS[QWEN], os.environ):
        return f"{QWEN} weights not installed (run: syntic models install {QWEN})"
    return None


@pytest.fixture(scope="session")
def local_runtime() -> None:
    reason = missing_runtime()
    if reason is not None:
        if os.environ.get("SYNTIC_REQUIRE_LOCAL_MODEL") == "1":  # CI must not skip these
            pytest.fail(f"SYNTIC_REQUIRE_LOCAL_MODEL=1 but {reason}")
        pytest.skip(reason)


def local_models_tables() -> list[dict[str, object]]:
    common: dict[str, object] = {
        "provider": "local",
        "local_model": QWEN,
        "upstream_model": QWEN,
        "strict_tools": True,
        "timeout_s": 120.0,
    }
    return [
        {"name": FREE, **common, "constrained": False, "correction": "free"},
        {"name": CONSTRAINED, **common, "constrained": True},
        {"name": FREE_FIX, **common, "constrained": False, "correction": "constrained"},
    ]


def passthrough_env() -> dict[str, str]:
    keep = ("SYNTIC_MODELS_DIR", "SYNTIC_LOCAL_THREADS", "SYNTIC_LOCAL_CTX")
    return {k: os.environ[k] for k in keep if k in os.environ}


@pytest.fixture(scope="session")
def local_gateway(
    local_runtime: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("local-gateway")
    gw = start_gateway(workdir, local_models_tables(), env=passthrough_env())
    try:
        yield gw
    finally:
        gw.stop()

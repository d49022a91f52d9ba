"""API fuzzing with schemathesis against the gateway's own ``/openapi.json``.

Every documented operation gets generated requests (valid and invalid bodies, odd
headers) on a real ``syntic serve`` whose models all point at the scripted upstream
(which answers every call). Checks: no 5xx, status codes / content types / bodies /
headers as documented. Bounded: a few examples per operation, well under a minute.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Err

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Reply, ScriptedUpstream

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def fuzz_gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("schemathesis")
    base = scripted_upstream_server.base_url
    # Generated requests name arbitrary models; the common ones are served.
    models = [model_table(name, base) for name in ("m", "string", "gpt-4o")]
    gateway = start_gateway(workdir, models, server={"max_body_bytes": 256 * 1024})
    try:
        yield gateway
    finally:
        gateway.stop()


def _operations(gw: GatewayProcess) -> list[Any]:
    api = schemathesis.openapi.from_url(gw.base_url + "/openapi.json")
    operations = []
    for result in api.get_all_operations():
        if isinstance(result, Err):  # the document itself is broken somewhere
            raise AssertionError(f"invalid operation in /openapi.json: {result.err()}")
        operations.append(result.ok())
    return operations


def test_documented_api(fuzz_gw: GatewayProcess, upstream: ScriptedUpstream) -> None:
    """Each documented operation, fuzzed (positive and negative data). Driven by hand:
    schemathesis' pytest plugin does not load on this pytest (9.x)."""
    headers = {"authorization": f"Bearer {fuzz_gw.api_key}"}
    operations = _operations(fuzz_gw)
    assert {op.path for op in operations} >= {
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/schemas/check",
        "/v1/models",
    }
    count = 0
    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def run(case: Any) -> None:
            nonlocal count
            count += 1
            upstream.reset()
            upstream.queue(*[Reply(content="ok")] * 4)
            case.call_and_validate(
                base_url=fuzz_gw.base_url, headers=headers, checks=CHECKS, timeout=20
            )

        try:
            run()
        except Unsatisfiable:  # negative data for an operation without any input
            assert mode is GenerationMode.NEGATIVE
    print(f"schemathesis cases: {count} over {len(operations)} operations, both modes")
    assert count >= 2 * len(operations)

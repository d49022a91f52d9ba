"""Every file in ``examples/`` run as a user runs it, so the examples cannot rot.

Each client example is a subprocess pointed (``SYNTIC_BASE_URL``, ``SYNTIC_API_KEY``,
``SYNTIC_MODEL``) at a real ``syntic serve`` whose model is a scripted upstream. The
upstream first answers with arguments that break the schema, so a passing run shows the
correction at work (``schema retries: 1``, the invalid arguments never printed); a
second script answers invalid twice, and the example must then fail with the gateway's
``tool_arguments_invalid`` and a non-zero exit status. The validator example needs no
gateway: it runs with valid and with invalid arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway_proc import GatewayProcess, free_port, model_table, start_gateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MODEL = "example-model"
GOOD = {"order_number": "582131", "amount_pence": 1250}
GOOD_ARGS = json.dumps(GOOD)
BAD_ARGS = json.dumps({"order_number": "582131", "amount_pence": "12.50"})
GOOD_LINE = json.dumps(GOOD, sort_keys=True)
CLIENT_EXAMPLES = ["openai_chat.py", "anthropic_messages.py", "streaming.py", "curl.sh"]


@pytest.fixture(scope="module")
def example_upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def example_gateway(
    example_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_gateway(
        tmp_path_factory.mktemp("examples-gw"), [model_table(MODEL, example_upstream.base_url)]
    )
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def script(example_upstream: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    example_upstream.reset()
    yield example_upstream
    example_upstream.reset()


def _run(
    name: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    path = EXAMPLES / name
    command = ["bash", str(path)] if name.endswith(".sh") else [sys.executable, str(path)]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    full_env.update(env or {})
    return subprocess.run(
        [*command, *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=90
    )


def _client_env(gw: GatewayProcess) -> dict[str, str]:
    return {"SYNTIC_BASE_URL": gw.base_url, "SYNTIC_API_KEY": gw.api_key, "SYNTIC_MODEL": MODEL}


def _call(arguments: str) -> Reply:
    return Reply(tool_calls=[Call("create_refund", arguments)])


def test_every_example_is_run_here() -> None:
    present = sorted(p.name for p in EXAMPLES.iterdir() if p.is_file())
    assert present == sorted([*CLIENT_EXAMPLES, "validator_library.py"])
    for name in present:
        head = (EXAMPLES / name).read_text()[:1500]
        assert "examples/" + name in head, f"{name} does not say how to run it"


@pytest.mark.parametrize("name", CLIENT_EXAMPLES)
def test_example_gets_corrected_valid_arguments(
    name: str, example_gateway: GatewayProcess, script: ScriptedUpstream
) -> None:
    script.queue(_call(BAD_ARGS), _call(GOOD_ARGS))
    done = _run(name, env=_client_env(example_gateway))
    assert done.returncode == 0, done.stderr
    assert len(script.requests) == 2  # the first call and its one correction
    first = script.requests[0].body
    assert first["model"] == f"{MODEL}-served"
    tool = first["tools"][0]["function"]
    assert tool["name"] == "create_refund"
    assert tool["parameters"]["properties"]["order_number"]["pattern"] == "^[0-9]{6}$"
    assert "12.50" not in done.stdout  # the invalid arguments never reach the client
    if name == "curl.sh":
        headers, _, body = done.stdout.partition("\n\n")  # text mode: CR LF read as LF
        assert "x-syntic-schema-retries: 1" in headers.lower()
        call = json.loads(body)["choices"][0]["message"]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == GOOD
    else:
        assert "schema retries: 1\n" in done.stdout
        assert GOOD_LINE in done.stdout
    if name == "streaming.py":
        assert first["stream"] is True
        assert "fragment: " in done.stdout
        assert f"call 0: {GOOD_LINE}\n" in done.stdout


@pytest.mark.parametrize("name", CLIENT_EXAMPLES)
def test_example_fails_when_the_arguments_stay_invalid(
    name: str, example_gateway: GatewayProcess, script: ScriptedUpstream
) -> None:
    script.queue(_call(BAD_ARGS), _call(BAD_ARGS))
    done = _run(name, env=_client_env(example_gateway))
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "tool_arguments_invalid" in out
    assert GOOD_LINE not in out


def test_client_example_without_a_gateway_fails_cleanly() -> None:
    env = {"SYNTIC_BASE_URL": f"http://127.0.0.1:{free_port()}", "SYNTIC_API_KEY": "sk_x"}
    for name in CLIENT_EXAMPLES:
        done = _run(name, env=env)
        assert done.returncode != 0, name
        assert "Traceback" not in done.stderr, (name, done.stderr)


def test_validator_example_valid_and_invalid_arguments() -> None:
    done = _run("validator_library.py")
    assert done.returncode == 0, done.stderr
    assert "lint refund: 0 issue(s)" in done.stdout
    assert "lint ordinary: schema_not_strict" in done.stdout
    assert "arguments valid:" in done.stdout
    assert '"note": {"type": ["string", "null"]}' in done.stdout  # the strict projection
    assert 'canonicalize: {"order_number": "582131"}\n' in done.stdout

    bad = _run("validator_library.py", '{"order_number": "58213", "amount_pence": 0}')
    assert bad.returncode == 1
    assert "invalid: /amount_pence must be >= 1" in bad.stdout
    assert "invalid: /order_number must match pattern ^[0-9]{6}$" in bad.stdout

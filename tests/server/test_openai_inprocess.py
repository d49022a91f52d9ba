"""The in-process launcher (uvicorn in a thread) serves the same app as ``syntic serve``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai

from gateway.app import create_app
from gateway.settings import load_settings
from tests.support.gateway_proc import ROOT, InProcessGateway, model_table, toml_config
from tests.support.openai_helpers import GOOD_ARGS, MESSAGES, calls_of, refund_tool
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream


def test_in_process_gateway(tmp_path: Path, upstream: ScriptedUpstream) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(toml_config([model_table("m", upstream.base_url)]))
    env = {**os.environ, "SYNTIC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    cli = [sys.executable, "-m", "gateway"]
    subprocess.run(
        [*cli, "migrate", "--config", str(config)],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [*cli, "keys", "create", "--name", "t", "--config", str(config)],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    key = out.stdout.strip().splitlines()[-1]
    upstream.queue(Reply(tool_calls=[Call("create_refund", GOOD_ARGS, id="c1")]))
    with InProcessGateway(create_app(load_settings(config, env))) as gw:
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        completion = client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            tools=[refund_tool()],  # type: ignore[list-item]
        )
        client.close()
    assert [(c.id, c.function.arguments) for c in calls_of(completion)] == [("c1", GOOD_ARGS)]
    assert upstream.requests[0].body["model"] == "m-served"

"""What goes into an upstream request's head: keys without the whitespace a secrets file
leaves around them, and no control character ever (refused at startup, model named)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_proc import ROOT, model_table, start_gateway, toml_config
from tests.support.hostile_upstream import HostileUpstream


def test_key_from_a_secrets_file_is_stripped(tmp_path: Path) -> None:
    with HostileUpstream() as up:
        models = [model_table("m", up.base_url("ok"), api_key_env="UP_KEY")]
        gw = start_gateway(tmp_path, models, env={"UP_KEY": "  sk-upstream-123\n"})
        try:
            resp = httpx.post(
                gw.base_url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": f"Bearer {gw.api_key}"},
                timeout=30,
            )
            assert resp.status_code == 200, resp.text
        finally:
            gw.stop()
        assert up.seen[-1].head["authorization"] == "Bearer sk-upstream-123"


@pytest.mark.parametrize(
    ("env", "model_extra", "named"),
    [
        ({"UP_KEY": "sk-abc\r\nx-injected: 1"}, {}, "UP_KEY"),
        ({"UP_KEY": "sk-a\x1bbc"}, {}, "UP_KEY"),
        ({"UP_KEY": "sk-abc"}, {"base_url": "http://127.0.0.1:9/v1 HTTP/1.1\r\nx: 1"}, "base_url"),
    ],
    ids=["crlf-in-key", "escape-in-key", "crlf-in-base-url"],
)
def test_control_characters_are_refused_at_startup(
    tmp_path: Path, env: dict[str, str], model_extra: dict[str, str], named: str
) -> None:
    config = tmp_path / "gateway.toml"
    table = model_table("hostile-key-model", "http://127.0.0.1:9/v1", api_key_env="UP_KEY")
    table.update(model_extra)
    # TOML escapes for the control characters the helper would write raw
    config.write_text(toml_config([table]).replace("\r", "\\r").replace("\nx:", "\\nx:"))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    full_env.update(
        env, PYTHONPATH=str(ROOT), SYNTIC_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}"
    )
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", "9"],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "hostile-key-model" in out.stderr and named in out.stderr
    assert "Traceback" not in out.stderr
    assert "sk-a" not in out.stderr  # the key itself is never printed


def test_unreadable_tls_file_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        toml_config(
            [
                model_table(
                    "tls-model", "https://127.0.0.1:9/v1", ca_file=str(tmp_path / "missing.pem")
                )
            ]
        )
    )
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    full_env.update(PYTHONPATH=str(ROOT), SYNTIC_DATABASE_URL=f"sqlite:///{tmp_path / 'db'}")
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", "9"],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "tls-model" in out.stderr and "TLS files" in out.stderr
    assert "Traceback" not in out.stderr

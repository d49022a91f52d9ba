"""A wrong ``[server]`` table stops ``syntic serve`` with one line naming the key (exit
status 2), never a traceback and never a default silently kept in place of a typo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway_proc import ROOT


def _serve(tmp_path: Path, config_text: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "gateway.toml"
    config.write_text(config_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    env.update(PYTHONPATH=str(ROOT), SYNTIC_DATABASE_URL=f"sqlite:///{tmp_path / 'db'}")
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[server]\nport = "eighty"\n', "server.port"),
        ("[server]\nport = 70000\n", "server.port"),
        ("[server]\nport = true\n", "server.port"),
        ('[server]\nmax_body_bytes = "4mb"\n', "server.max_body_bytes"),
        ("[server]\nmax_body_bytes = 0\n", "server.max_body_bytes"),
        ('[server]\nstream_keepalive_s = "soon"\n', "server.stream_keepalive_s"),
        ("[server]\nstream_keepalive_s = -1.0\n", "server.stream_keepalive_s"),
        ('[server]\nkey_cache_ttl_s = "x"\n', "server.key_cache_ttl_s"),
        ("[server]\nhost = 8080\n", "server.host"),
        ("[server]\ndatabase_url = 5\n", "server.database_url"),
        ("[server]\nmax_inflite = 7\n", "max_inflite"),
        ("[sever]\nport = 8081\n", "sever"),
        ('server = "x"\n', "server"),
    ],
    ids=[
        "port-text",
        "port-range",
        "port-bool",
        "body-text",
        "body-zero",
        "keepalive-text",
        "keepalive-negative",
        "ttl-text",
        "host-number",
        "db-number",
        "misspelt-key",
        "misspelt-table",
        "server-not-a-table",
    ],
)
def test_a_bad_server_table_is_one_line_naming_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    out = _serve(tmp_path, text)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert named in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr

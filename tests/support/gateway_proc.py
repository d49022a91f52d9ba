"""Start the gateway as a real server for end-to-end tests.

Subprocess (the real thing: ``syntic migrate``, ``syntic keys create``, ``syntic serve``)::

    gw = start_gateway(tmp_path, [model_table("m", upstream.base_url)])
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key)
    ...
    gw.stop()                                   # SIGTERM; returns the exit code

``gw.syntic("keys", "revoke", key_id)`` runs the CLI against the same config/database.
The database is a SQLite file in ``workdir`` unless ``env`` sets ``SYNTIC_DATABASE_URL``.

In process (faster to start; uvicorn in a thread on a free port)::

    with InProcessGateway(create_app(settings, services)) as gw:
        gw.base_url

``model_table(name, base_url, **overrides)`` and ``toml_config(models, server=None)`` write
the config; ``free_port()`` picks a loopback port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[2]


_PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def model_table(name: str, base_url: str, **overrides: Any) -> dict[str, Any]:
    """A ``[[models]]`` table for an OpenAI-compatible upstream at ``base_url``."""
    table: dict[str, Any] = {
        "name": name,
        "provider": "openai",
        "base_url": base_url,
        "upstream_model": f"{name}-served",
        "strict_tools": True,
        "constrained": False,
    }
    table.update(overrides)
    return table


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"unsupported TOML value {value!r}")


def toml_config(
    models: Iterable[Mapping[str, Any]], server: Mapping[str, Any] | None = None
) -> str:
    lines: list[str] = []
    if server:
        lines.append("[server]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in server.items())
        lines.append("")
    for m in models:
        lines.append("[[models]]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in m.items() if v is not None)
        lines.append("")
    return "\n".join(lines)


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    port: int
    api_key: str
    config_path: Path
    env: dict[str, str]
    log_path: Path
    keys: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def syntic(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``syntic <args> --config <this config>`` with the same environment."""
        return _syntic(list(args), self.config_path, self.env, check=check)

    def create_key(self, name: str, *extra: str) -> str:
        out = self.syntic("keys", "create", "--name", name, *extra)
        key = out.stdout.strip().splitlines()[-1].strip()
        self.keys.append(key)
        return key

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def _syntic(
    args: list[str], config: Path, env: Mapping[str, str], *, check: bool
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gateway", *args, "--config", str(config)]
    out = subprocess.run(cmd, env=dict(env), cwd=ROOT, capture_output=True, text=True, timeout=60)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out


def wait_ready(
    url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"gateway exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"gateway at {url} not ready after {timeout}s")


def start_gateway(
    workdir: Path,
    models: Iterable[Mapping[str, Any]],
    *,
    server: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    key_name: str = "e2e",
    wrap: Sequence[str] = (),
    ready_timeout: float = 20.0,
) -> GatewayProcess:
    """Write the config, migrate, create a key, start ``syntic serve`` and wait for it.
    ``wrap`` prefixes the serve command (a profiler such as valgrind, for benchmarks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "gateway.toml"
    config.write_text(toml_config(models, server))
    # The machine's proxy settings are not the test's: a gateway under test reaches its
    # loopback upstreams directly unless the test passes proxy variables itself.
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SYNTIC_") and k.lower() not in _PROXY_VARS
    }
    full_env["SYNTIC_DATABASE_URL"] = f"sqlite:///{workdir / 'syntic.db'}"
    full_env["PYTHONPATH"] = str(ROOT)
    full_env.update(env or {})
    _syntic(["migrate"], config, full_env, check=True)
    out = _syntic(["keys", "create", "--name", key_name], config, full_env, check=True)
    key = out.stdout.strip().splitlines()[-1].strip()
    log_path = workdir / "gateway.log"
    last_error: Exception | None = None
    for _attempt in range(3):
        port = free_port()
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [
                    *wrap,
                    sys.executable,
                    "-m",
                    "gateway",
                    "serve",
                    "--config",
                    str(config),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=full_env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        gw = GatewayProcess(proc, port, key, config, full_env, log_path, [key])
        try:
            wait_ready(gw.base_url, proc, timeout=ready_timeout)
            return gw
        except (RuntimeError, TimeoutError) as exc:  # e.g. the port was taken meanwhile
            last_error = exc
            gw.stop()
    raise RuntimeError(f"gateway did not start: {last_error}\n{log_path.read_text()[-3000:]}")


def serve_replica(
    gw: GatewayProcess,
    port: int,
    log: Path,
    env: Mapping[str, str] | None = None,
    *,
    args: Sequence[str] = (),
    ready_timeout: float = 20.0,
) -> GatewayProcess:
    """Another ``syntic serve`` on ``port`` with ``gw``'s config, key and database (and
    ``gw``'s environment unless ``env`` is given), ready when this returns. ``args`` go
    to ``syntic serve`` (e.g. ``("--workers", "2")``)."""
    full_env = dict(gw.env if env is None else env)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--config",
                str(gw.config_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *args,
            ],
            env=full_env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    other = GatewayProcess(proc, port, gw.api_key, gw.config_path, full_env, log)
    try:
        wait_ready(other.base_url, proc, timeout=ready_timeout)
    except Exception:
        other.stop()
        raise
    return other


class InProcessGateway:
    """uvicorn serving ``app`` in a background thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> InProcessGateway:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, lifespan="on", log_level="warning", loop="asyncio"
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=server.run, name="gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("in-process gateway did not start")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)

    def __enter__(self) -> InProcessGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

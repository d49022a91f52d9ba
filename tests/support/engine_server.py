"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``) as a real
upstream on loopback, from the venv ``scripts/install-engine-server`` makes.

    with EngineServer.start(python, weights) as engine:
        engine.base_url   # http://127.0.0.1:<port>/v1, model id ``engine.model``
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from tests.support.gateway_proc import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0  # loading the weights on a busy 2-core machine


def build_version() -> str:
    """The llama-cpp-python version ``scripts/build-local-runtime`` pins."""
    for line in (ROOT / "scripts" / "build-local-runtime").read_text().splitlines():
        if line.startswith("VERSION="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("scripts/build-local-runtime pins no VERSION")


def installed_python(env: Mapping[str, str]) -> Path | None:
    """The engine venv's interpreter, when ``scripts/install-engine-server`` completed."""
    cache = Path(env.get("SYNTIC_ENGINES_DIR") or Path.home() / ".cache" / "syntic" / "engines")
    venv = cache / f"llama-cpp-python-server-{build_version()}"
    python = venv / "bin" / "python"
    return python if (venv / ".installed").is_file() and python.is_file() else None


@dataclass
class EngineServer:
    process: subprocess.Popen[bytes]
    port: int
    model: str
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(
        cls,
        python: Path,
        weights: Path,
        log: Path,
        *,
        model: str = "engine-model",
        n_ctx: int = 2048,
    ) -> EngineServer:
        port = free_port()
        args = [
            str(python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(weights),
            "--model_alias",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            "2",
            "--verbose",
            "false",
        ]
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        with log.open("wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        server = cls(process, port, model, log)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self) -> None:
        """Until ``/v1/models`` answers (the weights are loaded), the process dies, or the
        deadline passes."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"engine server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.base_url + "/models", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"engine server not ready: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> EngineServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

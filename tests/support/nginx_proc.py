"""A real nginx built from ``deploy/nginx.conf``, in front of loopback replicas.

Only what a loopback run needs is changed: the upstream ``server`` lines point at the given
ports (keeping the file's parameters: ``max_fails``, ``fail_timeout``), nginx listens on a
free loopback port, runs one worker in the foreground, and keeps its pid, logs and temp
files under ``workdir``. Everything else (timeouts, retries, error pages, buffering) is the
file as shipped::

    with NginxProxy(workdir, [gw1.port, gw2.port]) as proxy:
        httpx.get(proxy.base_url + "/healthz")

``nginx_binary()`` is None when nginx is not installed (``scripts/test`` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.support.gateway_proc import ROOT, free_port

CONF = ROOT / "deploy" / "nginx.conf"
_SERVER = re.compile(r"^(\s*)server\s+gateway-\d+:\d+(\s[^;]*)?;\n", re.MULTILINE)


def nginx_binary() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def loopback_conf(text: str, backends: Sequence[int], port: int, workdir: Path) -> str:
    """``deploy/nginx.conf`` with its replicas and listener moved to loopback."""
    servers = _SERVER.findall(text)
    assert servers, "deploy/nginx.conf has no gateway-N upstream servers"
    indent, params = servers[0]
    lines = "".join(f"{indent}server 127.0.0.1:{p}{params or ''};\n" for p in backends)
    text = _SERVER.sub("", text, count=len(servers) - 1)
    text = _SERVER.sub(lines, text, count=1)
    text, listens = re.subn(r"listen 80;", f"listen 127.0.0.1:{port};", text)
    assert listens == 1
    text = text.replace("worker_processes auto;", "worker_processes 1;")
    temp = "".join(
        f"    {kind}_temp_path {workdir / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = text.replace("http {\n", "http {\n" + temp, 1)
    if os.geteuid() == 0:
        text = "user root;\n" + text  # workers must reach the temp dirs under a 0700 tmp
    return text


class NginxProxy:
    def __init__(self, workdir: Path, backends: Sequence[int]) -> None:
        binary = nginx_binary()
        assert binary is not None, "nginx is not installed"
        self.binary = binary
        self.workdir = workdir
        self.backends = list(backends)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        path = self.workdir / "logs" / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> NginxProxy:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.workdir / "nginx.conf"
        conf.write_text(loopback_conf(CONF.read_text(), self.backends, self.port, self.workdir))
        error_log = self.workdir / "logs" / "error.log"
        self.proc = subprocess.Popen(
            [
                self.binary,
                "-p",
                str(self.workdir),
                "-c",
                str(conf),
                "-e",
                str(error_log),
                "-g",
                f"daemon off; pid {self.workdir / 'nginx.pid'};",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited ({self.proc.returncode}):\n{self.log()}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"nginx not answering:\n{self.log()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> NginxProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

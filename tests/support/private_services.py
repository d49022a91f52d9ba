"""Private PostgreSQL and Redis servers for outage tests.

Stopping the shared servers on 5432/6379 would break every other test running on this
machine, so outage tests start their own, on free loopback ports, in a temp directory:

    with PrivatePostgres() as pg:                   # initdb + pg_ctl, as the postgres user
        pg.url                                      # postgresql://postgres@127.0.0.1:PORT/postgres
        pg.stop(); pg.start()                       # an outage and the recovery

    with PrivateRedis() as r:                       # redis-server --port PORT, no persistence
        r.url; r.stop(); r.start()
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.gateway_proc import free_port


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"PostgreSQL binary {name} not found")
    return found[-1]


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def _wait_port(port: int, up: bool, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not go {'up' if up else 'down'}")


class PrivatePostgres:
    """A throwaway PostgreSQL cluster (trust auth, loopback only, fsync off) in its own
    temp directory (pytest's tmp_path is not reachable by the postgres user)."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="syntic-pg-"))
        self.datadir = self.workdir / "data"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def __enter__(self) -> PrivatePostgres:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "postgres", "postgres")
        subprocess.run(
            _as_postgres(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(self.datadir),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.start()
        return self

    def start(self) -> None:
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c unix_socket_directories={self.workdir} -c max_connections=60"
        )
        subprocess.run(
            _as_postgres(
                [
                    _pg_bin("pg_ctl"),
                    "-D",
                    str(self.datadir),
                    "-o",
                    opts,
                    "-l",
                    str(self.workdir / "pg.log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        _wait_port(self.port, up=True)

    def stop(self) -> None:
        subprocess.run(
            _as_postgres(
                [_pg_bin("pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"]
            ),
            check=False,
            capture_output=True,
            timeout=60,
        )
        _wait_port(self.port, up=False)

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


class PrivateRedis:
    """A throwaway ``redis-server`` without persistence."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, up=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        _wait_port(self.port, up=False)

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

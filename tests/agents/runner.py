"""One agent run, as a user would start it: a scratch git repository with ``notes.txt``, a
fresh home directory, the files and commands of ``docs/agents.md`` for that agent, and the
agent under ``strace`` so that every connection it opens is known."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.agents import setup_doc
from tests.agents.installed import Pin

PROMPT_FILE = "notes.txt"
RUN_TIMEOUT_S = 300.0  # a bound on a hung agent, not a target
_CONNECT = re.compile(r"connect\(\d+, \{sa_family=(AF_INET6?), (.*?)\}")
_ADDRESS = re.compile(r'inet_(?:addr|pton)\((?:AF_INET6, )?"([^"]+)"')


@dataclass(frozen=True, slots=True)
class Scratch:
    """A repository to work in, the secret its notes hold, and a home of its own."""

    repo: Path
    home: Path
    secret: str

    @classmethod
    def make(cls, root: Path) -> Scratch:
        repo, home = root / "repo", root / "home"
        repo.mkdir(parents=True)
        home.mkdir()
        secret = "kestrel-" + secrets.token_hex(4)
        (repo / PROMPT_FILE).write_text(f"The secret word is {secret}.\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        for args in (
            ["init", "-q", "-b", "main"],
            ["add", PROMPT_FILE],
            ["commit", "-q", "-m", "notes"],
        ):
            subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
        return cls(repo, home, secret)


@dataclass(frozen=True, slots=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    off_loopback: list[str]  # connections to anything but loopback

    def output(self) -> str:
        return self.stdout + self.stderr

    def tail(self, chars: int = 3000) -> str:
        return (
            f"exit {self.returncode}\nstdout:\n{self.stdout[-chars:]}\nstderr:\n"
            f"{self.stderr[-chars:]}"
        )


def run_agent(
    pin: Pin,
    binary: Path,
    scratch: Scratch,
    gateway_url: str,
    model: str,
    api_key: str,
    strace: str,
) -> Finished:
    for block in setup_doc.files(pin.name):
        path = setup_doc.target(block, scratch.home, scratch.repo)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text(gateway_url, model))
    node = shutil.which("node")
    path_dirs = [
        str(binary.parent),
        *([str(Path(node).parent)] if node else []),
        "/usr/local/bin",
        "/usr/bin",
        "/bin",
    ]
    # A user's clean shell: none of the test process's variables (proxies, tokens).
    base = {
        "PATH": os.pathsep.join(path_dirs),
        "HOME": str(scratch.home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "SYNTIC_API_KEY": api_key,
    }
    script = setup_doc.run_block(pin.name).text(gateway_url, model)
    *setup, main = setup_doc.commands(script, base)
    for command in setup:
        done = subprocess.run(
            _program(command.argv, pin, binary),
            env=dict(command.env),
            cwd=scratch.repo,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, f"{' '.join(command.argv)}: {done.stderr[-2000:]}"
    trace = scratch.home.parent / "connect.trace"
    argv = [
        strace,
        "-f",
        "-qq",
        "-e",
        "trace=connect",
        "-o",
        str(trace),
        *_program(main.argv, pin, binary),
    ]
    done = subprocess.run(
        argv,
        env=dict(main.env),
        cwd=scratch.repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=RUN_TIMEOUT_S,
    )
    return Finished(done.returncode, done.stdout, done.stderr, off_loopback(trace.read_text()))


def _program(argv: tuple[str, ...], pin: Pin, binary: Path) -> list[str]:
    assert argv and argv[0] == pin.bin, f"{pin.name}'s commands start with {pin.bin}: {argv}"
    return [str(binary), *argv[1:]]


def off_loopback(trace: str) -> list[str]:
    """strace's connect lines to an internet address off loopback (127/8, ::1)."""
    out = []
    for line in trace.splitlines():
        match = _CONNECT.search(line)
        if match is None:
            continue
        address = _ADDRESS.search(match.group(2))
        host = address.group(1) if address else "?"
        if not (host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1")):
            out.append(line.strip())
    return out

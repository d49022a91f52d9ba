"""What ``docs/agents.md`` tells a user to write and run for each agent, read the way the
tests use it: the blocks marked ``<!-- agent-file: NAME PATH -->`` (a file, ``~`` for the
home directory, else relative to the working directory), ``<!-- agent-run: NAME -->`` (a
shell script of ``export``s and commands; ``VAR=value`` before a command is for that
command only) and ``<!-- agent-gateway -->`` (the gateway's ``[[models]]`` table).

The page's gateway address and model name stand for the test's own: ``text(...)`` puts
those in their place.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.agents.installed import ROOT

PAGE = ROOT / "docs" / "agents.md"
GATEWAY_URL = "http://127.0.0.1:8080"
MODEL = "amara-s1.2"
PROMPT = "Read notes.txt and tell me the secret word."  # every agent is asked this

_BLOCK = re.compile(
    r"^<!-- agent-(file|run|gateway):?[ \t]*([^\n]*?)[ \t]*-->[ \t]*\n"
    r"```[\w-]*[ \t]*\n(.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # "file", "run" or "gateway"
    agent: str
    path: str
    body: str

    def text(self, gateway_url: str, model: str) -> str:
        return self.body.replace(GATEWAY_URL, gateway_url).replace(MODEL, model)


@dataclass(frozen=True, slots=True)
class Command:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the environment it runs with (exports and its own assignments)


def blocks(page: str | None = None) -> list[Block]:
    text = PAGE.read_text() if page is None else page
    out = []
    for kind, words, body in _BLOCK.findall(text):
        parts = words.split()
        agent = parts[0] if parts else ""
        path = parts[1] if len(parts) > 1 else ""
        out.append(Block(kind, agent, path, body))
    return out


def files(agent: str) -> list[Block]:
    return [b for b in blocks() if b.kind == "file" and b.agent == agent]


def run_block(agent: str) -> Block:
    found = [b for b in blocks() if b.kind == "run" and b.agent == agent]
    assert len(found) == 1, f"docs/agents.md has one agent-run block for {agent}"
    return found[0]


def target(block: Block, home: Path, cwd: Path) -> Path:
    """Where a file block is written."""
    if block.path.startswith("~/"):
        return home / block.path[2:]
    return cwd / block.path


def expand(word: str, env: Mapping[str, str]) -> str:
    if word.startswith("~/"):
        word = env["HOME"] + word[1:]
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)


def commands(script: str, env: Mapping[str, str]) -> list[Command]:
    """The script's commands in order, each with the environment it runs in."""
    current = dict(env)
    out: list[Command] = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                current[name] = expand(value, current)
            continue
        own = dict(current)
        while words and _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            own[name] = expand(value, current)
        out.append(Command(tuple(expand(w, own) for w in words), own))
    return out

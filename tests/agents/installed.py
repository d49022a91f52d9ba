"""Where ``scripts/install-agents`` put each agent pinned in ``scripts/agents.txt``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "scripts" / "agents.txt"


@dataclass(frozen=True, slots=True)
class Pin:
    name: str
    registry: str
    package: str
    version: str
    bin: str
    ci: bool

    def directory(self, env: Mapping[str, str]) -> Path:
        cache = env.get("SYNTIC_AGENTS_DIR") or str(Path.home() / ".cache/syntic/agents")
        return Path(cache) / f"{self.name}-{self.version}"

    def binary(self, env: Mapping[str, str]) -> Path:
        sub = "node_modules/.bin" if self.registry == "npm" else "bin"
        return self.directory(env) / sub / self.bin

    def missing(self, env: Mapping[str, str]) -> str | None:
        """Why this agent cannot run here, or None."""
        if not (self.directory(env) / ".installed").is_file() or not self.binary(env).exists():
            return (
                f"{self.name} {self.version} is not installed at {self.directory(env)} "
                f"(run scripts/install-agents {self.name})"
            )
        return None


def pins() -> dict[str, Pin]:
    out: dict[str, Pin] = {}
    for line in TABLE.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, registry, package, version, binary, ci = line.split()
        out[name] = Pin(name, registry, package, version, binary, ci == "yes")
    return out


def required(pin: Pin) -> bool:
    """CI (``SYNTIC_REQUIRE_AGENTS=1``) installs the agents marked ``ci = yes``: their tests
    must not skip there."""
    return os.environ.get("SYNTIC_REQUIRE_AGENTS") == "1" and pin.ci

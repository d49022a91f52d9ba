"""The README's quick start, run for real from a clean checkout.

The quick-start block holds exactly two commands, ``scripts/run`` and ``scripts/test``.
The run command is exercised twice, both from ``git archive HEAD`` unpacked in a temporary
directory (nothing from the working tree leaks in) and with the gateway pointed at a
scripted upstream (the default local model is covered by ``tests/local``):

- its steps by hand in a fresh virtualenv with a non-editable install, run outside the
  checkout: ``syntic migrate``, ``syntic keys ensure-dev``, ``syntic serve``, then one strict
  tool call through the ``openai`` SDK that needs a correction, and the ledger row;
- ``scripts/run`` itself: it builds ``.venv``, prints the dev key once, serves; a second
  run installs nothing, prints no key and is serving within seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from tests.readme.readme_text import quickstart_commands
from tests.support.gateway_proc import free_port, model_table, toml_config, wait_ready
from tests.support.openai_helpers import BAD_ARGS, GOOD_ARGS, MESSAGES, refund_tool
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KEY_RE = re.compile(r"^\s*(sk_live_[A-Za-z0-9]+)\s*$", re.MULTILINE)
MODEL = "amara-s1.2"


def test_quickstart_is_exactly_the_run_and_test_commands() -> None:
    commands = quickstart_commands(README.read_text())
    assert commands == ["scripts/run", "scripts/test"]
    for command in commands:
        path = ROOT / command
        assert path.is_file() and os.access(path, os.X_OK), f"{command} is not executable"


# --- a clean checkout ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``git archive HEAD`` unpacked: what a fresh clone holds, without the working tree."""
    dest = tmp_path_factory.mktemp("checkout")
    archive = dest.parent / f"{dest.name}.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), "HEAD"],
        check=True,
        timeout=60,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="tar")
    archive.unlink()
    for needed in ("scripts/run", "pyproject.toml", "gateway/cli.py", "migrations"):
        assert (dest / needed).exists(), f"HEAD has no {needed}: commit it"
    return dest


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment minus anything that points back into this repository."""
    drop = ("SYNTIC_", "PYTHON", "VIRTUAL_ENV", "PYTEST_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))
    )
    env.update(extra)
    return env


def _config(workdir: Path, upstream: ScriptedUpstream) -> Path:
    config = workdir / "gateway.toml"
    config.write_text(toml_config([model_table(MODEL, upstream.base_url)]))
    return config


def _strict_call_with_one_correction(base_url: str, key: str, up: ScriptedUpstream) -> None:
    """One strict tool call whose first arguments break the schema: the gateway corrects
    them once and returns the corrected call, with the retry in the header and the usage."""
    up.queue(
        Reply(tool_calls=[Call("create_refund", BAD_ARGS)], usage=(40, 12)),
        Reply(tool_calls=[Call("create_refund", GOOD_ARGS)], usage=(60, 11)),
    )
    client = openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=30)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=MESSAGES,
        tools=[refund_tool()],  # type: ignore[list-item]
    )
    completion = raw.parse()
    assert raw.headers["x-syntic-schema-retries"] == "1"
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "create_refund"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == json.loads(GOOD_ARGS)  # type: ignore[union-attr]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 100
    assert (completion.usage.model_extra or {}).get("schema_retries") == 1
    assert len(up.requests) == 2
    assert up.requests[1].body["tool_choice"]["function"]["name"] == "create_refund"


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


# --- the run command's steps in a fresh virtualenv (non-editable install) ---------------------


def test_run_steps_in_a_fresh_venv_from_a_clean_checkout(checkout: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = _clean_env()
    install = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(checkout),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    work = tmp_path / "elsewhere"  # neither the repo nor the checkout
    work.mkdir()
    syntic = str(venv / "bin" / "syntic")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import gateway; print(gateway.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(venv)), where

    with ScriptedUpstream() as up:
        config = _config(work, up)
        env = _clean_env(SYNTIC_CONFIG=str(config))

        def run(*args: str) -> str:
            done = subprocess.run(
                [syntic, *args], cwd=work, env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"syntic {' '.join(args)}: {done.stderr[-2000:]}"
            return done.stdout

        assert "applied 0001_initial" in run("migrate")
        assert (work / "var" / "syntic.db").is_file()  # the default SQLite, under var/
        first = run("keys", "ensure-dev")
        (key,) = KEY_RE.findall(first)
        assert first.rstrip().endswith(key)  # the key is the last line
        again = run("keys", "ensure-dev")
        assert "sk_live_" not in again and "syntic keys create" in again

        port = free_port()
        log = (tmp_path / "serve.log").open("wb")
        proc = subprocess.Popen(
            [syntic, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(base, proc, timeout=30)
            _strict_call_with_one_correction(base, key, up)
        finally:
            code = _stop(proc)
            log.close()
        # uvicorn re-raises SIGTERM after its graceful shutdown
        assert code in (0, -signal.SIGTERM), (tmp_path / "serve.log").read_text()[-3000:]
        assert key not in (tmp_path / "serve.log").read_text()

    (row,) = json.loads(run("usage", "--json"))
    assert (row["model"], row["requests"], row["schema_retries"]) == (MODEL, 1, 1)
    assert (row["correction_prompt_tokens"], row["correction_completion_tokens"]) == (60, 11)


# --- scripts/run itself ---------------------------------------------------------------------


@dataclass
class RunOutcome:
    stdout: str
    stderr: str


@pytest.fixture
def run_script(checkout: Path, tmp_path: Path) -> Iterator[RunStarter]:
    starter = RunStarter(checkout, tmp_path)
    yield starter
    starter.stop()


class RunStarter:
    """Starts ``scripts/run`` in the checkout, waits for /healthz, stops it (SIGTERM)."""

    def __init__(self, checkout: Path, logs: Path) -> None:
        self.checkout = checkout
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self, args: list[str], env: Mapping[str, str], port: int) -> RunOutcome:
        self.runs += 1
        out = self.logs / f"run{self.runs}.out"
        err = self.logs / f"run{self.runs}.err"
        with out.open("wb") as o, err.open("wb") as e:
            self.proc = subprocess.Popen(
                [str(self.checkout / "scripts" / "run"), *args],
                cwd=self.logs,
                env=dict(env),
                stdout=o,
                stderr=e,
            )
        try:
            wait_ready(f"http://127.0.0.1:{port}", self.proc, timeout=240)
        except (RuntimeError, TimeoutError) as exc:
            detail = err.read_text()[-3000:]
            raise AssertionError(f"scripts/run did not serve: {exc}\n{detail}") from exc
        return RunOutcome(out.read_text(), err.read_text())

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        code = _stop(self.proc)
        self.proc = None
        return code


def test_scripts_run_installs_prints_the_key_once_and_restarts_fast(
    checkout: Path, tmp_path: Path, run_script: RunStarter
) -> None:
    with ScriptedUpstream() as up:
        env = _clean_env(
            SYNTIC_CONFIG=str(_config(tmp_path, up)),
            SYNTIC_DATABASE_URL=f"sqlite:///{tmp_path / 'run.db'}",
            PYTHON=getattr(sys, "_base_executable", sys.executable),
        )
        port = free_port()
        first = run_script.start(["--host", "127.0.0.1", "--port", str(port)], env, port)
        assert (checkout / ".venv" / "bin" / "syntic").is_file()
        assert "installing the gateway" in first.stderr
        assert "local model" not in first.stderr  # the config serves no local model
        (key,) = KEY_RE.findall(first.stdout)
        assert f"http://127.0.0.1:{port}/v1/models" in first.stdout
        _strict_call_with_one_correction(f"http://127.0.0.1:{port}", key, up)
        assert run_script.stop() in (0, -signal.SIGTERM)

        # Again, host and port from the environment this time: nothing to install (what made
        # the first start slow), no new key (it says how to make one), the same key works.
        port = free_port()
        env = {**env, "SYNTIC_HOST": "127.0.0.1", "SYNTIC_PORT": str(port)}
        second = run_script.start([], env, port)
        assert "installing" not in second.stderr
        assert "sk_live_" not in second.stdout + second.stderr
        assert "syntic keys create" in second.stderr
        up.reset()
        _strict_call_with_one_correction(f"http://127.0.0.1:{port}", key, up)
        assert run_script.stop() in (0, -signal.SIGTERM)

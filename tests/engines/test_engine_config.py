"""An ``engine`` combination no profile lists stops the gateway at startup with a config
error naming the model and what to use instead, never a setting the engine ignores
silently; the combinations a profile does list load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.settings import ConfigError, load_settings


def _config(tmp_path: Path, table: dict[str, str]) -> Path:
    lines = ["[[models]]", 'name = "m"', 'base_url = "http://127.0.0.1:9/v1"']
    lines += [f'{k} = "{v}"' for k, v in table.items()]
    path = tmp_path / "syntic.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"provider": "openai", "engine": "tgi"}, r"engine must be one of \['openai', 'vllm'"),
        ({"provider": "anthropic", "engine": "vllm"}, 'engine applies to provider "openai"'),
        (
            {"provider": "openai", "engine": "llama_cpp_python", "constrained_field": "vllm"},
            r"engine 'llama_cpp_python' does not read constrained_field 'vllm' "
            r"\(it reads \['llama_cpp_python'\]",
        ),
        (
            {"provider": "openai", "engine": "vllm", "constrained_field": "llama_cpp"},
            "does not read constrained_field 'llama_cpp'",
        ),
        (
            {"provider": "openai", "engine": "ollama", "constrained_field": "vllm"},
            "leave it unset for 'openai'",
        ),
        (
            {"provider": "openai", "engine": "vllm", "api": "responses"},
            'supported for engine "openai" only',
        ),
        ({"provider": "openai", "correction": "constrained"}, "needs engine"),
    ],
)
def test_a_combination_no_profile_lists_is_a_config_error(
    tmp_path: Path, table: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(_config(tmp_path, table), env={})


@pytest.mark.parametrize(
    "table",
    [
        {"engine": "llama_cpp_python", "correction": "constrained"},
        {"engine": "llama_cpp_server", "constrained_field": "llama_cpp"},
        {"engine": "vllm", "constrained_field": "openai"},
        {"engine": "sglang", "correction": "constrained"},
        {"engine": "ollama"},
        {"engine": "openai", "api": "responses", "correction": "constrained"},
        {"constrained_field": "llama_cpp_python"},  # no engine: the override alone, as before
    ],
)
def test_the_combinations_a_profile_lists_load(tmp_path: Path, table: dict[str, str]) -> None:
    settings = load_settings(_config(tmp_path, {"provider": "openai", **table}), env={})
    model = settings.models[0]
    assert model.profile.name == table.get("engine", "openai")
    assert model.output_field == table.get("constrained_field", model.profile.constrained_field)


def test_serve_refuses_it_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        {"provider": "openai", "engine": "llama_cpp_python", "constrained_field": "sglang"},
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2, done.stderr
    assert "config error: models[0]: engine 'llama_cpp_python' does not read" in done.stderr
    assert "Traceback" not in done.stderr

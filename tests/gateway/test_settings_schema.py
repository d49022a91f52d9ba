"""What the settings' one declaration per key guarantees, through ``load_settings`` and
``syntic serve --config``: a value of the wrong type or out of bounds in ``[server]``,
``[[models]]`` or a ``SYNTIC_*`` variable stops the config with a message naming the key
(and the variable), a choice lists its allowed values, and no field of ``Settings`` or
``ModelConfig`` can be added without its declaration."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from gateway.settings import (
    _TUNABLES,
    MODEL_KEYS,
    SERVER_KEYS,
    ConfigError,
    ModelConfig,
    Settings,
    _specs,
    key,
    load_settings,
)
from tests.support.gateway_proc import ROOT, toml_config

BASE = "http://127.0.0.1:9/v1"
# Settings fields that are not [server] keys: the [[models]] tables, the environment as
# read, and a bound the docs call not configurable.
NOT_SERVER_KEYS = {"models", "env", "max_tools"}
SERVER_TYPES = get_type_hints(Settings)
MODEL_TYPES = get_type_hints(ModelConfig)
DEFAULTS = Settings(models=())


def _base_type(hint: Any) -> Any:
    """``X | None`` as ``X``."""
    args = [a for a in get_args(hint) if a is not type(None)]
    return args[0] if type(None) in get_args(hint) else hint


def _wrong_values(hint: Any) -> list[Any]:
    """TOML values a key of this type must refuse."""
    kind = _base_type(hint)
    if get_origin(kind) is Literal:
        return ["no-such-choice", 1]
    wrong: dict[Any, list[Any]] = {
        str: [5, True],
        bool: ["yes", 1],
        int: ["7", 1.5, True],
        float: ["soon", True],
    }
    return wrong[kind]


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Settings:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return load_settings(path, env={} if env is None else env)


def _model(name: str = "m", **overrides: Any) -> dict[str, Any]:
    return {"name": name, "provider": "openai", "base_url": BASE} | overrides


SERVER_CASES = [
    pytest.param(name, value, id=f"{name}={value!r}")
    for name in sorted(SERVER_KEYS)
    for value in _wrong_values(SERVER_TYPES[name])
]


@pytest.mark.parametrize(("name", "value"), SERVER_CASES)
def test_every_server_key_of_the_wrong_type_is_named(tmp_path: Path, name: str, value: Any) -> None:
    text = toml_config([_model()], server={name: value})
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert str(info.value).startswith(f"server.{name}: expected "), str(info.value)


MODEL_CASES = [
    pytest.param(name, value, id=f"{name}={value!r}")
    for name in sorted(MODEL_KEYS)
    for value in _wrong_values(MODEL_TYPES[name])
]


@pytest.mark.parametrize(("name", "value"), MODEL_CASES)
def test_every_model_key_of_the_wrong_type_is_named(tmp_path: Path, name: str, value: Any) -> None:
    # The second table is the wrong one: the message names its index.
    text = toml_config([_model(), _model("n") | {name: value}])
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert str(info.value).startswith(f"models[1].{name}"), str(info.value)


LITERAL_KEYS = sorted(
    name for name in MODEL_KEYS if get_origin(_base_type(MODEL_TYPES[name])) is Literal
)


def test_the_choices_are_the_literal_keys() -> None:
    assert {"provider", "correction", "engine", "constrained_field", "api"} <= set(LITERAL_KEYS)
    assert {"max_tokens_field", "on_invalid"} <= set(LITERAL_KEYS)


@pytest.mark.parametrize("name", LITERAL_KEYS)
def test_every_choice_refuses_an_unknown_value_listing_the_allowed_ones(
    tmp_path: Path, name: str
) -> None:
    allowed = list(get_args(_base_type(MODEL_TYPES[name])))
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, toml_config([_model(**{name: "nope"})]))
    assert str(info.value) == f"models[0].{name} must be one of {allowed}"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"strict_tools": "yes"}, "models[0].strict_tools: expected true or false, got 'yes'"),
        ({"timeout_s": "x"}, "models[0].timeout_s: expected a number, got 'x'"),
        ({"timeout_s": -1.0}, "models[0].timeout_s must be a finite number, not negative"),
        ({"max_concurrent": -1}, "models[0].max_concurrent must not be negative"),
        ({"name": 5}, "models[0].name: expected a string, got 5"),
        ({"proxy": 3128}, "models[0].proxy: expected a string, got 3128"),
    ],
    ids=["bool", "float-text", "float-negative", "int-negative", "name", "optional-text"],
)
def test_a_bad_model_value_is_one_exact_message(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, toml_config([_model(**overrides)]))
    assert str(info.value) == message


def test_models_must_be_an_array_of_tables(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^models: expected an array of tables"):
        _load(tmp_path, 'models = "m"\n')
    with pytest.raises(ConfigError, match=r"^models\[0\]: expected a table"):
        _load(tmp_path, 'models = ["m"]\n')


def test_every_field_is_declared() -> None:
    """A new field of either class fails here until it is a key (or declared unread)."""
    assert {f.name for f in dataclasses.fields(ModelConfig)} == MODEL_KEYS
    assert {f.name for f in dataclasses.fields(Settings)} == SERVER_KEYS | NOT_SERVER_KEYS
    assert not SERVER_KEYS & NOT_SERVER_KEYS


def test_a_field_without_its_declaration_is_refused_when_the_class_is_read() -> None:
    @dataclasses.dataclass(frozen=True)
    class Declared:
        port: int = key(80)

    @dataclasses.dataclass(frozen=True)
    class Forgotten:
        port: int = key(80)
        host: str = "x"

    @dataclasses.dataclass(frozen=True)
    class Unreadable:
        ports: tuple[int, ...] = key((80,))

    assert list(_specs(Declared)) == ["port"]
    with pytest.raises(TypeError, match=r"Forgotten\.host: declare it"):
        _specs(Forgotten)
    with pytest.raises(TypeError, match=r"Unreadable\.ports: no reader"):
        _specs(Unreadable)


def _env_text(value: Any) -> str:
    return "/srv/x" if value is None else str(value)


def test_the_environment_overrides_every_server_key_but_five() -> None:
    # SYNTIC_KEY_SECRET overrides key_hash_secret; a misspelt variable would drop out here.
    fixed = {"host", "port", "max_body_bytes", "stream_keepalive_s", "key_hash_secret"}
    assert set(_TUNABLES) == SERVER_KEYS - fixed
    assert load_settings(None, env={"SYNTIC_KEY_SECRET": "p"}).key_hash_secret == "p"
    assert load_settings(None, env={"SYNTIC_PORT": "1"}).port == DEFAULTS.port


@pytest.mark.parametrize("name", _TUNABLES)
def test_every_environment_override_is_read_from_text(name: str) -> None:
    default = getattr(DEFAULTS, name)
    settings = load_settings(None, env={f"SYNTIC_{name.upper()}": _env_text(default)})
    value = getattr(settings, name)
    assert value == (default if default is not None else "/srv/x")
    assert type(value) is type(default) or default is None


def test_a_bad_environment_value_names_the_key_and_the_variable(tmp_path: Path) -> None:
    env = {"SYNTIC_MAX_INFLIGHT": "lots"}
    with pytest.raises(ConfigError) as info:
        load_settings(None, env=env)
    message = "server.max_inflight (SYNTIC_MAX_INFLIGHT): expected an integer, got 'lots'"
    assert str(info.value) == message
    with pytest.raises(ConfigError, match=r"^server\.request_timeout_s \(SYNTIC_REQUEST_TI"):
        load_settings(None, env={"SYNTIC_REQUEST_TIMEOUT_S": "nan"})
    assert load_settings(None, env={"SYNTIC_KEY_SECRET": "pepper"}).key_hash_secret == "pepper"
    assert load_settings(None, env={"SYNTIC_REDIS_URL": ""}).redis_url is None


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"request_timeout_s": float("inf")}, "server.request_timeout_s must be a finite"),
        (
            {"ledger_spool_segment_bytes": 1},
            "server.ledger_spool_segment_bytes must be between 65536 and 1073741824",
        ),
        ({"idempotency_lease_s": 0.5}, "server.idempotency_lease_s must be between 1 and 60"),
        ({"ledger_flush_interval_s": 0.0}, "between 0.01 and 10"),
        ({"schema_cache_max_bytes": 0}, "server.schema_cache_max_bytes must be at least 1"),
    ],
    ids=["inf", "int-bounds", "float-bounds", "fraction", "at-least"],
)
def test_bounds_are_named_as_declared(tmp_path: Path, server: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, toml_config([_model()], server=server))
    assert message in str(info.value)


def test_a_file_value_is_checked_even_when_the_environment_overrides_it(
    tmp_path: Path,
) -> None:
    text = toml_config([_model()], server={"max_inflight": "7"})
    with pytest.raises(ConfigError, match=r"^server\.max_inflight: expected an integer"):
        _load(tmp_path, text, env={"SYNTIC_MAX_INFLIGHT": "9"})
    text = toml_config([_model()], server={"max_inflight": 7})
    assert _load(tmp_path, text, env={"SYNTIC_MAX_INFLIGHT": "9"}).max_inflight == 9


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"strict_tools": "yes"}, "models[0].strict_tools"),
        ({"timeout_s": "x"}, "models[0].timeout_s"),
        ({"max_concurrent": -1}, "models[0].max_concurrent"),
        ({"api": "graphql"}, "models[0].api must be one of"),
    ],
    ids=["strict-tools-text", "timeout-text", "concurrent-negative", "api-choice"],
)
def test_serve_refuses_a_bad_model_table_in_one_line(
    tmp_path: Path, overrides: dict[str, Any], named: str
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(toml_config([_model(**overrides)]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTIC_")}
    env.update(PYTHONPATH=str(ROOT), SYNTIC_DATABASE_URL=f"sqlite:///{tmp_path / 'db'}")
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert named in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr

"""README.md and the user docs checked against the code, so they cannot rot.

In README.md and the docs it links for users (``USER_DOCS``): every ``syntic`` command and
flag written in code exists in the real parser (also ``python -m gateway``, ``python -m
validator`` and the serve flags passed through ``scripts/run``), and together they cover
every subcommand; every ``scripts/...`` exists; every ``SYNTIC_*`` variable named is read
by the code, a script, CI, the tests or an example; every relative link leads to a file.
``docs/configuration.md`` is the reference: its full example loads, lists every
``[[models]]`` and ``[server]`` key and shows the defaults, its tables list every key with
its default, and it names every environment variable the gateway and the scripts read.
The README's own config example loads; its error table lists every code the gateway can
emit and no other; its endpoint table lists every route. ``docs/validator.md`` names every
public name of ``validator``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest
from starlette.routing import Route

import validator
from gateway.app import create_app
from gateway.cli import build_parser
from gateway.settings import _TUNABLES, SERVER_KEYS, ModelConfig, Settings, load_settings
from tests.readme.readme_text import (
    code_blocks,
    code_lines,
    invocations,
    sections,
    table_rows,
)
from validator.__main__ import _parser as validator_parser

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "README.md").read_text()
USER_DOCS = [
    "README.md",
    "docs/configuration.md",
    "docs/operations.md",
    "docs/security.md",
    "docs/validator.md",
    "docs/agents.md",
]
DOCS = {name: (ROOT / name).read_text() for name in USER_DOCS}
CONFIGURATION = DOCS["docs/configuration.md"]
# [server] keys whose example value is not the default (there is none to show)
SHOWN_NOT_DEFAULT = {"redis_url", "data_dir"}
ENV_NAME = re.compile(r"\bSYNTIC_[A-Z0-9_]*[A-Z0-9]\b")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _check_args(root: argparse.ArgumentParser, prog: str, args: list[str]) -> str | None:
    """None if ``args`` name real subcommands and flags of ``root``, else what is wrong."""
    parser, path = root, [prog]
    for arg in args:
        subs = _subparsers(parser)
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            if flag.startswith("--") and flag not in _options(parser):
                return f"{' '.join(path)} has no option {flag}"
        elif subs:
            if arg not in subs:
                return f"{' '.join(path)} has no subcommand {arg!r}"
            parser = subs[arg]
            path.append(arg)
    return None


def test_parsing_helpers_see_commands_in_blocks_and_spans() -> None:
    text = "x `syntic keys create --name a` y\n\n```sh\n.venv/bin/syntic migrate  # c\n```\n"
    assert invocations(text, "syntic") == [["migrate"], ["keys", "create", "--name", "a"]]
    assert _check_args(build_parser(), "syntic", ["keys", "create", "--nope"]) is not None
    assert _check_args(build_parser(), "syntic", ["kys"]) is not None
    assert _check_args(build_parser(), "syntic", ["serve", "--port", "1"]) is None


@pytest.mark.parametrize(
    ("program", "parser"),
    [
        ("syntic", build_parser()),
        ("-m gateway", build_parser()),
        ("-m validator", validator_parser()),
    ],
)
def test_every_command_and_flag_written_exists(
    program: str, parser: argparse.ArgumentParser
) -> None:
    found = [args for text in DOCS.values() for args in invocations(text, program)]
    assert found or program == "-m gateway", f"the docs show no {program} command"
    problems = [p for args in found if (p := _check_args(parser, program, args))]
    assert not problems, problems
    if program == "syntic":  # the documented CLI covers every subcommand
        written = {args[0] for args in found if args}
        assert set(_subparsers(parser)) <= written


def test_run_command_flags_are_serve_flags_and_scripts_exist() -> None:
    serve = _subparsers(build_parser())["serve"]
    for text in DOCS.values():
        for args in invocations(text, "scripts/run"):
            for arg in args:
                if arg.startswith("--"):
                    assert arg.split("=", 1)[0] in _options(serve), f"scripts/run {arg}"
    named = set(re.findall(r"\bscripts/[\w.-]+", "\n".join(code_lines(TEXT))))
    assert {"scripts/run", "scripts/test"} <= named
    for text in DOCS.values():
        named |= set(re.findall(r"\bscripts/[\w.-]+", "\n".join(code_lines(text))))
    for script in named:
        assert (ROOT / script).is_file(), f"the docs name {script}, which does not exist"


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_lead_to_files() -> None:
    for name, text in DOCS.items():
        base = (ROOT / name).parent
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path = (base / target).resolve()
            assert path.exists(), f"{name} links to {target}, which does not exist"


def _env_names_read() -> tuple[set[str], set[str]]:
    """(names the gateway package reads, names the scripts and entrypoint read)."""
    gateway = {f"SYNTIC_{name.upper()}" for name in _TUNABLES}  # built as SYNTIC_ + name
    for path in (ROOT / "gateway").rglob("*.py"):
        gateway.update(ENV_NAME.findall(path.read_text()))
    scripts: set[str] = set()
    for path in [*(ROOT / "scripts").iterdir(), ROOT / "deploy" / "docker-entrypoint.sh"]:
        if path.is_file():
            scripts.update(ENV_NAME.findall(path.read_text()))
    return gateway, scripts


def _env_names_read_by_tests_and_examples() -> set[str]:
    names = set(ENV_NAME.findall((ROOT / ".ci" / "run").read_text()))
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "examples").iterdir()]:
        if path.parent.name != "readme":  # not this test's own strings
            names.update(ENV_NAME.findall(path.read_text()))
    return names


def test_environment_variables_documented_both_ways() -> None:
    """Every variable the gateway or a script reads is in docs/configuration.md; every one
    the docs name is read by the gateway, a script, CI, the tests or an example."""
    gateway, scripts = _env_names_read()
    assert {"SYNTIC_CONFIG", "SYNTIC_DATABASE_URL", "SYNTIC_REQUEST_TIMEOUT_S"} <= gateway
    undocumented = (gateway | scripts) - set(ENV_NAME.findall(CONFIGURATION))
    assert not undocumented, f"not in docs/configuration.md: {sorted(undocumented)}"
    read = gateway | scripts | _env_names_read_by_tests_and_examples()
    for name, text in DOCS.items():
        unread = set(ENV_NAME.findall(text)) - read
        assert not unread, f"{name} names {sorted(unread)}, which nothing reads"


def _toml_example(text: str, section: str) -> tuple[str, dict[str, object]]:
    blocks = [b for b in code_blocks(sections(text)[section]) if b.lang == "toml"]
    assert len(blocks) == 1, f"the {section} section has one toml example"
    return blocks[0].body, tomllib.loads(blocks[0].body)


def _config_example() -> dict[str, object]:
    return _toml_example(CONFIGURATION, "The whole file")[1]


def _server_keys_read() -> set[str]:
    # Each is shown read as written by test_config_example_loads_and_lists_every_key.
    return set(SERVER_KEYS)


def test_config_example_loads_and_lists_every_key(tmp_path: Path) -> None:
    example = _config_example()
    models = example["models"]
    assert isinstance(models, list) and models
    written = {k for table in models for k in table}
    assert written == {f.name for f in dataclasses.fields(ModelConfig)}
    server = example["server"]
    assert isinstance(server, dict)
    assert set(server) == _server_keys_read()
    assert "host" in server and "max_inflight" in server

    path = tmp_path / "full.toml"
    path.write_text(_toml_example(CONFIGURATION, "The whole file")[0])
    settings = load_settings(path, env={})
    defaults = Settings(models=())
    for key, value in server.items():
        assert getattr(settings, key) == value, f"[server] {key} is not read as written"
        if key not in SHOWN_NOT_DEFAULT:  # elsewhere the example shows the defaults
            assert value == getattr(defaults, key), f"[server] {key}: default is not {value!r}"


def test_readme_config_example_loads(tmp_path: Path) -> None:
    body, example = _toml_example(TEXT, "Configuration")
    path = tmp_path / "readme.toml"
    path.write_text(body)
    settings = load_settings(path, env={})
    models = example["models"]
    assert isinstance(models, list) and len(models) == 1
    assert [m.name for m in settings.models] == [models[0]["name"]]
    server = example.get("server", {})
    assert isinstance(server, dict)
    for key, value in server.items():
        assert getattr(settings, key) == value, f"[server] {key} is not read as written"


def _default_in_cell(cell: str) -> object:
    """The first code span of a table's default cell as a value (``none``: None)."""
    if cell.strip() == "none":
        return None
    span = re.search(r"`([^`]*)`", cell)
    assert span is not None, f"no default in {cell!r}"
    return json.loads(span.group(1))


def _key_rows(section: str) -> dict[str, list[str]]:
    rows = {}
    for row in table_rows(section):
        key = re.fullmatch(r"`(\w+)`", row[0])
        if key:
            rows[key.group(1)] = row
    return rows


def test_configuration_tables_list_every_key_with_its_default() -> None:
    defaults = Settings(models=())
    server = _key_rows(sections(CONFIGURATION)["`[server]`"])
    assert set(server) == _server_keys_read()
    for key, row in server.items():
        expected = getattr(defaults, key)
        assert _default_in_cell(row[2]) == expected, f"[server] {key}: default is {expected!r}"

    models = _key_rows(sections(CONFIGURATION)["`[[models]]`"])
    fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
    assert set(models) == set(fields)
    for key, row in models.items():
        default = fields[key].default
        if default is dataclasses.MISSING:
            assert row[2] in ("required", "`name`"), f"[[models]] {key}: {row[2]}"
        elif key != "correction":  # None there means: decided by the provider
            assert _default_in_cell(row[2]) == default, f"[[models]] {key}: {default!r}"


def test_validator_doc_names_every_public_name() -> None:
    text = DOCS["docs/validator.md"]
    public = text[text.index("Public API") :]
    missing = [name for name in validator.__all__ if f"`{name}`" not in public]
    assert not missing, f"docs/validator.md does not list {missing}"


def _codes_emitted() -> set[str]:
    codes = {"schema_not_strict", "invalid_tool_schema"}  # validator.IssueCode (lint issues)
    patterns = (
        r"\bcode=\"([a-z_]+)\"",
        r"default_code(?::\s*str)?\s*=\s*\"([a-z_]+)\"",
        r"_refusal\(\s*\d+,\s*\"[^\"]*\",\s*\"([a-z_]+)\"",
    )
    for path in (ROOT / "gateway").rglob("*.py"):
        source = path.read_text()
        for pattern in patterns:
            codes.update(re.findall(pattern, source))
    return codes


def test_error_table_lists_exactly_the_codes_the_gateway_emits() -> None:
    emitted = _codes_emitted()
    assert {"tool_arguments_invalid", "upstream_timeout", "headers_too_large"} <= emitted
    rows = table_rows(sections(TEXT)["Errors"])
    listed: set[str] = set()
    for row in rows:
        assert re.fullmatch(r"\d{3}", row[0]), row
        listed.update(re.findall(r"`([a-z_]+)`", row[1]))
    assert not emitted - listed, f"missing from the error table: {sorted(emitted - listed)}"
    assert not listed - emitted, f"the gateway never emits: {sorted(listed - emitted)}"


def test_endpoint_tables_list_every_route() -> None:
    app = create_app(Settings(models=()))
    routes = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route)
        for method in (route.methods or set()) - {"HEAD"}
    }
    listed = {
        (row[0], path)
        for row in table_rows(sections(TEXT)["Endpoints"])
        if re.fullmatch(r"GET|POST|DELETE|PUT|PATCH", row[0])
        for path in re.findall(r"`(/[^`]*)`", row[1])
    }
    assert routes <= listed, f"not in the endpoint table: {sorted(routes - listed)}"
    assert listed <= routes, f"listed but not served: {sorted(listed - routes)}"

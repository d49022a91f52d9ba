"""``python -m validator`` through a real subprocess: output lines and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STRICT = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_number", "amount_pence", "note"],
    "additionalProperties": False,
}
LOOSE = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}
BROKEN = {"type": "object", "properties": {"a": {"type": "strnig"}}, "required": ["a"]}
MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    docs: dict[str, Any] = {
        "strict": STRICT,
        "loose": LOOSE,
        "broken": BROKEN,
        "map": MAP,
        "good_args": {"order_number": "582131", "amount_pence": 1250, "note": None},
        "bad_args": {"order_number": "58", "amount_pence": "12", "note": None},
    }
    for name, doc in docs.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        out[name] = str(path)
    (tmp_path / "garbage.json").write_text("{not json")
    out["garbage"] = str(tmp_path / "garbage.json")
    out["missing"] = str(tmp_path / "nope.json")
    return out


def test_lint_clean_exits_0(files: dict[str, str]) -> None:
    proc = run("lint", files["strict"])
    assert proc.returncode == 0
    assert proc.stdout == ""


def test_lint_issues_one_per_line_exit_1(files: dict[str, str]) -> None:
    proc = run("lint", "--path", "tools[0].function.parameters", files["broken"])
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "schema_not_strict tools[0].function.parameters: "
        'an object schema must set "additionalProperties": false',
        "invalid_tool_schema tools[0].function.parameters.properties.a.type: unknown type "
        '"strnig"; expected one of array, boolean, integer, null, number, object, string',
    ]


def test_lint_counts(files: dict[str, str]) -> None:
    proc = run("lint", "--counts", files["strict"])
    assert proc.returncode == 0
    assert "count properties: 3 / 5000" in proc.stdout.splitlines()


def test_strictify_prints_projection(files: dict[str, str]) -> None:
    proc = run("strictify", files["loose"])
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert "dropped" in proc.stderr


def test_strictify_refusal_exit_1(files: dict[str, str]) -> None:
    proc = run("strictify", files["map"])
    assert proc.returncode == 1
    assert proc.stdout.startswith("invalid_tool_schema additionalProperties: a free-form map")


def test_validate_ok_and_invalid(files: dict[str, str]) -> None:
    ok = run("validate", files["strict"], files["good_args"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run("validate", files["strict"], files["bad_args"])
    assert bad.returncode == 1
    lines = bad.stdout.splitlines()
    assert any(line.startswith("/amount_pence must be integer") for line in lines), lines
    assert any(line.startswith("/order_number must match pattern") for line in lines), lines


def test_validate_unparseable_instance_is_invalid(files: dict[str, str]) -> None:
    proc = run("validate", files["strict"], files["garbage"])
    assert proc.returncode == 1
    assert proc.stdout.strip()


def test_validate_schema_outside_subset(files: dict[str, str]) -> None:
    proc = run("validate", files["broken"], files["good_args"])
    assert proc.returncode == 1
    assert "invalid_tool_schema properties.a.type" in proc.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "{missing}"),
        ("lint", "{garbage}"),
        ("strictify", "{missing}"),
        ("validate", "{strict}", "{missing}"),
        ("lint",),
        ("frobnicate", "{strict}"),
        (),
    ],
)
def test_usage_and_io_errors_exit_2(files: dict[str, str], args: tuple[str, ...]) -> None:
    proc = run(*(a.format(**files) for a in args))
    assert proc.returncode == 2
    assert proc.stderr.strip()

"""JSON Schema Test Suite (draft 2020-12) through the public API.

Every case whose schema ``validator.compile`` accepts (the supported subset) must be
decided correctly; the rest are listed with their reason in ``conformance_outside.json``
(under pytest's base temp dir, path printed) and summarised. ``format`` is asserted, so
the supported formats come from ``optional/format/*.json`` and the annotation-only
``format.json`` is listed as outside.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import validator

_REPO = Path(__file__).resolve().parents[2]
_DEFAULT_SUITE = _REPO.parent / "shared" / "json-schema-test-suite"
SUITE = (
    Path(os.environ.get("JSON_SCHEMA_TEST_SUITE", str(_DEFAULT_SUITE))) / "tests" / "draft2020-12"
)
FORMATS = (
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
)
# Measured: 805 in-subset cases at the time of writing; a floor guards against the subset
# silently shrinking (e.g. compile starting to refuse a keyword it supports).
IN_SUBSET_FLOOR = 780

pytestmark = pytest.mark.skipif(not SUITE.is_dir(), reason=f"test suite not found at {SUITE}")


@dataclass(frozen=True, slots=True)
class Group:
    file: str
    description: str
    schema: Any
    tests: list[dict[str, Any]]


def _files() -> list[Path]:
    if not SUITE.is_dir():
        return []
    top = sorted(SUITE.glob("*.json"))
    return top + [SUITE / "optional" / "format" / f"{name}.json" for name in FORMATS]


def _groups() -> list[Group]:
    groups: list[Group] = []
    for path in _files():
        name = str(path.relative_to(SUITE))
        for raw in json.loads(path.read_text()):
            groups.append(Group(name, raw["description"], raw["schema"], raw["tests"]))
    return groups


def _outside_reason(group: Group) -> str | None:
    if group.file == "format.json":
        return "format.json treats format as annotation only; strict mode asserts format"
    try:
        validator.compile(group.schema)
    except validator.SchemaError as exc:
        return "; ".join(f"{i.param or '(root)'}: {i.message}" for i in exc.issues[:3])
    return None


GROUPS = _groups()


@pytest.mark.parametrize("file", sorted({g.file for g in GROUPS}))
def test_in_subset_cases_are_decided_correctly(file: str) -> None:
    wrong: list[str] = []
    for group in (g for g in GROUPS if g.file == file):
        if _outside_reason(group) is not None:
            continue
        compiled = validator.compile(group.schema)
        for case in group.tests:
            errors = compiled.validate(case["data"])
            if (errors == []) != case["valid"] or compiled.is_valid(case["data"]) != case["valid"]:
                wrong.append(f"{group.description} / {case['description']}: {errors}")
    assert wrong == []


def test_outside_cases_are_listed_and_in_subset_count_is_substantial(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    inside = 0
    outside: list[dict[str, str]] = []
    for group in GROUPS:
        reason = _outside_reason(group)
        if reason is None:
            inside += len(group.tests)
            continue
        for case in group.tests:
            outside.append(
                {
                    "file": group.file,
                    "description": f"{group.description} / {case['description']}",
                    "reason": reason,
                }
            )
    report = tmp_path_factory.getbasetemp() / "conformance_outside.json"
    report.write_text(json.dumps(outside, indent=1))
    print(f"\nconformance: {inside} cases in subset, {len(outside)} outside -> {report}")
    assert all(o["reason"] for o in outside)
    assert inside >= IN_SUBSET_FLOOR


@pytest.mark.parametrize("file", sorted({g.file for g in GROUPS} - {"format.json"}))
def test_engine_alone_decides_every_case_it_accepts(file: str) -> None:
    """The engine's own keyword check (without lint) accepts a wider set than lint:
    boolean schemas, ``$ref`` beside other keywords, pointers outside ``$defs``. Whatever
    it accepts it must decide correctly, on both back ends."""
    from validator._compile import engine
    from validator._ir import BuildError

    wrong: list[str] = []
    for group in (g for g in GROUPS if g.file == file):
        try:
            fast, interp = engine(group.schema)
        except BuildError:
            continue
        for case in group.tests:
            errors = interp.errors(case["data"])
            if fast(case["data"]) != case["valid"] or (errors == []) != case["valid"]:
                wrong.append(f"{group.description} / {case['description']}: {errors}")
    assert wrong == []

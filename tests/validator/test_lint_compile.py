"""``lint_compile_async``: the gateway's request-side check in one lint walk."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

import validator
import validator._lint as lint_module


def _strict(extra: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {extra: {"type": "integer", "minimum": 1}},
        "required": [extra],
        "additionalProperties": False,
    }


async def test_strict_schema_compiles_with_one_lint_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = lint_module.subset_issues

    def counting(schema: Any, **kw: Any) -> list[validator.Issue]:
        calls.append(schema)
        return real(schema, **kw)

    monkeypatch.setattr(lint_module, "subset_issues", counting)
    schema = _strict(f"n_{secrets.token_hex(6)}")  # new to the shared cache
    issues, compiled = await validator.lint_compile_async(schema, path="tools[0].function")
    assert issues == [] and compiled is not None
    assert compiled.validate({next(iter(schema["properties"])): 0})[0].keyword == "minimum"
    assert calls == []  # compile did not repeat the subset walk lint already covered
    assert compiled is validator.compile(schema)  # the one shared cache


@pytest.mark.parametrize(
    ("schema", "code", "param"),
    [
        ({"type": "object", "properties": {}}, "schema_not_strict", "p"),
        (
            {"type": "object", "properties": {}, "additionalProperties": False, "allOf": []},
            "invalid_tool_schema",
            "p.allOf",
        ),
    ],
)
async def test_schema_with_issues_is_not_compiled(
    schema: dict[str, Any], code: str, param: str
) -> None:
    before = validator.cache_stats().misses
    issues, compiled = await validator.lint_compile_async(schema, path="p")
    assert compiled is None
    assert (issues[0].code, issues[0].param) == (code, param)
    assert issues == validator.lint(schema, path="p")
    assert validator.cache_stats().misses == before

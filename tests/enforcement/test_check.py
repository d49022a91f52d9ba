"""Request-side checks (gateway.enforcement.check): table-driven, no HTTP."""

from __future__ import annotations

from typing import Any

import pytest

import validator
from gateway.canonical import ChatRequest, JsonSchemaFormat, Message, TextPart, ToolSpec
from gateway.enforcement import (
    OPENAI_PATHS,
    LintCache,
    ParamPaths,
    SchemaRejected,
    check_request,
)
from gateway.errors import InvalidRequest
from gateway.settings import ModelConfig
from tests.support.openai_helpers import REFUND_SCHEMA

MODEL = ModelConfig(name="m", provider="openai", upstream_model="u")
NO_STRICT = ModelConfig(name="m", provider="openai", upstream_model="u", strict_tools=False)
ANTHROPIC_PATHS = ParamPaths(
    tool_schema="tools[{i}].input_schema",
    tool_name="tools[{i}].name",
    response_schema="output_config.format.schema",
)
OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}  # not strict


def _req(*tools: ToolSpec, rf: Any = None) -> ChatRequest:
    return ChatRequest(
        model="m", messages=(Message("user", (TextPart("hi"),)),), tools=tools, response_format=rf
    )


def _tool(name: str, schema: dict[str, Any], strict: bool = True) -> ToolSpec:
    return ToolSpec(name=name, parameters=schema, strict=strict)


CASES = [
    # (request, model, paths, expected code, expected param)
    (
        _req(_tool("a", OPEN)),
        MODEL,
        OPENAI_PATHS,
        "schema_not_strict",
        "tools[0].function.parameters",
    ),
    (
        _req(_tool("x", OPEN, strict=False), _tool("a", OPEN)),
        MODEL,
        OPENAI_PATHS,
        "schema_not_strict",
        "tools[1].function.parameters",
    ),
    (
        _req(_tool("x", OPEN, strict=False), _tool("a", OPEN)),
        MODEL,
        ANTHROPIC_PATHS,
        "schema_not_strict",
        "tools[1].input_schema",
    ),
    (
        _req(rf=JsonSchemaFormat(schema=OPEN, strict=True)),
        MODEL,
        OPENAI_PATHS,
        "schema_not_strict",
        "response_format.json_schema.schema",
    ),
    (
        _req(rf=JsonSchemaFormat(schema=OPEN, strict=True)),
        MODEL,
        ANTHROPIC_PATHS,
        "schema_not_strict",
        "output_config.format.schema",
    ),
    (_req(_tool("a", REFUND_SCHEMA)), NO_STRICT, OPENAI_PATHS, "strict_not_supported", "model"),
    (
        _req(_tool("a", REFUND_SCHEMA), _tool("a", REFUND_SCHEMA)),
        MODEL,
        OPENAI_PATHS,
        "invalid_request",
        "tools[1].function.name",
    ),
    (  # a schema refused before the duplicate is met: the schema's 400
        _req(_tool("a", OPEN), _tool("b", OPEN, strict=False), _tool("b", OPEN, strict=False)),
        MODEL,
        OPENAI_PATHS,
        "schema_not_strict",
        "tools[0].function.parameters",
    ),
    (  # non-strict tools of one name, in a strict request: refused at the second
        _req(_tool("a", REFUND_SCHEMA), _tool("b", OPEN, strict=False), _tool("b", OPEN, False)),
        MODEL,
        OPENAI_PATHS,
        "invalid_request",
        "tools[2].function.name",
    ),
    (
        _req(*(_tool(f"t{i}", OPEN, strict=False) for i in range(5))),
        MODEL,
        OPENAI_PATHS,
        "too_many_tools",
        "tools",
    ),
]


@pytest.mark.parametrize(("request_", "model", "paths", "code", "param"), CASES)
async def test_check_rejects(
    request_: ChatRequest, model: ModelConfig, paths: ParamPaths, code: str, param: str
) -> None:
    with pytest.raises(InvalidRequest) as info:
        await check_request(request_, model, paths=paths, lint_cache=LintCache(), max_tools=4)
    assert (info.value.code, info.value.param) == (code, param)


@pytest.mark.parametrize(
    ("request_", "model", "strict_names", "output"),
    [
        (_req(_tool("a", OPEN, strict=False)), NO_STRICT, set(), False),  # nothing strict
        (_req(_tool("a", REFUND_SCHEMA), _tool("b", OPEN, strict=False)), MODEL, {"a"}, False),
        (_req(rf=JsonSchemaFormat(schema=REFUND_SCHEMA, strict=True)), MODEL, set(), True),
        (_req(rf=JsonSchemaFormat(schema=OPEN, strict=False)), NO_STRICT, set(), False),
    ],
)
async def test_check_plans(
    request_: ChatRequest, model: ModelConfig, strict_names: set[str], output: bool
) -> None:
    plan = await check_request(
        request_, model, paths=OPENAI_PATHS, lint_cache=LintCache(), max_tools=128
    )
    assert set(plan.tools) == strict_names
    assert (plan.output is not None) == output
    assert plan.tool_names == {t.name for t in request_.tools}
    assert plan.enforced == bool(strict_names or output)


async def test_schema_rejected_lists_every_issue() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": OPEN}}
    with pytest.raises(SchemaRejected) as info:
        await check_request(
            _req(_tool("a", schema)),
            MODEL,
            paths=OPENAI_PATHS,
            lint_cache=LintCache(),
            max_tools=128,
        )
    issues = info.value.envelope("req_1")["error"]["issues"]
    assert len(issues) >= 2
    assert {i["param"] for i in issues} >= {
        "tools[0].function.parameters",
        "tools[0].function.parameters.properties.b",
    }


async def test_lint_cache_hits_on_same_schema_in_any_key_order() -> None:
    cache = LintCache()
    reordered = dict(reversed(list(REFUND_SCHEMA.items())))
    for schema in (REFUND_SCHEMA, reordered, REFUND_SCHEMA):
        await check_request(
            _req(_tool("a", schema)), MODEL, paths=OPENAI_PATHS, lint_cache=cache, max_tools=128
        )
    assert (cache.misses, cache.hits) == (1, 2)


async def test_lint_cache_compiled_is_resolve_on_a_clean_hit_else_none() -> None:
    cache = LintCache()
    path = "tools[0].function.parameters"
    assert cache.compiled(REFUND_SCHEMA, path) is None  # a miss: resolve does the work
    assert (cache.misses, cache.hits) == (0, 0)
    resolved = await cache.resolve(REFUND_SCHEMA, path)
    assert cache.compiled(REFUND_SCHEMA, path) is resolved
    assert (cache.misses, cache.hits) == (1, 1)
    with pytest.raises(SchemaRejected):
        await cache.resolve(OPEN, path)
    assert cache.compiled(OPEN, path) is None  # a rejected schema: resolve raises again
    with pytest.raises(SchemaRejected):
        await cache.resolve(OPEN, path)
    assert (cache.misses, cache.hits) == (2, 2)


def test_lint_cache_is_bounded() -> None:
    cache = LintCache(maxsize=2)
    for i in range(4):
        cache.lint({"type": "object", "properties": {f"p{i}": {"type": "string"}}}, "p")
    assert (cache.misses, len(cache._entries)) == (4, 2)


def _strict_object(tag: str, n: int) -> dict[str, Any]:
    props = {f"{tag}_{i}": {"type": "string"} for i in range(n)}
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


async def test_lint_cache_is_bounded_by_schema_bytes() -> None:
    """A clean verdict keeps its compiled schema alive: the cache also bounds the bytes it
    holds that way, or large distinct schemas would pin their compilations."""
    size = (await LintCache().resolve(_strict_object("sp", 40), "p")).schema_bytes
    cache = LintCache(maxsize=1024, max_bytes=3 * size + size // 2)
    kept = [await cache.resolve(_strict_object(f"s{i}", 40), "p") for i in range(6)]
    assert all(k.schema_bytes == size for k in kept)
    assert (len(cache._entries), cache.bytes) == (3, 3 * size)
    assert cache.misses == 6
    await cache.resolve(_strict_object("s5", 40), "p")  # the newest: still there
    await cache.resolve(_strict_object("s0", 40), "p")  # the oldest: evicted, a miss
    assert (cache.hits, cache.misses) == (1, 7)
    assert cache.bytes <= cache.max_bytes


def test_lint_cache_counts_the_keys_it_holds_alone() -> None:
    """A verdict without a compiled schema (a lint, a rejection) keeps only its key, the
    schema's canonical JSON: that counts against the byte bound too, or 1,024 large
    rejected schemas would stay held."""
    schemas = [_strict_object(f"r{i}", 40) for i in range(6)]
    size = len(validator.canonical_json(schemas[0]))
    assert all(len(validator.canonical_json(s)) == size for s in schemas)
    cache = LintCache(maxsize=1024, max_bytes=3 * size + size // 2)
    for schema in schemas:
        cache.lint(schema, "p")
    assert (len(cache._entries), cache.bytes, cache.misses) == (3, 3 * size, 6)

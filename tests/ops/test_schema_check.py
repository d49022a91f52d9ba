"""``POST /v1/schemas/check`` through a real ``syntic serve``: the issues, the counts, the
strictify projection, the 400s, the auth, and the shared cache."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.ops.helpers import scrape
from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import ScriptedUpstream

STRICT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["order_number", "note"],
    "additionalProperties": False,
}


def _without(key: str, value: Any = None) -> dict[str, Any]:
    schema = copy.deepcopy(STRICT)
    if value is None:
        del schema[key]
    else:
        schema[key] = value
    return schema


OPEN = _without("additionalProperties")
OPTIONAL = _without("required", ["order_number"])
UNSUPPORTED = {**copy.deepcopy(STRICT), "allOf": [{"type": "object"}]}


def openai_tool(schema: Any, strict: bool = True, name: str = "create_refund") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "strict": strict, "parameters": schema}}


@pytest.fixture(scope="module")
def gw(gateway: GatewayProcess) -> GatewayProcess:
    return gateway  # the session gateway (tests/support/fixtures.py): no model is called


def check(gw: GatewayProcess, body: Any, key: str | None = "default") -> httpx.Response:
    headers = {} if key is None else {"authorization": f"Bearer {gw.api_key}"}
    return httpx.post(gw.base_url + "/v1/schemas/check", json=body, headers=headers, timeout=20)


# (request body, expected [(param of schema, ok, [(code, issue param)], strictify outcome)])
Expected = list[tuple[str, bool, list[tuple[str, str]], str | None]]
CASES: list[tuple[str, dict[str, Any], Expected]] = [
    (
        "strict-ready",
        {"tools": [openai_tool(STRICT)]},
        [("tools[0].function.parameters", True, [], None)],
    ),
    (
        "open object",
        {"tools": [openai_tool(OPEN)]},
        [
            (
                "tools[0].function.parameters",
                False,
                [("schema_not_strict", "tools[0].function.parameters")],
                "projected",
            )
        ],
    ),
    (
        "optional property",
        {"tools": [openai_tool(OPTIONAL, strict=False)]},
        [
            (
                "tools[0].function.parameters",
                False,
                [("schema_not_strict", "tools[0].function.parameters.required")],
                "projected",
            )
        ],
    ),
    (
        "unsupported keyword",
        {"tools": [openai_tool(UNSUPPORTED)]},
        [
            (
                "tools[0].function.parameters",
                False,
                [("invalid_tool_schema", "tools[0].function.parameters.allOf")],
                "refused",
            )
        ],
    ),
    (
        "anthropic tool",
        {"tools": [{"name": "t", "input_schema": OPEN}]},
        [
            (
                "tools[0].input_schema",
                False,
                [("schema_not_strict", "tools[0].input_schema")],
                "projected",
            )
        ],
    ),
    (
        "anthropic tool, optional property (Messages rules)",
        {"tools": [{"name": "t", "strict": True, "input_schema": OPTIONAL}]},
        [("tools[0].input_schema", True, [], None)],
    ),
    (
        "mixed, second bad",
        {"tools": [openai_tool(STRICT), openai_tool(OPEN, name="b")]},
        [
            ("tools[0].function.parameters", True, [], None),
            (
                "tools[1].function.parameters",
                False,
                [("schema_not_strict", "tools[1].function.parameters")],
                "projected",
            ),
        ],
    ),
    (
        "response_format",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "out", "strict": True, "schema": OPEN},
            }
        },
        [
            (
                "response_format.json_schema.schema",
                False,
                [("schema_not_strict", "response_format.json_schema.schema")],
                "projected",
            )
        ],
    ),
    (
        "output_config",
        {"output_config": {"format": {"type": "json_schema", "schema": STRICT}}},
        [("output_config.format.schema", True, [], None)],
    ),
    (
        "tools and response_format",
        {
            "tools": [openai_tool(STRICT)],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "o", "schema": UNSUPPORTED},
            },
        },
        [
            ("tools[0].function.parameters", True, [], None),
            (
                "response_format.json_schema.schema",
                False,
                [("invalid_tool_schema", "response_format.json_schema.schema.allOf")],
                "refused",
            ),
        ],
    ),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check(
    gw: GatewayProcess,
    body: dict[str, Any],
    expected: Expected,
) -> None:
    res = check(gw, body)
    assert res.status_code == 200, res.text
    out = res.json()
    got = [
        (
            s["param"],
            s["ok"],
            [(i["code"], i["param"]) for i in s["issues"]],
            None
            if s["strictify"] is None
            else ("projected" if s["strictify"]["ok"] else "refused"),
        )
        for s in out["schemas"]
    ]
    assert got == expected
    assert out["ok"] is all(e[1] for e in expected)
    assert out["issues"] == [i for s in out["schemas"] for i in s["issues"]]
    for s in out["schemas"]:
        assert s["counts"]["properties"]["value"] >= 1
        assert all(c["limit"] >= c["value"] or not s["ok"] for c in s["counts"].values())
        projection = s["strictify"]
        if projection is not None and projection["ok"]:
            # the projection is itself strict-ready: checking it finds nothing
            again = check(gw, {"tools": [openai_tool(projection["schema"])]}).json()
            assert again["ok"] is True, again
        if projection is not None and not projection["ok"]:
            assert projection["schema"] is None
            assert projection["refusals"]


def test_tool_strict_flag_and_name_are_echoed(gw: GatewayProcess) -> None:
    out = check(gw, {"tools": [openai_tool(STRICT, strict=False, name="x")]}).json()
    (entry,) = out["schemas"]
    assert (entry["name"], entry["strict"]) == ("x", False)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "tools"),
        ({"tools": {}}, "tools"),
        ({"tools": [1]}, "tools[0]"),
        (
            {"tools": [{"type": "function", "function": {"name": "x"}}]},
            "tools[0].function.parameters",
        ),
        ({"tools": [{"name": "x"}]}, "tools[0]"),
        ({"tools": [openai_tool(STRICT)] * 129}, "tools"),
        ({"response_format": {"type": "text"}}, "response_format.type"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {}}},
            "response_format.json_schema.schema",
        ),
        ({"output_config": {"format": "x"}}, "output_config.format"),
        ([1, 2], "body"),
    ],
)
def test_malformed_requests_are_400_with_param(gw: GatewayProcess, body: Any, param: str) -> None:
    res = check(gw, body)
    assert res.status_code == 400, res.text
    err = res.json()["error"]
    assert (err["type"], err["param"]) == ("invalid_request_error", param)


def test_not_json_is_400(gw: GatewayProcess) -> None:
    res = httpx.post(
        gw.base_url + "/v1/schemas/check",
        content=b"{nope",
        headers={"authorization": f"Bearer {gw.api_key}"},
        timeout=20,
    )
    assert res.status_code == 400
    assert res.json()["error"]["code"] == "invalid_json"


def test_needs_a_key(gw: GatewayProcess) -> None:
    res = check(gw, {"tools": [openai_tool(STRICT)]}, key=None)
    assert res.status_code == 401
    assert res.json()["error"]["type"] == "invalid_request_error"  # OpenAI's for a 401


def test_no_model_call_and_the_shared_cache_warms(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    schema = copy.deepcopy(STRICT)
    schema["properties"]["unique_to_this_test"] = {"type": "integer"}
    schema["required"] = [*schema["required"], "unique_to_this_test"]
    before = scrape(gw.base_url)
    assert check(gw, {"tools": [openai_tool(schema)]}).json()["ok"] is True
    middle = scrape(gw.base_url)
    assert check(gw, {"tools": [openai_tool(schema)]}).json()["ok"] is True
    after = scrape(gw.base_url)
    compiled = ("syntic_schema_cache_misses_total", ())
    misses, hits = ("syntic_lint_cache_misses_total", ()), ("syntic_lint_cache_hits_total", ())
    assert middle[compiled] - before[compiled] == 1  # compiled once...
    assert middle[misses] - before[misses] == 1
    assert after[hits] - middle[hits] == 1  # ...and found by the second check
    assert after[misses] == middle[misses]
    assert after[compiled] == middle[compiled]
    assert upstream.requests == []  # never a model call


def test_counts_against_the_keys_request_limit(gw: GatewayProcess) -> None:
    limited = gw.create_key("check-limited", "--rpm", "2")
    body = {"tools": [openai_tool(STRICT)]}
    headers = {"authorization": f"Bearer {limited}"}
    statuses = [
        httpx.post(
            gw.base_url + "/v1/schemas/check", json=body, headers=headers, timeout=20
        ).status_code
        for _ in range(3)
    ]
    assert statuses == [200, 200, 429]


def _wide(tag: str, n: int = 60) -> dict[str, Any]:
    props = {f"{tag}_{i:03d}": {"type": ["string", "null"]} for i in range(n)}
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def test_compiled_schemas_are_bounded_by_bytes(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``schema_cache_max_bytes``: many distinct schemas keep at most that much canonical
    JSON compiled (the validator's cache and the lint cache), not 1,024 of them."""
    bound = 16 * 1024
    proc = start_gateway(
        tmp_path_factory.mktemp("cache-bytes"),
        [model_table("m", scripted_upstream_server.base_url)],
        env={"SYNTIC_SCHEMA_CACHE_MAX_BYTES": str(bound)},
        key_name="cache-bytes",
    )
    try:
        headers = {"authorization": f"Bearer {proc.api_key}"}
        for i in range(20):  # ~2.6 KiB each: ~52 KiB in all
            r = httpx.post(
                proc.base_url + "/v1/schemas/check",
                headers=headers,
                timeout=20,
                json={"tools": [openai_tool(_wide(f"t{i:02d}"))]},
            )
            assert r.status_code == 200 and r.json()["schemas"][0]["ok"] is True
        samples = scrape(proc.base_url)
        held = samples[("syntic_schema_cache_bytes", ())]
        assert 0 < held <= bound
        assert samples[("syntic_schema_cache_size", ())] < 20
        assert samples[("syntic_schema_cache_evictions_total", ())] >= 10
    finally:
        proc.stop()

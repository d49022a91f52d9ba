"""The hand-written OpenAPI document matches the routes the app serves, and is well formed."""

from __future__ import annotations

import re
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from starlette.routing import Route

from gateway.app import create_app
from gateway.routes.openapi import openapi_document
from gateway.settings import ModelConfig, Settings
from tests.ops.helpers import conforms

METHODS = {"get", "post", "put", "patch", "delete"}


def served() -> set[tuple[str, str]]:
    model = ModelConfig(name="m", provider="openai", upstream_model="m")
    app = create_app(Settings(models=(model,)))
    out: set[tuple[str, str]] = set()
    for route in app.routes:
        assert isinstance(route, Route)
        out.update((route.path, m.lower()) for m in (route.methods or ()) if m != "HEAD")
    return out


def documented() -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method in METHODS
    }


def test_every_served_route_is_documented_and_vice_versa() -> None:
    assert served() == documented()


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_every_ref_resolves() -> None:
    doc = openapi_document()
    refs = _refs(doc)
    assert refs
    for ref in refs:
        assert ref.startswith("#/"), ref
        node: Any = doc
        for part in ref[2:].split("/"):
            assert part in node, f"{ref} does not resolve"
            node = node[part]


@pytest.mark.parametrize("name", sorted(openapi_document()["components"]["schemas"]))
def test_component_schemas_are_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(openapi_document()["components"]["schemas"][name])


def test_operations_are_complete() -> None:
    doc = openapi_document()
    assert doc["openapi"].startswith("3.1")
    ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            ids.append(op["operationId"])
            assert re.fullmatch(r"[1-5][0-9][0-9]", min(op["responses"]))
            authed = path.startswith(("/v1/", "/admin/"))
            assert bool(op["security"]) is authed, path
            if authed:
                assert "401" in op["responses"], path
            if method == "post":
                assert op["requestBody"]["required"] is True
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("instance", "component", "valid"),
    [
        (
            {"error": {"type": "t", "code": "c", "message": "m", "param": None}, "request_id": "r"},
            "ErrorEnvelope",
            True,
        ),
        (
            {"error": {"type": "t", "code": "c", "message": "m"}, "request_id": "r"},
            "ErrorEnvelope",
            False,
        ),
        ({"ok": True, "schemas": [], "issues": []}, "SchemaCheckResult", True),
        ({"ok": True, "schemas": [{"param": "p"}], "issues": []}, "SchemaCheckResult", False),
    ],
)
def test_conformance_helper_can_fail(instance: Any, component: str, valid: bool) -> None:
    if valid:
        conforms(instance, component)
    else:
        with pytest.raises(jsonschema.ValidationError):
            conforms(instance, component)

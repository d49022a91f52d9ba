"""Shared by the ops tests: scrape ``/metrics`` and parse it with an independent parser."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from gateway.routes.openapi import openapi_document

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(base_url: str) -> Samples:
    """Every sample on ``base_url/metrics``, keyed by (name, sorted label pairs)."""
    res = httpx.get(base_url + "/metrics", timeout=5)
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(res.text)
        for s in family.samples
    }


def conforms(instance: Any, component: str) -> None:
    """Raise if ``instance`` does not match ``#/components/schemas/<component>`` of the
    gateway's OpenAPI document."""
    schema = {
        "$ref": f"#/components/schemas/{component}",
        "components": openapi_document()["components"],
    }
    jsonschema.Draft202012Validator(schema).validate(instance)

"""Lint rule tables and value predicates, kept apart from the walk that applies them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from validator._paths import parse_local_ref

TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Anthropic's strict mode also takes "uri" (pydantic's HttpUrl/AnyUrl); OpenAI's refuses it.
DIALECT_FORMATS = {"openai": FORMATS, "anthropic": FORMATS | {"uri"}}
ENGINE_FORMATS = FORMATS | {"uri"}  # what compile checks, strict or not
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# ``$schema`` values accepted at the root: identifiers, never fetched. Draft-07 (which MCP
# servers send) differs from 2020-12 only in keywords the subset refuses or ignores.
SCHEMA_URIS = frozenset(
    {
        DRAFT_2020_12,
        DRAFT_2020_12 + "#",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft-07/schema",
    }
)
ANNOTATIONS = frozenset({"description", "title"})
# Annotations that never constrain a value: accepted anywhere (beside ``$ref`` too),
# ignored by validation, and dropped from a provider's copy where its strict mode refuses
# them. Value shapes checked: ``examples`` an array, ``$comment`` a string, the flags
# booleans; ``default`` and ``discriminator`` (OpenAPI's, emitted by pydantic) any value.
FREE_ANNOTATIONS = frozenset(
    {"default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "discriminator"}
)
_FLAGS = ("deprecated", "readOnly", "writeOnly")

_NON_NEGATIVE_INT = ("minLength", "maxLength", "minItems", "maxItems")
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# Recognised JSON Schema keywords outside the subset get a more specific message.
_KNOWN_UNSUPPORTED = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "prefixItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "$id",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$vocabulary",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "additionalItems",
    }
)
_CONSTRAINING = ("type", "enum", "const", "anyOf", "allOf", "oneOf", "$ref")
_DEFS_KEYS = ("$defs", "definitions")


def _definition_ref(ref: str) -> tuple[str, str] | None:
    """``(defs keyword, name)`` of a supported local ``$ref``: ``("$defs", "")`` for ``#``;
    ``#/definitions/<name>`` (draft-07) too. None otherwise."""
    name = parse_local_ref(ref)
    if name is not None:
        return "$defs", name
    if ref.startswith("#/definitions/"):
        name = parse_local_ref("#/$defs/" + ref[len("#/definitions/") :])
        if name:
            return "definitions", name
    return None


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _beside_ref(key: str) -> bool:
    return (
        key in ANNOTATIONS
        or key in FREE_ANNOTATIONS
        or key in ("$ref", "$defs", "definitions", "$schema")
    )


def _has_type(node: Mapping[Any, Any], name: str) -> bool:
    t = node.get("type")
    return t == name or (isinstance(t, list) and name in t)


def _is_object_schema(node: Mapping[Any, Any]) -> bool:
    t = node.get("type")
    if t == "object" or (isinstance(t, list) and "object" in t):
        return True
    return t is None and "properties" in node


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _is_non_negative_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, float) and value.is_integer() and value >= 0


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__

"""Canonical JSON and SHA-256 cache keys, apart from ``_compile`` so its peers share them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

from validator._issues import Issue, SchemaError

__all__ = ["canonical_json", "canonical_key"]


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def canonical_json(schema: Mapping[str, Any] | bool) -> bytes:
    """The canonical JSON of ``schema`` (sorted keys, no spaces) that ``canonical_key``
    hashes: equal for equal schemas in any key order, so itself a cache key.

    >>> canonical_json({"type": "string", "maxLength": 3})
    b'{"maxLength":3,"type":"string"}'
    """
    try:
        return orjson.dumps(schema, default=_default, option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        # orjson refuses integers beyond 64 bits (and nesting past 254); the stdlib does not.
        try:
            return json.dumps(
                schema,
                default=_default,
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            ).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            issue = Issue("invalid_tool_schema", "", f"schema is not JSON: {str(exc)[:120]}")
            raise SchemaError([issue]) from exc


def _canonical(schema: Any) -> tuple[str, bytes]:
    text = canonical_json(schema)
    return hashlib.sha256(text).hexdigest(), text


def _load(text: bytes) -> Any:
    # The stdlib keeps big integers exact (orjson would turn them into floats).
    return json.loads(text)


def canonical_key(schema: Mapping[str, Any] | bool) -> str:
    """Cache key of ``schema``: SHA-256 hex of its canonical JSON (sorted keys).

    >>> canonical_key({"type": "string", "maxLength": 3}) == canonical_key(
    ...     {"maxLength": 3, "type": "string"})
    True
    """
    return _canonical(schema)[0]

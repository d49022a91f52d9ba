"""The real-schema corpus of the validator's benchmark and error-code test: every object
schema the validator's tests define (module constants and ``parametrize`` arguments, as
``test_anthropic_dialect`` collects them) and the pydantic models' schemas, with
instances built from each schema.

For each schema: a valid instance (the smallest value the schema describes, each
property filled in) and invalid ones made from it (a wrong type at a leaf, a required
property dropped, an unknown property added, a string or number bound crossed). The
caller labels them (``build_corpus``): the benchmark by ``jsonschema`` (Draft 2020-12,
formats asserted), keeping an instance only when every library agrees, so each is timed
on the same work; the disagreements are counted, not hidden.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_FORMAT_SAMPLES = {
    "date-time": "2026-11-30T10:30:00Z",
    "date": "2026-11-30",
    "time": "10:30:00Z",
    "duration": "P1D",
    "email": "ann@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
    "uri": "https://example.com/a",
}
_MAX_DEPTH = 12


@dataclass(frozen=True, slots=True)
class Case:
    """One schema with its labelled instances."""

    schema: dict[str, Any]
    valid: tuple[Any, ...]
    invalid: tuple[Any, ...]


def corpus_schemas() -> list[Any]:
    """The object schemas ``tests/validator`` defines, and the pydantic models' schemas."""
    from tests.validator.test_anthropic_dialect import FIXTURES, MODELS

    return [*FIXTURES, *(m.model_json_schema() for m in MODELS)]


def _resolve(root: dict[str, Any], ref: str) -> Any:
    target: Any = root
    for token in ref.lstrip("#").split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        target = target[token] if isinstance(target, dict) else target[int(token)]
    return target


def sample(schema: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """A value ``schema`` should accept (not guaranteed: patterns are not solved)."""
    if depth > _MAX_DEPTH or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return sample(_resolve(root, schema["$ref"]), root, depth + 1)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return sample(schema[key][0], root, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = sample(part, root, depth + 1)
            if isinstance(value, dict):
                merged.update(value)
            elif not merged:
                return value
        return merged
    types = schema.get("type", "object" if "properties" in schema else "null")
    kind = types[0] if isinstance(types, list) and types else types
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(sub, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        count = max(schema.get("minItems", 1), 1) if "items" in schema else 0
        return [sample(schema["items"], root, depth + 1) for _ in range(int(count))]
    if kind == "string":
        if "format" in schema:
            return _FORMAT_SAMPLES.get(schema["format"], "x")
        return "x" * max(int(schema.get("minLength", 1)), 1)
    if kind in ("integer", "number"):
        low: Any = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = int(low) + (1 if "exclusiveMinimum" in schema else 0)
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            value = -(-value // step) * step
        return value
    if kind == "boolean":
        return True
    return None


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, member in value.items():
            yield from _leaf_paths(member, (*path, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            yield from _leaf_paths(member, (*path, index))
    else:
        yield path


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(value)
    target = out
    for token in path[:-1]:
        target = target[token]
    target[path[-1]] = new
    return out


def mutants(schema: dict[str, Any], valid: Any) -> Iterator[Any]:
    """Values near ``valid`` that likely break ``schema``."""
    yield [] if isinstance(valid, dict) else {}
    if isinstance(valid, dict):
        for name in schema.get("required", [])[:3]:
            if name in valid:
                yield {k: v for k, v in valid.items() if k != name}
        yield {**valid, "unexpected_bench_key": 1}
    for path in list(_leaf_paths(valid))[:6]:
        if not path:
            continue
        leaf = _get(valid, path)
        yield _replaced(valid, path, 12345 if isinstance(leaf, str) else "wrong type")
        if isinstance(leaf, str):
            yield _replaced(valid, path, "")
            yield _replaced(valid, path, "y" * 300)
        elif isinstance(leaf, int | float) and not isinstance(leaf, bool):
            yield _replaced(valid, path, -(10**9))
            yield _replaced(valid, path, 0.5)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for token in path:
        value = value[token]
    return value


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def build_corpus(schemas: list[Any], label: Any, agree: Any) -> tuple[list[Case], dict[str, int]]:
    """Cases for ``schemas``: ``label(schema)`` gives the reference's ``is_valid``, or
    None to skip the schema; ``agree(schema, instance, verdict)`` whether every library
    under test gives the same verdict (a disagreement is counted and dropped)."""
    cases: list[Case] = []
    counts = {"schemas_seen": len(schemas), "skipped": 0, "disagreements": 0}
    for schema in schemas:
        reference = label(schema)
        if reference is None:
            counts["skipped"] += 1
            continue
        first = sample(schema, schema)
        valid: dict[str, Any] = {}
        invalid: dict[str, Any] = {}
        for instance in [first, *mutants(schema, first)]:
            try:
                verdict = bool(reference(instance))
            except Exception:  # the reference could not decide (e.g. a recursion limit)
                continue
            if not agree(schema, instance, verdict):
                counts["disagreements"] += 1
                continue
            (valid if verdict else invalid).setdefault(_key(instance), instance)
        if valid or invalid:
            cases.append(Case(schema, tuple(valid.values()), tuple(invalid.values())[:6]))
    counts["schemas"] = len(cases)
    counts["valid_instances"] = sum(len(c.valid) for c in cases)
    counts["invalid_instances"] = sum(len(c.invalid) for c in cases)
    return cases, counts

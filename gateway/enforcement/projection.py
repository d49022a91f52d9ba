"""The strict projection served by the gateway (``strictify`` per model or per request).

A tool the client did not mark strict (or a Messages tool with optional properties bound
for an upstream whose strict mode needs every property required) is made strict through
``validator.strictify``: the upstream gets the projection, the answer is validated (and
corrected once) against it, then ``validator.canonicalize`` removes the nulls the
projection made the model send, and the result is validated against the client's own
schema before it is returned. A schema that cannot be projected, or that the validator
cannot check as the client wrote it, travels untouched and non-strict; its name is
reported in ``x-syntic-strict-refused``.
"""

from __future__ import annotations

from typing import Any

import orjson

import validator
from gateway.canonical import ToolCall
from gateway.canonical.record import record

__all__ = ["Projection", "canonical_call", "project", "projected_violations"]


@record
class Projection:
    """A projected tool: the schema the upstream gets and validation runs against first
    (``schema``), and the client's schema (``original``, compiled as ``checked``)."""

    schema: dict[str, Any]
    original: dict[str, Any]
    checked: validator.CompiledSchema


def project(original: dict[str, Any], path: str) -> Projection | None:
    """The projection of a client's schema, or ``None`` when it has none we can guarantee:
    ``strictify`` refuses it, or the validator cannot compile the schema as sent (the
    answer must be validated against it)."""
    result = validator.strictify(original, path=path)
    if result.schema is None:
        return None
    try:
        checked = validator.compile(original)
    except validator.SchemaError:
        return None
    return Projection(result.schema, original, checked)


def projected_violations(parsed: Any, projection: Projection) -> list[validator.ValidationError]:
    """Errors of an answer that matched the projection, once canonicalized, against the
    client's schema; empty when it holds."""
    canonical = validator.canonicalize(parsed, projection.original)
    return projection.checked.validate(canonical)


def canonical_call(call: ToolCall, projection: Projection) -> ToolCall:
    """``call`` with the injected nulls removed (its raw text kept when nothing changed)."""
    try:
        parsed = orjson.loads(call.raw_arguments)
    except orjson.JSONDecodeError:
        return call  # validated before this, so never; keep what the model sent
    canonical = validator.canonicalize(parsed, projection.original)
    if canonical is parsed:
        return call
    return ToolCall(
        call.id, call.name, orjson.dumps(canonical).decode(), call.namespace, call.members
    )

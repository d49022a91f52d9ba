"""The schema an Anthropic upstream's strict mode accepts, from the one the client wrote.

Anthropic's constrained decoding (a tool's ``strict``, ``output_config.format``) takes a
subset of JSON Schema and refuses the whole request with a 400 for anything outside it
(``For 'integer' type, properties maximum, minimum are not supported``): no numeric
bounds, no string lengths, ``minItems`` only 0 or 1, string formats from a short list.
The gateway validates every answer against the client's own schema, so the upstream can
be given less: ``for_strict_mode`` keeps the keywords of that subset and moves each other
one into the node's ``description`` (``{minimum: 1, maximum: 10}``), as Anthropic's own
SDKs do, so the model still reads them.

Example::

    for_strict_mode({"type": "integer", "minimum": 1, "description": "Pence"})
    # {"type": "integer", "description": "Pence\\n\\n{minimum: 1}"}
"""

from __future__ import annotations

from typing import Any

__all__ = ["for_strict_mode"]

# Keywords kept as they are on any node (their subschemas are projected too).
_KEPT = frozenset({"type", "enum", "const", "description", "title", "required", "$ref"})
_SUBSCHEMA_LISTS = ("anyOf", "allOf")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6",
     "uuid"}
)  # fmt: skip


def _accepted_value(key: str, value: Any) -> bool:
    """Keywords the subset takes with some values only."""
    if key == "additionalProperties":
        return value is False
    if key == "format":
        return isinstance(value, str) and value in _FORMATS
    if key == "minItems":
        return value in (0, 1) and not isinstance(value, bool)
    return False


def for_strict_mode(schema: Any) -> Any:
    """``schema`` with what Anthropic's strict mode refuses moved into descriptions; the
    input is not changed (a new dict where anything differs)."""
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _KEPT or _accepted_value(key, value):
            kept[key] = value
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            kept[key] = {name: for_strict_mode(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            kept[key] = [for_strict_mode(sub) for sub in value]
        elif key == "oneOf" and isinstance(value, list) and "anyOf" not in schema:
            # Not in the subset; as anyOf it admits more, and the gateway checks the rest.
            kept["anyOf"] = [for_strict_mode(sub) for sub in value]
        elif key == "items" and isinstance(value, dict):
            kept[key] = for_strict_mode(value)
        else:
            moved[key] = value
    if moved:
        note = "{" + ", ".join(f"{key}: {value}" for key, value in moved.items()) + "}"
        description = kept.get("description")
        kept["description"] = f"{description}\n\n{note}" if isinstance(description, str) else note
    return kept

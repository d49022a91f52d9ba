"""The ``validator`` package as a library: lint, compile, validate, strictify, canonicalize.

No gateway needed; run it in the repository's virtualenv::

    python examples/validator_library.py                   # validates a sample call
    python examples/validator_library.py '{"order_number": "58213", "amount_pence": 0}'

The optional argument is a tool call's arguments (JSON text) to validate against the
refund schema. It prints what each step found and exits 1 when the arguments are invalid
(or a step does not give what it should).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import validator

# Strict: every property required, no others allowed.
REFUND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
        "amount_pence": {"type": "integer", "minimum": 1},
    },
    "required": ["order_number", "amount_pence"],
    "additionalProperties": False,
}
# Ordinary: an optional property and extra properties allowed, so not strict as it is.
ORDINARY: dict[str, Any] = {
    "type": "object",
    "properties": {"order_number": {"type": "string"}, "note": {"type": "string"}},
    "required": ["order_number"],
}


def main(argv: list[str]) -> int:
    raw = argv[1] if len(argv) > 1 else '{"order_number": "582131", "amount_pence": 1250}'

    issues = validator.lint(REFUND, path="tools[0].function.parameters")
    print(f"lint refund: {len(issues)} issue(s)")
    for issue in validator.lint(ORDINARY, path="tools[1].function.parameters"):
        print(f"lint ordinary: {issue.code} at {issue.param}: {issue.message}")
    if issues:
        return 1

    compiled = validator.compile(REFUND)  # cached by the schema's canonical form
    errors = compiled.validate_json(raw)
    for error in errors:
        print(f"invalid: {error.message}")
    print(f"arguments {'valid' if not errors else 'invalid'}: {raw}")

    projected = validator.strictify(ORDINARY)  # the strict projection of an ordinary schema
    if projected.schema is None:
        print(f"strictify refused: {[issue.message for issue in projected.refusals]}")
        return 1
    print(f"strictify: {json.dumps(projected.schema, sort_keys=True)}")
    for change in projected.changes:
        print(f"  changed {change}")
    # A model answering the projection fills optional fields with null; canonicalize
    # drops those nulls, so the payload fits the original schema again.
    answer = {"order_number": "582131", "note": None}
    print(f"canonicalize: {json.dumps(validator.canonicalize(answer, ORDINARY))}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

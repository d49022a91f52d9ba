"""What the duplicate-key check adds to ``CompiledSchema.validate_json`` (a script).

    .venv/bin/python tests/bench/validate_json_bench.py

For the spec's ``create_refund`` arguments and the ~50-property nested instance of
``validator_bench``: ``validate_json`` per call, against orjson parse + ``validate`` alone
(what it cost before the check), for text without colons in strings (the counting fast
path) and with them (the count is inconclusive, the text is parsed again).
"""

from __future__ import annotations

import orjson

import validator
from tests.bench.validator_bench import (
    CREATE_REFUND,
    REFUND_OK,
    fifty_property_instance,
    fifty_property_schema,
    per_call,
)


def _row(name: str, schema: dict[str, object], instance: object) -> None:
    compiled = validator.compile(schema)
    raw = orjson.dumps(instance)
    assert compiled.validate_json(raw) == []
    base = per_call(lambda: compiled.validate(orjson.loads(raw)))
    checked = per_call(lambda: compiled.validate_json(raw))
    print(
        f"{name:<44} parse+validate {base * 1e6:7.2f} us   validate_json {checked * 1e6:7.2f} us"
        f"   (+{(checked - base) * 1e6:.2f} us, {100 * (checked - base) / base:+.0f}%)"
    )


def main() -> None:
    fifty = fifty_property_instance()
    _row("create_refund", CREATE_REFUND, REFUND_OK)
    _row("create_refund, a colon in a string", CREATE_REFUND, {**REFUND_OK, "note": "at 12:30"})
    _row("50-property nested", fifty_property_schema(), fifty)


if __name__ == "__main__":
    main()

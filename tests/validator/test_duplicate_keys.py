"""``validate_json`` refuses an object with a duplicate key, wherever it is."""

from __future__ import annotations

import pytest

import validator

SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": ["string", "integer"]},
        "b": {"type": "array", "items": {"type": "object"}},
        "t": {"type": "string"},
    },
}


@pytest.mark.parametrize(
    ("raw", "pointer", "message"),
    [
        ('{"a":"x","a":1}', "", '/ has duplicate key "a"'),
        ('{"a": "x", "a" : "x"}', "", '/ has duplicate key "a"'),
        ('{"t":"12:30","b":[{"c":"a:b","c":"q"}]}', "/b/0", '/b/0 has duplicate key "c"'),
        ('{"t":"\\u003a","t":"x"}', "", '/ has duplicate key "t"'),
        ('{"a\\u0062":1,"ab":2}', "", '/ has duplicate key "ab"'),
    ],
    ids=["top level", "spaced", "nested with colons in strings", "escaped colon", "escaped key"],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_duplicate_key_is_a_json_error(
    raw: str, pointer: str, message: str, as_bytes: bool
) -> None:
    compiled = validator.compile(SCHEMA)
    errors = compiled.validate_json(raw.encode() if as_bytes else raw)
    assert [(e.pointer, e.keyword, e.message) for e in errors] == [(pointer, "json", message)]


@pytest.mark.parametrize(
    "raw",
    [
        '{"a":1}',
        '{"t":"12:30 at https://x.test/a:b","a":"k:v"}',
        '{"t":"\\u003a","a":"\\u003A"}',
        '{"b":[{"c":1},{"c":1}],"a":1}',
        "{}",
    ],
)
def test_distinct_keys_pass(raw: str) -> None:
    assert validator.compile(SCHEMA).validate_json(raw) == []

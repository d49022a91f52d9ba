"""The field policy table itself: the docs show it as it is, every field of the SDKs' own
request types is in it (a new SDK field fails here until the table rules on it), and its
outcomes are coherent (nothing is dropped on the client's own wire)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from anthropic.types.message_create_params import MessageCreateParamsBase
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from openai.types.responses.response_create_params import ResponseCreateParamsBase

from gateway.dialects.policy import HEADER_FIELDS, RULES, TARGETS, render_markdown, rule
from gateway.dialects.vendor_headers import VENDOR_HEADERS

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- field-policy:start -->", "<!-- field-policy:end -->"

# Each dialect's request type in the SDK its clients use; ``stream`` is in the
# streaming / non-streaming subclasses only.
SDK_TYPES: list[tuple[str, type]] = [
    ("chat", CompletionCreateParamsBase),
    ("responses", ResponseCreateParamsBase),
    ("messages", MessageCreateParamsBase),
]


def _fields(cls: type) -> set[str]:
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # a forward reference the SDK leaves unresolved
        hints = dict(cls.__annotations__)
    return set(hints)


def test_the_docs_show_the_table_as_it_is() -> None:
    text = (ROOT / "docs" / "compatibility.md").read_text()
    assert START in text and END in text
    shown = text[text.index(START) + len(START) : text.index(END)].strip("\n")
    assert shown == render_markdown().strip("\n"), (
        "docs/compatibility.md's field-policy table differs from gateway/dialects/policy.py:"
        " paste render_markdown() between the markers"
    )


@pytest.mark.parametrize(("dialect", "cls"), SDK_TYPES, ids=[d for d, _ in SDK_TYPES])
def test_every_sdk_field_is_in_the_table(dialect: str, cls: type) -> None:
    fields = _fields(cls)
    assert len(fields) > 10  # the type was read, not an empty shell
    missing = sorted(f for f in fields | {"stream"} if rule(dialect, f) is None)  # type: ignore[arg-type]
    assert missing == [], f"{cls.__name__} fields the field policy does not rule on"


def test_nothing_is_dropped_or_translated_on_the_clients_own_wire() -> None:
    for r in RULES:
        assert r.outcome(r.dialect) in ("honoured", "forwarded", "refused"), r.field


def test_a_translated_field_names_what_it_becomes() -> None:
    for r in RULES:
        for target in TARGETS:
            if r.outcome(target) == "translated" and target != "local":
                assert any(name == target for name, _ in r.to), (r.dialect, r.field, target)


def test_every_rule_is_declared_once() -> None:
    keys = [(r.dialect, r.field) for r in RULES]
    assert len(keys) == len(set(keys))


def test_header_rules_are_the_vendor_headers() -> None:
    assert set(VENDOR_HEADERS) == HEADER_FIELDS
    for r in RULES:
        if r.field in HEADER_FIELDS:
            assert r.outcome(r.dialect) == "forwarded", r.field


def test_dropped_names_are_header_safe() -> None:
    for r in RULES:
        assert all(c.isalnum() or c in "_-.[]" for c in r.notice), r.notice

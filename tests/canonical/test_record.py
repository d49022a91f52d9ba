"""``gateway.canonical.record``: what the canonical types keep from ``frozen=True``."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from gateway.canonical import ChatRequest, Message, TextPart, ToolSpec, Usage
from gateway.canonical.record import record


@record
class _Point:
    x: int
    tags: tuple[str, ...] = dataclasses.field(default=())


def test_fields_equality_hash_and_replace_as_a_frozen_dataclass() -> None:
    a, b = _Point(1, ("t",)), _Point(1, ("t",))
    assert a == b and hash(a) == hash(b)
    assert {a, b} == {a}
    assert a != _Point(2)
    assert dataclasses.replace(a, x=5) == _Point(5, ("t",))
    assert [f.name for f in dataclasses.fields(_Point)] == ["x", "tags"]
    assert getattr(_Point, "__slots__", None) == ("x", "tags")
    assert repr(a) == "_Point(x=1, tags=('t',))"
    with pytest.raises(AttributeError):
        a.other = 1  # type: ignore[attr-defined]  # slotted: no stray attributes


def test_canonical_types_are_records() -> None:
    usage = Usage(3, 4) + Usage(1, 1)
    assert usage == Usage(4, 5) and usage.total_tokens == 9
    request = ChatRequest(
        model="m",
        messages=(Message(role="user", content=(TextPart("hi"),)),),
        tools=(ToolSpec(name="t", parameters={}),),
    )
    assert request.messages[0].text == "hi"
    assert hash(Message(role="user")) == hash(Message(role="user"))
    with pytest.raises(TypeError):
        hash(request)  # a dict field (metadata) is unhashable, as with frozen=True


def test_mypy_refuses_assignment_to_a_record_field(tmp_path: Path) -> None:
    """The immutability guarantee lives in the type checker: an assignment to a field of
    a ``@record`` class (a canonical type included) is a ``mypy --strict`` error."""
    source = tmp_path / "mutate.py"
    source.write_text(
        textwrap.dedent("""
        from gateway.canonical import Usage
        from gateway.canonical.record import record

        @record
        class P:
            x: int

        p = P(1)
        p.x = 2
        u = Usage(1, 2)
        u.prompt_tokens = 5
        ok = P(x=3)
    """)
    )
    stdout, _, status = mypy_api.run(
        [
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            str(source),
        ]
    )
    assert status == 1, stdout
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, stdout
    assert all("read-only" in line for line in errors), stdout
    assert {int(line.split(":")[1]) for line in errors} == {10, 12}, stdout

"""The field checks every dialect decoder shares: one wording per kind of shape error.

Each check returns the value (``None`` for an absent optional one) or raises 400
``invalid_request`` naming the client's own field in ``param``. Where a field is, is given
as an ``At``: a plain param (``"tool_choice"``) or a parent ``At`` and one more step
(``("messages", 2)``, ``(("messages", 2), "content")``), plus an optional ``key``. A
decoder builds these pairs per element, which costs a tuple; the param's text is only
spelled out on the way to an error (or into a field-policy note), as pydantic-core's
``loc`` is, so a valid body pays no string formatting per field.

Example::

    at = ("tools", 3)
    string(tool.get("name"), at, "name")  # "tools[3].name must be a string." when not
    spell((at, "function"), "name")       # 'tools[3].function.name'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from gateway.bounds import model_problem, valid_tool_name
from gateway.errors import InvalidRequest

__all__ = [
    "At",
    "array",
    "bool_field",
    "int_field",
    "invalid",
    "model_field",
    "non_empty_string",
    "number",
    "number_between",
    "obj",
    "optional_string",
    "spell",
    "string",
    "tool_name_field",
]

# A field's place: a param as the client spells it, or (parent, key or index).
At: TypeAlias = "str | tuple[At, str | int]"
Key = str | int | None


def spell(at: At, key: Key = None) -> str:
    """The param ``at`` (then ``key``) names: ``messages[2].content``."""
    if key is not None:
        at = (at, key)
    if isinstance(at, str):
        return at
    parent, step = at
    head = spell(parent)
    if isinstance(step, int):
        return f"{head}[{step}]"
    return f"{head}.{step}" if head else step


def invalid(
    message: str, at: At | None, key: Key = None, code: str | None = None
) -> InvalidRequest:
    """The 400 for a shape error at ``at`` (``None``: the body as a whole)."""
    return InvalidRequest(message, param=None if at is None else spell(at, key), code=code)


def _wrong(at: At, key: Key, what: str) -> InvalidRequest:
    param = spell(at, key)
    return InvalidRequest(f"{param} must be {what}.", param=param)


def string(value: Any, at: At, key: Key = None) -> str:
    if type(value) is not str and not isinstance(value, str):
        raise _wrong(at, key, "a string")
    return value


def optional_string(value: Any, at: At, key: Key = None) -> str | None:
    if value is None or type(value) is str:
        return value
    return string(value, at, key)


def non_empty_string(value: Any, at: At, key: Key = None) -> str:
    if not value or not isinstance(value, str):
        raise _wrong(at, key, "a non-empty string")
    return value


def bool_field(value: Any, at: At, key: Key = None) -> bool | None:
    if value is None or value is True or value is False:
        return value
    raise _wrong(at, key, "a boolean")


def int_field(value: Any, at: At, minimum: int, key: Key = None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _wrong(at, key, f"an integer >= {minimum}")
    return value


def number(value: Any, at: At, key: Key = None) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _wrong(at, key, "a number")
    return float(value)


def number_between(value: Any, at: At, low: float, high: float) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise _wrong(at, None, f"a number between {low:g} and {high:g}")
    return float(value)


def obj(value: Any, at: At, key: Key = None) -> Mapping[str, Any]:
    # orjson gives dicts: the ABC instance check only for anything else.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _wrong(at, key, "an object")
    return value


def array(value: Any, at: At, key: Key = None) -> list[Any]:
    if type(value) is not list and not isinstance(value, list):
        raise _wrong(at, key, "an array")
    return value


def model_field(model: str) -> str:
    """``model`` within ``MODEL_MAX_BYTES``, no control characters: it goes into the
    ledger, the log and a 404."""
    problem = model_problem(model)
    if problem is not None:
        raise InvalidRequest(problem, param="model")
    return model


def tool_name_field(name: str, at: At, key: Key = None) -> str:
    """A tool's name to the vendors' rule ``^[a-zA-Z0-9_-]{1,64}$`` (names are echoed in
    headers and stored in the ledger)."""
    if not valid_tool_name(name):
        param = spell(at, key)
        raise InvalidRequest(
            f"{param} must match ^[a-zA-Z0-9_-]{{1,64}}$ (letters, digits, '_' and '-').",
            param=param,
        )
    return name

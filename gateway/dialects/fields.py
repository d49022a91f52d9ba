"""Field checks the dialect decoders share: each returns the value, ``None`` when absent,
or raises 400 ``invalid_request`` naming the client's own field in ``param``."""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest


def bool_field(value: Any, param: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidRequest(f"{param} must be a boolean.", param=param)
    return value


def int_field(value: Any, param: str, minimum: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidRequest(f"{param} must be an integer >= {minimum}.", param=param)
    return value

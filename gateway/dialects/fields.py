"""Field checks the dialect decoders share: each returns the value, ``None`` when absent,
or raises 400 ``invalid_request`` naming the client's own field in ``param``."""

from __future__ import annotations

from typing import Any

from gateway.bounds import model_problem, valid_tool_name
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


def model_field(model: str) -> str:
    """``model`` within ``MODEL_MAX_BYTES``, no control characters: it goes into the
    ledger, the log and a 404."""
    problem = model_problem(model)
    if problem is not None:
        raise InvalidRequest(problem, param="model")
    return model


def tool_name_field(name: str, param: str) -> str:
    """A tool's name to the vendors' rule ``^[a-zA-Z0-9_-]{1,64}$`` (names are echoed in
    headers and stored in the ledger)."""
    if not valid_tool_name(name):
        raise InvalidRequest(
            f"{param} must match ^[a-zA-Z0-9_-]{{1,64}}$ (letters, digits, '_' and '-').",
            param=param,
        )
    return name

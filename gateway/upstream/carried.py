"""What a cross-wire codec adds from the field policy's verdict (``Screen.carried``): a
field forwarded under its own name or translated to the target's, as ``(dotted path,
value)``, set where the codec has not set it itself.

Example::

    carry_over(body, request, "messages")  # e.g. body["output_config"]["effort"] = "high"
"""

from __future__ import annotations

from typing import Any

from gateway.canonical import ChatRequest, Target

__all__ = ["carry_over"]


def carry_over(body: dict[str, Any], request: ChatRequest, target: Target) -> None:
    origin = request.origin
    if origin is None or not origin.screens:
        return
    for path, value in origin.screen(target).carried:
        *parents, leaf = path.split(".")
        node = body
        for name in parents:
            child = node.get(name)
            if not isinstance(child, dict):
                child = node[name] = {}
            node = child
        node.setdefault(leaf, value)

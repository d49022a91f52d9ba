"""Whose strict rules a schema follows."""

from __future__ import annotations

from typing import Literal

__all__ = ["Dialect"]

Dialect = Literal["openai", "anthropic"]
"""``openai`` (chat completions): every property required, optional means nullable, the root
an object, the formats OpenAI lists. ``anthropic`` (Messages), as anthropic-python's
``transform_schema`` applies Anthropic's strict mode: optional properties may be left out of
``required``, the root may be a ``$ref`` to an object definition, ``allOf`` and draft-07
``definitions`` are taken, ``uri`` is a format, and there are no numeric bounds, string
lengths, ``pattern``, ``maxItems``, ``minItems`` past 1, ``oneOf`` or non-primitive
``enum``/``const`` (``anthropic_copy`` moves them into descriptions)."""

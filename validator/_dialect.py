"""Whose strict rules a schema follows."""

from __future__ import annotations

from typing import Literal

__all__ = ["Dialect"]

Dialect = Literal["openai", "anthropic"]
"""``openai`` (chat completions): every property required, optional means nullable, the root
an object. ``anthropic`` (Messages): optional properties may be left out of ``required``, and
the root may be a ``$ref`` to an object definition."""

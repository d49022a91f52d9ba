"""The pydantic models the client tests build their schemas from, as users write them."""

from __future__ import annotations

import pydantic


class Search(pydantic.BaseModel):
    """Search places in a city."""

    city: str
    limit: int = 10
    cuisine: str | None = None


class TreeNode(pydantic.BaseModel):
    """A node of a tree (a recursive model)."""

    name: str
    children: list[TreeNode] = []


class Bookmark(pydantic.BaseModel):
    """Save a link."""

    url: pydantic.HttpUrl

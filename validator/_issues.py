"""Issues found in a schema, and the error raised when a schema cannot be compiled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

IssueCode = Literal["schema_not_strict", "invalid_tool_schema"]


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem with a schema.

    ``param`` is the full path from the caller's prefix, e.g.
    ``tools[0].function.parameters.properties.note``.
    """

    code: IssueCode
    param: str
    message: str


class SchemaError(ValueError):
    """A schema outside the supported subset (or malformed); carries every issue."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        first = issues[0].message if issues else "invalid schema"
        super().__init__(first)

"""Strict-subset lint: every issue in a schema, in document order, with exact ``param`` paths.

Rules (spec "Schema rules in strict mode"), per :data:`Dialect`:

* ``schema_not_strict``: an object schema whose ``additionalProperties`` is not ``false``
  (param: the object's path); a schema that constrains nothing (no ``type``, ``enum``,
  ``const``, ``anyOf`` or ``$ref``) or an array without ``items`` (param: that schema's
  path); a root that is not ``"type": "object"`` (param: the root path). Under ``openai``
  only: a property missing from ``required`` (param: ``<object>.required``, one issue per
  missing property, named in the message). Under ``anthropic`` a root ``$ref`` to an object
  definition is an object root.
* ``anthropic`` follows anthropic-python's ``transform_schema``: what it moves into the
  description is an ``invalid_tool_schema`` issue at the keyword (``minimum``,
  ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``minLength``,
  ``maxLength``, ``pattern``, ``maxItems``, ``minItems`` other than 0 or 1, formats it
  does not list, ``enum``/``const`` values that are not primitives, ``oneOf``), and what
  it keeps is accepted (``allOf``, root ``definitions`` with ``#/definitions/<name>``
  refs). ``openai`` refuses ``allOf``, ``oneOf`` and ``definitions``. With
  ``enforced_locally`` those vendor keyword rules give way to what the engine checks
  (the structural rules stay); ``subset_issues`` (compile) takes every one of them.
* ``invalid_tool_schema``: a keyword outside the supported subset, a malformed keyword value
  (param: ``<schema>.<keyword>``, or ``...<keyword>[i]`` for a bad array element), a
  ``$ref`` that is not local or names a missing definition, a pattern RE2 refuses, and every
  exceeded :class:`~validator.Limits` entry.

Decisions (documented here because the strict subset leaves them open):

* Boolean subschemas (``true``/``false``) are outside the subset, except as the value of
  ``additionalProperties``.
* ``$defs`` and ``$schema`` are accepted only at the root; ``$schema`` as the draft 2020-12
  or draft-07 URI (it is an identifier, never fetched).
* Annotations (``FREE_ANNOTATIONS``, ``description``, ``title``) are accepted anywhere and
  never constrain a value. A ``$ref`` may only sit beside annotations (sibling constraints
  would be an implicit ``allOf``). Supported targets: ``#`` and ``#/$defs/<name>`` (see
  :func:`validator._paths.parse_local_ref`).
* Integer-valued keywords (``minLength`` ...) accept ``2`` and ``2.0`` but not ``true``.

The walk is iterative and keyword-driven, bounded by ``Limits.max_schema_depth`` and a node
budget, so it never raises on any value it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from validator._dialect import Dialect
from validator._issues import Issue
from validator._limits import LIMITS, LimitCount, Limits

# The rule tables other modules import from here (re-exported).
from validator._lint_rules import ANNOTATIONS as ANNOTATIONS
from validator._lint_rules import DIALECT_FORMATS as DIALECT_FORMATS
from validator._lint_rules import DRAFT_2020_12 as DRAFT_2020_12
from validator._lint_rules import ENGINE_FORMATS as ENGINE_FORMATS
from validator._lint_rules import FORMATS as FORMATS
from validator._lint_rules import FREE_ANNOTATIONS as FREE_ANNOTATIONS
from validator._lint_rules import SCHEMA_URIS as SCHEMA_URIS
from validator._lint_rules import TYPES as TYPES
from validator._lint_walk import _Walk

__all__ = [
    "LIMITS",
    "Dialect",
    "LimitCount",
    "Limits",
    "LintReport",
    "lint",
    "lint_report",
    "subset_issues",
]


@dataclass(frozen=True, slots=True)
class LintReport:
    """All issues of a schema plus the limits counted (for ``/v1/schemas/check``).

    Example::

        report = lint_report(schema, path="tools[0].function.parameters")
        report.ok                      # no issues at all
        report.to_json()["counts"]     # {"properties": {"value": 4, "limit": 5000}, ...}
    """

    issues: tuple[Issue, ...]
    counts: tuple[LimitCount, ...]

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-ready form: ``{"issues": [...], "counts": {name: {value, limit}}}``."""
        return {
            "issues": [
                {"code": i.code, "param": i.param, "message": i.message} for i in self.issues
            ],
            "counts": {c.name: {"value": c.value, "limit": c.limit} for c in self.counts},
        }


def lint(
    schema: Any,
    *,
    path: str = "",
    limits: Limits = LIMITS,
    dialect: Dialect = "openai",
    enforced_locally: bool = False,
) -> list[Issue]:
    """Check ``schema`` against the strict subset under ``dialect``'s rules; return every
    issue in document order.

    ``enforced_locally=True``: the caller validates every answer against ``schema`` itself
    (as the gateway does) and sends the vendor its copy (``openai_copy`` /
    ``anthropic_copy``, which move what the vendor's strict mode lacks into descriptions),
    so a keyword the vendor lacks but the validator checks is not an issue; the dialect's
    structural rules still are.

    >>> lint({"type": "object", "properties": {"a": {"type": "string"}}}, path="p")[0].param
    'p'
    """
    walk = _Walk(schema, path, limits, strict=True, dialect=dialect, local=enforced_locally)
    return list(walk.run())


def subset_issues(schema: Any, *, path: str = "", limits: Limits = LIMITS) -> list[Issue]:
    """Only the ``invalid_tool_schema`` issues: what ``compile`` refuses.

    Non-strict schemas (open objects, optional properties, any root type) pass here.
    """
    return list(_Walk(schema, path, limits, strict=False).run())


def lint_report(
    schema: Any,
    *,
    path: str = "",
    limits: Limits = LIMITS,
    dialect: Dialect = "openai",
    enforced_locally: bool = False,
) -> LintReport:
    """Like :func:`lint`, plus every counted quantity beside its limit."""
    walk = _Walk(schema, path, limits, strict=True, dialect=dialect, local=enforced_locally)
    issues = walk.run()
    return LintReport(issues=tuple(issues), counts=walk.counts())

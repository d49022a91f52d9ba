"""Syntic validator: strict-subset lint, one shared compiled-schema cache, exact errors,
and the strict projection (``strictify``) with its inverse (``canonicalize``).

A library in its own right: it never imports ``gateway``.

Example::

    import validator

    issues = validator.lint(schema, path="tools[0].function.parameters")
    compiled = validator.compile(schema)          # cached by canonical hash
    errors = compiled.validate_json(b'{"amount_pence": "12"}')
    [e.message for e in errors]  # ['/amount_pence must be integer', ...]
"""

from __future__ import annotations

from validator._compile import (
    CacheStats,
    CompiledSchema,
    cache_stats,
    canonical_key,
    compile,
    compile_async,
    configure_cache,
)
from validator._errors import ValidationError
from validator._issues import Issue, IssueCode, SchemaError
from validator._lint import LIMITS, Limits, LintReport, lint, lint_report
from validator._strictify import StrictifyResult, canonicalize, strictify

__all__ = [
    "LIMITS",
    "CacheStats",
    "CompiledSchema",
    "Issue",
    "IssueCode",
    "Limits",
    "LintReport",
    "SchemaError",
    "StrictifyResult",
    "ValidationError",
    "cache_stats",
    "canonical_key",
    "canonicalize",
    "compile",
    "compile_async",
    "configure_cache",
    "lint",
    "lint_report",
    "strictify",
]

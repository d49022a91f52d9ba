"""Syntic validator: strict-subset lint, one shared compiled-schema cache, exact errors,
and the strict projection (``strictify``) with its inverse (``canonicalize``).

A library in its own right: it never imports ``gateway``.

Example::

    import validator

    issues = validator.lint(schema, path="tools[0].function.parameters")
    compiled = validator.compile(schema)          # cached by canonical hash
    errors = compiled.validate_json(b'{"amount_pence": "12"}')
    [e.message for e in errors]  # ['/amount_pence must be integer', ...]

    validator.lint_report(schema).to_json()       # issues + every limit counted
    result = validator.strictify(ordinary_schema) # projection or refusals with paths
    args = validator.canonicalize(model_args, ordinary_schema)  # drops injected nulls
    upstream = validator.without_annotations(schema)   # provider copy: no default, examples...

``Issue.param`` paths follow schema keywords (``properties.note``, ``items``,
``anyOf[1]``, ``$defs.Node``); names that are not simple identifiers are quoted
(``properties["a.b"]``). Limits and how they are counted: ``validator._limits``.
Command line: ``python -m validator lint|strictify|validate`` (see ``validator.__main__``).
"""

from __future__ import annotations

from validator._annotations import without_annotations
from validator._canonical import canonical_json, canonical_key
from validator._compile import (
    DEFAULT_CACHE_MAX_BYTES,
    CacheStats,
    cache_stats,
    compile,
    compile_async,
    configure_cache,
    lint_compile_async,
)
from validator._compiled import OFFLOAD_CODE_BYTES, OFFLOAD_INTERPRETER_BYTES, CompiledSchema
from validator._copies import anthropic_copy, openai_copy
from validator._dialect import Dialect
from validator._dupkeys import duplicate_key
from validator._errors import ValidationError
from validator._issues import Issue, IssueCode, SchemaError
from validator._lint import LIMITS, Limits, LintReport, lint, lint_report
from validator._strictify import StrictifyResult, canonicalize, strictify

__all__ = [
    "DEFAULT_CACHE_MAX_BYTES",
    "LIMITS",
    "OFFLOAD_CODE_BYTES",
    "OFFLOAD_INTERPRETER_BYTES",
    "CacheStats",
    "CompiledSchema",
    "Dialect",
    "Issue",
    "IssueCode",
    "Limits",
    "LintReport",
    "SchemaError",
    "StrictifyResult",
    "ValidationError",
    "anthropic_copy",
    "cache_stats",
    "canonical_json",
    "canonical_key",
    "canonicalize",
    "compile",
    "compile_async",
    "configure_cache",
    "duplicate_key",
    "lint",
    "lint_compile_async",
    "lint_report",
    "openai_copy",
    "strictify",
    "without_annotations",
]

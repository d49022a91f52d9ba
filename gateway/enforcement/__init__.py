"""The strict guarantee, without HTTP or storage: request-side checks (``check``) and the
response-side validate / correct-once / refuse loop (``correct``), and what the upstream is
sent given the strict plan (``upstream_view``)."""

from __future__ import annotations

from gateway.enforcement.check import (
    EMPTY_PLAN,
    OPENAI_PATHS,
    LintCache,
    ParamPaths,
    SchemaRejected,
    StrictPlan,
    check_request,
    strict_requested,
)
from gateway.enforcement.correct import (
    EnforceContext,
    OutputRejected,
    Violation,
    answers_in_content,
    call_violations,
    correct_call,
    correction_model,
    correction_request,
    enforce_call,
    enforce_output,
    enforce_response,
)
from gateway.enforcement.upstream_view import upstream_view

__all__ = [
    "EMPTY_PLAN",
    "OPENAI_PATHS",
    "EnforceContext",
    "LintCache",
    "OutputRejected",
    "ParamPaths",
    "SchemaRejected",
    "StrictPlan",
    "Violation",
    "answers_in_content",
    "call_violations",
    "check_request",
    "correct_call",
    "correction_model",
    "correction_request",
    "enforce_call",
    "enforce_output",
    "enforce_response",
    "strict_requested",
    "upstream_view",
]

"""Response-side enforcement: validate, correct once, or refuse (spec: "How it is enforced").

For every tool call of a request with strict tools:

- a call to a strict tool is validated against its compiled schema (its raw ``arguments``
  text, so unparseable JSON is a mismatch); a call to a tool not in the request is a
  mismatch; calls to non-strict tools pass untouched;
- an invalid call gets exactly ONE correction call to the upstream: the conversation, the
  bad assistant call, and a tool message listing the errors and asking to call the same
  function again, with ``tool_choice`` forcing that function; nothing else changes;
- with ``correction = "constrained"`` (the default for a local model) the correction call is
  decoded under the schema: a local model generates under the grammar of the one tool
  being corrected; an OpenAI-compatible engine is asked, in its own request field, for the
  tool's arguments as a JSON reply constrained to its schema, and that reply becomes the
  call's arguments. The gateway validates the result either way;
- the corrected call keeps the original ``id``; still invalid -> 422
  ``tool_arguments_invalid`` with the JSON pointer; a ``finish_reason: "length"`` cut-off
  is reported as truncation (no correction: the same limit would cut it again).

A strict request whose ``tool_choice`` asks for a call ("required", or a named tool) holds
the answer to it: no call at all gets one correction (the answer, then a user turn saying a
call is required, under the same ``tool_choice``), a call to another tool than the named
one is corrected like an unknown tool's (forcing the named one); still missing -> 422
``tool_call_missing`` (``param`` ``tool_choice``). A refusal is an answer here too.
With ``on_invalid = "tool_error"`` a call still invalid (or missing) is dropped and
explained in the answer instead (``gateway.enforcement.tool_error``).

Parallel calls are enforced independently and their corrections run concurrently.
``enforce_call`` handles ONE call and is what the streaming hold-back reuses.
A strict ``response_format`` gets the same treatment (``enforce_output``), code
``json_output_invalid``. A refusal (``ChatResponse.refusal``) is an answer, as in OpenAI's
structured outputs: it is returned as it is, never corrected.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, TypeGuard

import orjson

import validator
from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    ForcedTool,
    JsonSchemaFormat,
    Message,
    Reasoning,
    TextPart,
    ToolCall,
    ToolChoice,
    Usage,
)
from gateway.canonical.record import record
from gateway.context import Tally
from gateway.enforcement.check import StrictPlan
from gateway.enforcement.projection import canonical_call, projected_violations
from gateway.enforcement.tool_error import TOOL_CODES, answer_with_errors, explanation
from gateway.errors import Dialect, GatewayError, UnprocessableOutput
from gateway.settings import ModelConfig
from gateway.upstream.base import Upstream


@record
class Violation:
    """One way a value failed its schema: JSON pointer inside the value, a message that
    already names the pointer (``/amount_pence must be integer``), and, from the
    validator, the failing keyword's JSON pointer in the schema and the offending value
    cut short (empty when the failure is not a schema keyword's: unparseable JSON, an
    unknown tool, no reply). The value goes to the model in the correction, never to the
    client: invalid arguments never leave the gateway."""

    pointer: str
    message: str
    schema_path: str = ""
    value: str = ""

    @classmethod
    def of(cls, error: validator.ValidationError) -> Violation:
        value = "" if error.keyword == "json" else error.value
        return cls(error.pointer, error.message, error.schema_path, value)


@record
class EnforceContext:
    """What enforcement needs besides the request: where to send corrections, the plan
    from the request-side check, and the request's tally (usage, retries)."""

    upstream: Upstream
    model: ModelConfig
    plan: StrictPlan
    tally: Tally
    # ``on_invalid = "tool_error"`` (the model's, or the request's header).
    tool_errors: bool = False

    @property
    def shows_tool_errors(self) -> bool:
        """Whether a call still invalid becomes words in the answer (``tool_error``) rather
        than a 422: not under a strict output, whose answer must be the JSON it asked for."""
        return self.tool_errors and self.plan.output is None


class OutputRejected(UnprocessableOutput):
    """422 with the first violation in ``param``/``message`` and all of them listed."""

    def __init__(
        self, message: str, *, code: str, violations: list[Violation], param: str | None = None
    ) -> None:
        if param is None:
            param = violations[0].pointer if violations else ""
        super().__init__(message, code=code, param=param)
        self.violations = violations

    def envelope(self, request_id: str, dialect: Dialect = "openai") -> dict[str, Any]:
        body = super().envelope(request_id, dialect)
        body["error"]["errors"] = [
            {"pointer": v.pointer, "message": v.message, "schema_path": v.schema_path}
            for v in self.violations
        ]
        return body


def _validate(compiled: Any, raw: str) -> list[Violation]:
    try:
        errors = compiled.validate_json(raw)
    except ValueError as exc:  # a validator may raise on unparseable JSON
        return [Violation("", f"arguments are not valid JSON ({exc})")]
    return [Violation.of(e) for e in errors]


async def _validate_async(compiled: Any, raw: str) -> list[Violation]:
    """``_validate``, with large input validated off the event loop (``validate_json_async``:
    a large schema's arguments would otherwise stall every request on the loop)."""
    try:
        errors = await compiled.validate_json_async(raw)
    except ValueError as exc:
        return [Violation("", f"arguments are not valid JSON ({exc})")]
    return [Violation.of(e) for e in errors]


def call_violations(call: ToolCall, plan: StrictPlan) -> list[Violation]:
    """Why ``call`` breaks the plan (empty when it is fine or its tool is not strict)."""
    forced = plan.forced
    if forced is not None and call.name != forced:
        return [Violation("", f"tool_choice requires a call to {forced}, not to {call.name}")]
    compiled = plan.tools.get(call.name)
    if compiled is None:
        if call.name in plan.tool_names:
            return []
        return [Violation("", f"{call.name!r} is not a tool in this request")]
    found = _validate(compiled, call.raw_arguments)
    if not found and plan.projected:
        return _original_violations(call, plan)
    return found


def _original_violations(call: ToolCall, plan: StrictPlan) -> list[Violation]:
    """A projected tool's answer, canonicalized, checked against the client's own schema
    (the projection never loosens, so this holds unless the model found a gap)."""
    projection = plan.projected.get(call.name)
    if projection is None:
        return []
    parsed = orjson.loads(call.raw_arguments)  # valid against the projection: it parses
    return [Violation.of(e) for e in projected_violations(parsed, projection)]


def finished_call(call: ToolCall, plan: StrictPlan) -> ToolCall:
    """The call as the client gets it: a projected tool's arguments canonicalized (the
    nulls the projection made the model send removed), any other call unchanged."""
    projection = plan.projected.get(call.name) if plan.projected else None
    return call if projection is None else canonical_call(call, projection)


# Arguments up to this size are validated on the loop by ``validate_json_async`` whatever
# the schema's back end: checked here first, so the usual call costs no extra coroutine.
INLINE_ARGUMENT_BYTES = min(validator.OFFLOAD_INTERPRETER_BYTES, validator.OFFLOAD_CODE_BYTES)


async def call_violations_async(call: ToolCall, plan: StrictPlan) -> list[Violation]:
    """``call_violations``; large arguments are validated in a worker thread."""
    compiled = plan.tools.get(call.name)
    if (
        compiled is None
        or len(call.raw_arguments) <= INLINE_ARGUMENT_BYTES
        or (plan.forced is not None and call.name != plan.forced)
    ):
        return call_violations(call, plan)
    found = await _validate_async(compiled, call.raw_arguments)
    if not found and plan.projected:
        return await asyncio.to_thread(_original_violations, call, plan)
    return found


def _feedback(heading: str, violations: list[Violation], instruction: str) -> str:
    lines = [heading]
    # The offending value helps the model: it is what it sent, and goes back to it only.
    lines.extend(
        f"- {v.message} (got {v.value})" if v.value else f"- {v.message}" for v in violations
    )
    lines.append(instruction)
    return "\n".join(lines)


def correction_model(model: ModelConfig) -> ModelConfig:
    """The model as its correction calls see it: constrained when ``correction`` says so
    (the local adapter then adds the grammar, the OpenAI adapter the engine's field)."""
    if model.constrained_correction and not model.constrained:
        return dataclasses.replace(model, constrained=True)
    return model


def answers_in_content(model: ModelConfig) -> bool:
    """An OpenAI-compatible engine constrains a reply's content, not a tool call's arguments,
    so its constrained correction asks for the arguments as the reply."""
    named = model.engine is not None or model.constrained_field is not None
    return model.constrained_correction and model.provider == "openai" and named


def correction_request(
    request: ChatRequest,
    call: ToolCall,
    violations: list[Violation],
    plan: StrictPlan,
    *,
    as_content: bool = False,
    reasoning: tuple[Reasoning, ...] = (),
) -> ChatRequest:
    """The one correction: conversation + the bad call + a tool message with the errors,
    ``tool_choice`` forcing the same function (or any tool, for an unknown name; the
    request's named tool when it forces one and another was called).
    ``as_content``: no tools; the reply is the arguments, under the tool's schema.
    ``reasoning``: the answer's own, sent back before the call (a provider that made it
    may require it, as Anthropic does for thinking before a tool call)."""
    target = correction_target(call, plan)
    tool = request.tool(target) if target is not None and as_content else None
    heading = f"The arguments for {call.name} did not match the JSON schema:"
    if tool is not None:
        instruction = (
            f"Reply with only the corrected arguments for {target}: one JSON object "
            "that matches its parameters schema exactly."
        )
    elif target == call.name:
        instruction = (
            f"Call {call.name} again with corrected arguments: one JSON object that "
            "matches its parameters schema exactly."
        )
    elif target is not None:
        heading = f"The call to {call.name} is not the call this request requires:"
        instruction = (
            f"Call {target} instead, with arguments that match its parameters schema exactly."
        )
    else:
        instruction = "Call one of the available tools instead, with arguments matching its schema."
    text = _feedback(heading, violations, instruction)
    messages = (
        *request.messages,
        Message(role="assistant", tool_calls=(call,), reasoning=reasoning),
        Message(role="tool", tool_call_id=call.id, content=(TextPart(text),), is_error=True),
    )
    if tool is not None:
        output = JsonSchemaFormat(schema=tool.parameters, name=tool.name, strict=True)
        return dataclasses.replace(
            request,
            messages=messages,
            tools=(),
            tool_choice=None,
            response_format=output,
            parallel_tool_calls=None,
            stream=False,
        )
    choice: ToolChoice = ForcedTool(target) if target is not None else "required"
    return dataclasses.replace(request, messages=messages, tool_choice=choice, stream=False)


def correction_target(call: ToolCall, plan: StrictPlan) -> str | None:
    """The tool a call's correction must call: the request's named tool when it forces one,
    else the same tool (None: a name not in the request, so any of its tools)."""
    if plan.forced is not None:
        return plan.forced
    return call.name if call.name in plan.tool_names else None


def _truncated_message(subject: str) -> str:
    return (
        f'{subject} was cut off by the token limit (finish_reason "length") before it was '
        "complete; raise max_tokens."
    )


def _reject_call(call: ToolCall, violations: list[Violation], truncated: bool) -> OutputRejected:
    if truncated:
        message = _truncated_message(f"Arguments for {call.name}")
    else:
        message = f"Arguments for {call.name} did not match the schema: {violations[0].message}."
    return OutputRejected(message, code="tool_arguments_invalid", violations=violations)


async def _correction(fixed: ChatRequest, ctx: EnforceContext) -> ChatResponse:
    """One correction call, counted as a retry even when it fails (tokens then unknown)."""
    try:
        response = await ctx.upstream.complete(fixed, correction_model(ctx.model))
    except GatewayError:
        ctx.tally.add_correction(Usage())
        raise
    ctx.tally.add_correction(response.usage)
    return response


async def enforce_call(
    call: ToolCall,
    request: ChatRequest,
    ctx: EnforceContext,
    *,
    finish_reason: FinishReason | None = None,
    reasoning: tuple[Reasoning, ...] = (),
) -> ToolCall:
    """Return ``call`` if valid, else its single correction (same ``id``); raise 422."""
    violations = await call_violations_async(call, ctx.plan)
    if not violations:
        return call
    return await correct_call(
        call, violations, request, ctx, finish_reason=finish_reason, reasoning=reasoning
    )


async def correct_call(
    call: ToolCall,
    violations: list[Violation],
    request: ChatRequest,
    ctx: EnforceContext,
    *,
    finish_reason: FinishReason | None = None,
    reasoning: tuple[Reasoning, ...] = (),
) -> ToolCall:
    """The one correction of a call known to be invalid; raise 422 if it stays invalid."""
    if finish_reason == "length":
        raise _reject_call(call, violations, truncated=True)
    wanted = correction_target(call, ctx.plan)
    as_content = wanted is not None and answers_in_content(ctx.model)
    fixed = correction_request(
        request, call, violations, ctx.plan, as_content=as_content, reasoning=reasoning
    )
    response = await _correction(fixed, ctx)
    candidate = next((c for c in response.tool_calls if wanted is None or c.name == wanted), None)
    if candidate is None and as_content and response.content is not None:
        assert wanted is not None
        candidate = ToolCall(
            id=call.id,
            name=wanted,
            raw_arguments=response.content,
            namespace=call.namespace if wanted == call.name else None,
            members=call.members if wanted == call.name else None,
        )
    if candidate is None and wanted is not None and wanted != call.name:
        raise missing_call(ctx.plan, truncated=response.finish_reason == "length")
    if candidate is None:
        raise _reject_call(
            call,
            [Violation("", f"the correction did not call {call.name}")],
            truncated=response.finish_reason == "length",
        )
    again = await call_violations_async(candidate, ctx.plan)
    if again:
        raise _reject_call(candidate, again, truncated=response.finish_reason == "length")
    same = candidate.name == call.name
    return ToolCall(
        id=call.id,
        name=candidate.name,
        raw_arguments=candidate.raw_arguments,
        namespace=call.namespace if same else candidate.namespace,
        members=call.members if same else candidate.members,
    )


def _required(plan: StrictPlan) -> tuple[str, str]:
    """What ``tool_choice`` asks for, with and without its article."""
    if plan.forced is not None:
        return f"a call to {plan.forced}", f"call to {plan.forced}"
    return "a tool call", "tool call"


def missing_call(plan: StrictPlan, *, truncated: bool = False) -> OutputRejected:
    """422 ``tool_call_missing``: ``tool_choice`` asked for a call the answer does not make."""
    wanted, bare = _required(plan)
    if truncated:
        message = (
            f"tool_choice requires {wanted}, and the answer was cut off by the token limit "
            '(finish_reason "length") before it made one; raise max_tokens.'
        )
    else:
        message = f"tool_choice requires {wanted}, and the answer made none."
    return OutputRejected(
        message,
        code="tool_call_missing",
        param="tool_choice",
        violations=[Violation("", f"the answer has no {bare}")],
    )


async def correct_missing(
    response: ChatResponse, request: ChatRequest, ctx: EnforceContext
) -> ChatResponse:
    """The one correction of an answer that makes no call although ``tool_choice`` requires
    one: the correction's answer with its calls (validated, not corrected again) or its
    refusal (an answer), else 422 ``tool_call_missing``. A cut-off answer is not
    corrected: the same limit would cut it again."""
    plan = ctx.plan
    if response.finish_reason == "length":
        raise missing_call(plan, truncated=True)
    wanted = plan.forced
    target = f"Call {wanted} now" if wanted is not None else "Call one of the available tools now"
    text = (
        f"Your reply made no tool call, but this request requires {_required(plan)[0]}.\n"
        f"{target}, with arguments that match its parameters schema exactly."
    )
    messages = (
        *request.messages,
        Message(
            role="assistant",
            content=(TextPart(response.content or ""),),
            reasoning=response.reasoning,
        ),
        Message(role="user", content=(TextPart(text),)),
    )
    # The request's own tool_choice still forces the call.
    second = await _correction(dataclasses.replace(request, messages=messages, stream=False), ctx)
    if second.refusal is not None:
        return second
    calls = tuple(c for c in second.tool_calls if wanted is None or c.name == wanted)
    truncated = second.finish_reason == "length"
    if not calls:
        raise missing_call(plan, truncated=truncated)
    for call in calls:
        again = await call_violations_async(call, plan)
        if again:
            raise _reject_call(call, again, truncated=truncated)
    return dataclasses.replace(second, tool_calls=calls)


async def _output_violations(response: ChatResponse, plan: StrictPlan) -> list[Violation]:
    assert plan.output is not None
    if response.content is None:
        return [Violation("", "the reply has no content")]
    return await _validate_async(plan.output, response.content)


async def enforce_output(
    response: ChatResponse, request: ChatRequest, ctx: EnforceContext
) -> ChatResponse:
    """Validate a strict ``response_format`` reply; one correction; raise 422."""
    if response.refusal is not None:
        return response  # a refusal is an answer, not output that failed its schema
    violations = await _output_violations(response, ctx.plan)
    if not violations:
        return response
    if response.finish_reason == "length":
        raise OutputRejected(
            _truncated_message("The JSON output"), code="json_output_invalid", violations=violations
        )
    text = _feedback(
        "Your reply did not match the JSON schema:",
        violations,
        "Reply again with only a JSON value that matches the schema exactly.",
    )
    messages = (
        *request.messages,
        Message(
            role="assistant",
            content=(TextPart(response.content or ""),),
            reasoning=response.reasoning,
        ),
        Message(role="user", content=(TextPart(text),)),
    )
    fixed = dataclasses.replace(request, messages=messages, stream=False)
    second = await _correction(fixed, ctx)
    refused = second.refusal is not None
    again = [] if second.calls_tools or refused else await _output_violations(second, ctx.plan)
    if again:
        if second.finish_reason == "length":
            message = _truncated_message("The JSON output")
        else:
            message = f"Output did not match the schema: {again[0].message}."
        raise OutputRejected(message, code="json_output_invalid", violations=again)
    return dataclasses.replace(second, id=response.id)


async def enforce_response(
    response: ChatResponse, request: ChatRequest, ctx: EnforceContext
) -> ChatResponse:
    """Enforce every tool call, a call ``tool_choice`` requires, and a strict output;
    ``usage`` becomes the tally's total.

    Valid calls cost one validation each and no task; only invalid calls are corrected,
    concurrently when there are several. With ``ctx.shows_tool_errors`` a call still
    invalid is dropped and explained in the answer (``tool_error``) instead of raising.
    """
    plan = ctx.plan
    calls = response.tool_calls
    dropped: dict[int, str] = {}  # index of a dropped call -> what the answer says instead
    missing: str | None = None
    if calls and (plan.tools or plan.forced is not None):
        found: list[tuple[int, list[Violation]]] = []
        for i, c in enumerate(calls):
            # A small call is what ``call_violations_async`` would check inline: no coroutine.
            v = (
                call_violations(c, plan)
                if len(c.raw_arguments) <= INLINE_ARGUMENT_BYTES
                else await call_violations_async(c, plan)
            )
            if v:
                found.append((i, v))
        if found:
            reason = response.finish_reason
            fixes = [
                correct_call(
                    calls[i], v, request, ctx, finish_reason=reason, reasoning=response.reasoning
                )
                for i, v in found
            ]
            results: list[ToolCall | BaseException]
            if len(fixes) == 1:
                try:
                    results = [await fixes[0]]
                except OutputRejected as exc:
                    results = [exc]
            else:
                results = list(await asyncio.gather(*fixes, return_exceptions=True))
            fixed = list(calls)
            for (i, _), result in zip(found, results, strict=True):
                if isinstance(result, BaseException):
                    if not _shown(result, ctx):
                        raise result
                    dropped[i] = _explained(result, calls[i].name, ctx, "dropped")
                else:
                    fixed[i] = result
            calls = tuple(c for i, c in enumerate(fixed) if i not in dropped)
    elif plan.call_required and not response.calls_tools and response.refusal is None:
        try:
            second = await correct_missing(response, request, ctx)
        except OutputRejected as exc:
            if not _shown(exc, ctx):
                raise
            missing = _explained(exc, plan.forced, ctx, "missing")
        else:
            if second.refusal is not None:  # the correction's refusal is the answer
                response = dataclasses.replace(second, id=response.id)
            else:
                response = dataclasses.replace(response, finish_reason="tool_calls")
            calls = second.tool_calls
    elif plan.output is not None and not response.calls_tools and response.refusal is None:
        response = await enforce_output(response, request, ctx)
    if plan.projected:
        calls = tuple(finished_call(c, plan) for c in calls)
    total = ctx.tally.total
    if dropped or missing is not None:
        texts = [dropped[i] for i in sorted(dropped)] if missing is None else [missing]
        return answer_with_errors(response, calls, dropped, texts, total)
    if calls is response.tool_calls and (total is response.usage or total == response.usage):
        return response  # nothing corrected (the common case): no copy per request
    return dataclasses.replace(response, tool_calls=calls, usage=total)


def _shown(exc: BaseException, ctx: EnforceContext) -> TypeGuard[OutputRejected]:
    """Whether ``exc`` becomes words in the answer (``tool_error``) rather than the 422."""
    return isinstance(exc, OutputRejected) and exc.code in TOOL_CODES and ctx.shows_tool_errors


def _explained(exc: OutputRejected, tool: str | None, ctx: EnforceContext, kind: str) -> str:
    """The answer's words for a call ``tool_error`` drops (or misses), noted in the tally."""
    ctx.tally.tool_error(kind, tool or "*")
    return explanation(tool, exc.code, exc.message, [v.message for v in exc.violations])


def tool_error_text(exc: BaseException, tool: str | None, ctx: EnforceContext) -> str | None:
    """For the hold-back: the words for a call ``tool_error`` drops (``tool``; None: a
    required call missing), or None when ``exc`` is to be raised."""
    if not _shown(exc, ctx):
        return None
    if tool is None:
        return _explained(exc, ctx.plan.forced, ctx, "missing")
    return _explained(exc, tool, ctx, "dropped")

"""Request-side checks, before any upstream call (spec: "Schema rules in strict mode").

Every strict tool's ``parameters`` and a strict ``response_format`` schema are linted with
the validator, with ``param`` prefixed the way the client's dialect names the field
(``ParamPaths``). Lint verdicts are cached per canonical schema key, so a schema seen
before costs one hash. Non-strict tools pass through unchecked. The result is a
``StrictPlan``: the compiled schemas the response side validates against.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import validator
from gateway.canonical import ChatRequest, ForcedTool, JsonSchemaFormat
from gateway.canonical.record import record
from gateway.enforcement.projection import Projection, project
from gateway.errors import Dialect, InvalidRequest
from gateway.settings import ModelConfig


@dataclass(frozen=True, slots=True)
class ParamPaths:
    """How a dialect spells schema locations in an error's ``param``.

    ``tool_schema`` is formatted with ``i`` (the tool's index in the request).
    """

    tool_schema: str = "tools[{i}].function.parameters"
    tool_name: str = "tools[{i}].function.name"
    response_schema: str = "response_format.json_schema.schema"
    tools: str = "tools"
    # Whose strict rules the client's schemas follow (``validator.Dialect``).
    dialect: validator.Dialect = "openai"

    def tool(self, i: int) -> str:
        return _spelled(self.tool_schema, i)


# Per strict tool of every request: ``str.format`` parses the template and takes its
# keyword as a dict each time. The templates are the dialects' constants, ``i`` < max_tools.
@functools.lru_cache(maxsize=1024)
def _spelled(template: str, i: int) -> str:
    return template.format(i=i)


OPENAI_PATHS = ParamPaths()


class SchemaRejected(InvalidRequest):
    """400 ``schema_not_strict`` / ``invalid_tool_schema``: the first issue in
    ``param``/``message``, every issue listed under ``error.issues``."""

    def __init__(self, issues: list[validator.Issue]) -> None:
        first = issues[0]
        super().__init__(first.message, code=first.code, param=first.param)
        self.issues = issues

    def envelope(self, request_id: str, dialect: Dialect = "openai") -> dict[str, Any]:
        body = super().envelope(request_id, dialect)
        body["error"]["issues"] = [
            {"code": i.code, "param": i.param, "message": i.message} for i in self.issues
        ]
        return body


@record
class StrictPlan:
    """What the response side enforces: compiled schemas of strict tools, by name, and of a
    strict ``response_format``. ``tool_names`` is every tool in the request."""

    tools: Mapping[str, validator.CompiledSchema] = field(default_factory=dict)
    output: validator.CompiledSchema | None = None
    tool_names: frozenset[str] = frozenset()
    # For a constrained upstream: the copy of each strict schema its strict mode gets
    # (``provider_copy``), by tool name; ``None`` sends that tool non-strict. Absent names
    # go as the client sent them.
    upstream_tools: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)
    upstream_output: dict[str, Any] | None = None  # the strict output schema's copy
    # Tools made strict through the projection (``tools`` holds the projection compiled),
    # and the tools that could not be (sent untouched, non-strict), in request order.
    projected: Mapping[str, Projection] = field(default_factory=dict)
    refused: tuple[str, ...] = ()
    # The request's ``tool_choice`` asks for a call ("required", or a named tool: ``forced``):
    # an answer without one is invalid, as invalid arguments are.
    call_required: bool = False
    forced: str | None = None

    @property
    def enforced(self) -> bool:
        return bool(self.tools) or self.output is not None


EMPTY_PLAN = StrictPlan()


_Key = tuple[bytes, str, str]  # (canonical schema JSON, param prefix, dialect or "projection")


class LintCache:
    """Lint verdicts keyed by (canonical schema JSON, param prefix); bounded LRU.

    A clean verdict also keeps the compiled schema, so a repeated schema costs one
    canonical serialisation per request (no digest, no re-lint, no second cache lookup in
    the validator). The key is the JSON itself: a dict hashes it far cheaper than SHA-256,
    and equal keys are equal schemas, not just equal digests.
    """

    __slots__ = ("_entries", "bytes", "hits", "max_bytes", "maxsize", "misses")

    # The validator's compiled-schema cache's bounds: a clean verdict keeps its compiled
    # schema alive, so bigger ones would hold evicted compilations in memory.
    # ``max_bytes`` counts the kept schemas' canonical JSON, as the validator's cache does:
    # without it, a full cache of the largest schemas the lint admits would hold gigabytes.
    def __init__(
        self, maxsize: int = 1024, max_bytes: int = validator.DEFAULT_CACHE_MAX_BYTES
    ) -> None:
        # key -> (verdict, the bytes it counts against max_bytes)
        self._entries: OrderedDict[_Key, tuple[_Verdict, int]] = OrderedDict()
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def _get(self, key: _Key) -> _Verdict | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return found[0]

    def _put(self, key: _Key, verdict: _Verdict) -> None:
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        text = key[0]
        compiled = verdict.compiled
        if compiled is not None and compiled.canonical_json == text:
            # The compiled schema holds the same JSON: key on its copy, counted once.
            key = (compiled.canonical_json, key[1], key[2])
            weight = verdict.size
        else:  # a rejected schema, or a projection's source: the key is held on its own
            weight = verdict.size + len(text)
        entries[key] = (verdict, weight)
        self.bytes += weight
        while len(entries) > self.maxsize or (self.bytes > self.max_bytes and len(entries) > 1):
            _key, (_dropped, dropped_weight) = entries.popitem(last=False)
            self.bytes -= dropped_weight

    def lint(
        self, schema: Any, path: str, dialect: validator.Dialect = "openai"
    ) -> tuple[validator.Issue, ...]:
        """The lint issues of ``schema`` with params under ``path`` (cached)."""
        local = client_enforced_locally(dialect)
        key = (validator.canonical_json(schema), path, f"{dialect}+local" if local else dialect)
        found = self._get(key)
        if found is not None:
            return found.issues
        self.misses += 1
        issues = validator.lint(schema, path=path, dialect=dialect, enforced_locally=local)
        verdict = _Verdict(tuple(issues))
        self._put(key, verdict)
        return verdict.issues

    async def resolve(
        self,
        schema: Any,
        path: str,
        dialect: validator.Dialect = "openai",
        *,
        enforced_locally: bool = False,
    ) -> validator.CompiledSchema:
        """The compiled schema, or ``SchemaRejected`` with the lint (or compile) issues
        (``enforced_locally`` as for ``validator.lint``)."""
        local = enforced_locally or client_enforced_locally(dialect)
        found = await self._verdict(schema, path, dialect, local)
        assert found.compiled is not None
        return found.compiled

    def compiled(
        self, schema: Any, path: str, dialect: validator.Dialect = "openai"
    ) -> validator.CompiledSchema | None:
        """``resolve``'s answer when the cache holds a clean verdict for it, else None (then
        ``resolve`` lints and compiles, or raises): the usual hit costs no coroutine."""
        local = client_enforced_locally(dialect)
        key = (validator.canonical_json(schema), path, f"{dialect}+local" if local else dialect)
        entry = self._entries.get(key)
        if entry is None or entry[0].issues or entry[0].compiled is None:
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return entry[0].compiled

    async def resolve_for(
        self, schema: Any, path: str, dialect: validator.Dialect, upstream: validator.Dialect
    ) -> tuple[validator.CompiledSchema, dict[str, Any] | None]:
        """``resolve`` plus the copy a constrained ``upstream`` gets (``provider_copy``,
        cached with the verdict)."""
        found = await self._verdict(schema, path, dialect, client_enforced_locally(dialect))
        assert found.compiled is not None
        if upstream not in found.copies:
            found.copies[upstream] = provider_copy(schema, dialect, upstream)
        return found.compiled, found.copies[upstream]

    async def projection(self, schema: dict[str, Any], path: str) -> Projection | None:
        """``project(schema)``, cached beside the verdicts (off the event loop on a miss)."""
        key = (validator.canonical_json(schema), path, "projection")
        found = self._get(key)
        if found is None:
            self.misses += 1
            found = _Verdict((), projection=await asyncio.to_thread(project, schema, path))
            self._put(key, found)
        if found.projection is None:
            return None
        # The projection's own verdict and compile go through the cache like any schema;
        # it keeps the formats the validator checks beyond the vendor's (its copy moves them).
        await self.resolve(found.projection.schema, path, enforced_locally=True)
        return found.projection

    async def _verdict(
        self, schema: Any, path: str, dialect: validator.Dialect, local: bool = False
    ) -> _Verdict:
        key = (validator.canonical_json(schema), path, f"{dialect}+local" if local else dialect)
        entry = self._entries.get(key)
        if entry is not None:  # ``_get``, inline: every strict schema of every request
            self.hits += 1
            self._entries.move_to_end(key)
            found = entry[0]
        else:
            self.misses += 1
            # Off the event loop, one lint walk for both the verdict and the compile: a
            # large new schema takes long enough to stall every request; misses are rare.
            issues, compiled = await _lint_compile(schema, path, dialect, local)
            found = _Verdict(tuple(issues), compiled)
            self._put(key, found)
        if found.issues:
            raise SchemaRejected(list(found.issues))
        return found


@dataclass(frozen=True, slots=True)
class _Verdict:
    issues: tuple[validator.Issue, ...]
    compiled: validator.CompiledSchema | None = None
    # upstream dialect -> provider copy (filled on first use)
    copies: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    projection: Projection | None = None  # for a ("projection") key

    @property
    def size(self) -> int:
        """What the verdict holds against ``LintCache.max_bytes``: its compiled schema's
        canonical bytes (a rejected schema's issues are not counted)."""
        if self.projection is not None:
            return self.projection.checked.schema_bytes
        return 0 if self.compiled is None else self.compiled.schema_bytes


def client_enforced_locally(dialect: validator.Dialect) -> bool:
    """Whether a client's strict schema may carry keywords its vendor's strict mode lacks
    (``validator.lint``'s ``enforced_locally``). A Messages client's may (bounds,
    ``pattern``, ``oneOf``, ...): the gateway checks them itself and an Anthropic upstream
    gets them in the description (``validator.anthropic_copy``, in its codec). A chat or
    Responses client's is held to OpenAI's own rules, as OpenAI holds it."""
    return dialect == "anthropic"


def provider_copy(
    schema: Any, dialect: validator.Dialect, upstream: validator.Dialect
) -> dict[str, Any] | None:
    """The copy of a strict schema (valid under ``dialect``) that an ``upstream`` with
    constrained decoding gets: annotations dropped, and for an OpenAI upstream a format
    its strict mode lacks described (validation is still against the client's schema); or
    ``None`` when the schema breaks that upstream's structural strict rules (Messages
    optional properties to an every-property-required upstream): the tool then travels
    non-strict and the gateway enforces it alone. Anthropic's own copy is made by its
    codec, for every strict schema it sends."""
    if dialect != upstream and validator.lint(schema, dialect=upstream, enforced_locally=True):
        return None
    copy: dict[str, Any] = _vendor_copy(validator.without_annotations(schema), upstream)
    return copy


async def _lint_compile(
    schema: Any, path: str, dialect: validator.Dialect, local: bool
) -> tuple[list[validator.Issue], validator.CompiledSchema | None]:
    try:
        return await validator.lint_compile_async(
            schema, path=path, dialect=dialect, enforced_locally=local
        )
    except validator.SchemaError as exc:
        # compile() knows no param prefix: point at the schema itself.
        issues = [validator.Issue(i.code, path, i.message) for i in exc.issues] or [
            validator.Issue("invalid_tool_schema", path, str(exc))
        ]
        raise SchemaRejected(issues) from exc


def _as_is(_i: int, param: str) -> str:
    return param


def _tool_names(request: ChatRequest, names: Iterable[str]) -> frozenset[str]:
    """Every tool the model may call: the canonical ones, and the ones the client's body
    carries that the gateway passes through unseen (an Anthropic ``bash`` tool)."""
    others = request.origin.tool_names if request.origin is not None else ()
    return frozenset((*names, *others)) if others else frozenset(names)


def strict_requested(request: ChatRequest, model: ModelConfig | None = None) -> bool:
    """Whether the request asks for any guarantee: a strict tool, a strict json_schema, or
    tools under the projection (``x-syntic-strictify`` or the model's ``strictify``)."""
    rf = request.response_format
    if isinstance(rf, JsonSchemaFormat) and rf.strict:
        return True
    if not request.tools:
        return False
    return (
        request.strictify
        or (model is not None and model.strictify)
        or any(map(_STRICT, request.tools))
    )


_STRICT = operator.attrgetter("strict")


async def check_request(
    request: ChatRequest,
    model: ModelConfig,
    *,
    paths: ParamPaths,
    lint_cache: LintCache,
    max_tools: int,
) -> StrictPlan:
    """Lint and compile every strict schema of ``request``; raise ``InvalidRequest`` (400)."""
    if len(request.tools) > max_tools:
        raise InvalidRequest(
            f"At most {max_tools} tools are allowed; got {len(request.tools)}.",
            code="too_many_tools",
            param=paths.tools,
        )
    rf = request.response_format
    strict_output = isinstance(rf, JsonSchemaFormat) and rf.strict
    if not strict_requested(request, model):
        if not request.tools:
            return EMPTY_PLAN
        return StrictPlan(tool_names=_tool_names(request, [t.name for t in request.tools]))
    if not model.strict_tools:
        raise InvalidRequest(
            f"Model {model.name} does not support strict tools or strict JSON output "
            "(capabilities.strict_tools is false).",
            code="strict_not_supported",
            param="model",
        )
    origin = request.origin
    at = origin.tool_param if origin is not None and origin.tool_paths else _as_is
    names: set[str] = set()
    compiled: dict[str, validator.CompiledSchema] = {}
    upstream = _upstream_dialect(model)
    copies: dict[str, dict[str, Any] | None] = {}
    projected: dict[str, Projection] = {}
    refused: list[str] = []
    dialect = paths.dialect
    projecting = request.strictify or model.strictify
    for i, tool in enumerate(request.tools):
        if tool.name in names:
            raise InvalidRequest(
                f"Duplicate tool name {tool.name!r}.", param=at(i, paths.tool_name.format(i=i))
            )
        names.add(tool.name)
        if not tool.strict:
            if projecting:
                path = at(i, paths.tool(i))
                found = await lint_cache.projection(tool.parameters, path)
                if found is None:
                    refused.append(tool.name)
                else:
                    projected[tool.name] = found
                    compiled[tool.name] = await lint_cache.resolve(
                        found.schema, path, enforced_locally=True
                    )
                    _projection_copy(copies, tool.name, found, upstream)
            continue
        path = at(i, paths.tool(i))  # spelled out only for a schema checked here
        if upstream is None:
            found_compiled = lint_cache.compiled(tool.parameters, path, dialect)
            if found_compiled is None:
                found_compiled = await lint_cache.resolve(tool.parameters, path, dialect)
            compiled[tool.name] = found_compiled
            continue
        compiled[tool.name], copy = await lint_cache.resolve_for(
            tool.parameters, path, dialect, upstream
        )
        if copy is None:
            # Its upstream's strict mode refuses it (Messages optional properties bound for
            # an every-property-required upstream): carried by the projection when it has
            # one, else sent non-strict and enforced by the gateway alone.
            found = await lint_cache.projection(tool.parameters, path)
            if found is not None:
                projected[tool.name] = found
                compiled[tool.name] = await lint_cache.resolve(
                    found.schema, path, enforced_locally=True
                )
                copy = _vendor_copy(found.schema, upstream)
        if copy is not tool.parameters:
            copies[tool.name] = copy
    output = None
    output_copy = None
    if strict_output:
        assert isinstance(rf, JsonSchemaFormat)
        if upstream is None:
            output = lint_cache.compiled(rf.schema, paths.response_schema, dialect)
            if output is None:
                output = await lint_cache.resolve(rf.schema, paths.response_schema, dialect)
            output_copy = rf.schema  # goes as sent
        else:
            output, output_copy = await lint_cache.resolve_for(
                rf.schema, paths.response_schema, dialect, upstream
            )
    tool_names = _tool_names(request, names)
    choice = request.tool_choice
    # Only where the request is strict (something enforced): otherwise the upstream's word.
    required = (
        bool(tool_names)
        and (bool(compiled) or output is not None)
        and (choice == "required" or isinstance(choice, ForcedTool))
    )
    forced = choice.name if required and isinstance(choice, ForcedTool) else None
    # Positional, in field order: a class called with keywords builds a dict per call.
    return StrictPlan(
        compiled,
        output,
        tool_names,
        copies,
        output_copy,
        projected,
        tuple(refused),
        required,
        forced,
    )


def _vendor_copy(projected: dict[str, Any], upstream: validator.Dialect | None) -> Any:
    """A projection as a constrained OpenAI upstream takes it: a format its strict mode
    lacks (kept in the projection, which answers are validated against) described instead.
    Anthropic's copy is made by its codec, for every strict schema it sends."""
    return validator.openai_copy(projected) if upstream == "openai" else projected


def _projection_copy(
    copies: dict[str, dict[str, Any] | None],
    name: str,
    found: Projection,
    upstream: validator.Dialect | None,
) -> None:
    copy = _vendor_copy(found.schema, upstream)
    if copy is not found.schema:
        copies[name] = copy


def _upstream_dialect(model: ModelConfig) -> validator.Dialect | None:
    """Whose strict rules a constrained upstream enforces on the schemas it is sent
    (``None``: no strict flag goes upstream, or the local engine, whose grammar builder
    takes any schema)."""
    if not model.constrained or model.provider == "local":
        return None
    return "anthropic" if model.provider == "anthropic" else "openai"

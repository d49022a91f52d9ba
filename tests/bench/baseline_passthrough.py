"""The reference peer for the gateway's CPU target: the least a strict pass-through does.

A minimal Starlette app under uvicorn (one process, its default uvloop + httptools when
installed, no access log) with one route, ``POST /v1/chat/completions``: it compiles each
strict tool's parameters through the validator's shared cache (``validator.compile``: a
cache hit after the first request), forwards the body unchanged to
``<upstream>/chat/completions`` over one shared ``aiohttp.ClientSession``, validates every
strict tool call's arguments in the answer (``CompiledSchema.validate_json``) and returns
the upstream's JSON. No auth, ledger, limits, logging or corrections: the gateway's CPU per
request is judged against this one's, measured side by side (``gateway_bench.py
--compare-peers``). Run::

    python tests/bench/baseline_passthrough.py --port 8100 --upstream http://127.0.0.1:8200/v1
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import validator

_JSON = "application/json"


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": {"message": message}}), status, media_type=_JSON)


def strict_schemas(payload: Any) -> dict[str, validator.CompiledSchema]:
    """Each strict function tool's compiled parameters, by tool name."""
    found: dict[str, validator.CompiledSchema] = {}
    tools = payload.get("tools") if isinstance(payload, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("strict") is True and isinstance(fn.get("name"), str):
            found[fn["name"]] = validator.compile(fn.get("parameters", {}))
    return found


def invalid_calls(answer: Any, schemas: dict[str, validator.CompiledSchema]) -> list[str]:
    """A message per strict tool call whose arguments do not match its schema."""
    problems: list[str] = []
    choices = answer.get("choices") if isinstance(answer, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            fn = call.get("function") if isinstance(call, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            compiled = schemas.get(name) if isinstance(name, str) else None
            if fn is None or compiled is None:
                continue
            arguments = fn.get("arguments")
            if not isinstance(arguments, str):
                problems.append(f"{name}: arguments are not a string")
                continue
            problems.extend(f"{name}: {e.message}" for e in compiled.validate_json(arguments))
    return problems


def create_app(upstream: str) -> Starlette:
    target = upstream.rstrip("/") + "/chat/completions"
    session: list[aiohttp.ClientSession] = []

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        session.append(aiohttp.ClientSession())
        try:
            yield
        finally:
            await session[0].close()

    async def chat_completions(request: Request) -> Response:
        raw = await request.body()
        try:
            payload = orjson.loads(raw)
            schemas = strict_schemas(payload)
        except orjson.JSONDecodeError:
            return _error(400, "the body is not JSON")
        except validator.SchemaError as exc:
            return _error(400, f"invalid strict schema: {exc}")
        headers = {"content-type": _JSON}
        auth = request.headers.get("authorization")
        if auth is not None:
            headers["authorization"] = auth
        try:
            async with session[0].post(target, data=raw, headers=headers) as upstream_answer:
                body = await upstream_answer.read()
                status = upstream_answer.status
        except aiohttp.ClientError as exc:
            return _error(502, f"upstream unreachable: {exc!r}")
        if status == 200 and schemas:
            try:
                problems = invalid_calls(orjson.loads(body), schemas)
            except orjson.JSONDecodeError:
                return _error(502, "the upstream's answer is not JSON")
            if problems:
                return _error(502, "invalid strict tool call: " + "; ".join(problems))
        return Response(body, status, media_type=_JSON)

    return Starlette(
        routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:8200/v1")
    ns = parser.parse_args()
    uvicorn.run(create_app(ns.upstream), host=ns.host, port=ns.port, workers=1,
                access_log=False, log_level="warning")


if __name__ == "__main__":
    main()

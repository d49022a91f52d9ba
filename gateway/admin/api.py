"""The admin API: ``/admin/*`` JSON routes for operators and the console.

Authentication (admin keys only) is done before routing by
``gateway.admin.auth.AdminAuthMiddleware``; every route here can assume an admin caller.
Errors are ``GatewayError``s, rendered by the outer middleware as the unified envelope.

=======  ==================================  ============================================
POST     /admin/keys                         create a customer key; the secret, once (201)
GET      /admin/keys                         every key, never a secret
DELETE   /admin/keys/{key_id}                revoke a customer key
GET      /admin/usage                        aggregates + time series over a window
GET      /admin/requests                     recent ledger rows (no prompts: none stored)
POST     /admin/schemas/check                the very ``/v1/schemas/check`` handler
=======  ==================================  ============================================

A created key works at once on every replica (an unknown key is never cached positively);
a revoked key stops at once on this replica and within ``key_cache_ttl_s`` on the others.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.admin.queries import (
    BUCKETS,
    GROUP_COLUMNS,
    MAX_BUCKETS,
    MAX_REQUESTS,
    Aggregate,
    RequestFilter,
    Window,
    recent_requests,
    usage_report,
)
from gateway.errors import InvalidRequest, NotFound, Overloaded
from gateway.keys.fields import checked_limit, checked_name
from gateway.keys.secrets import KeyKind
from gateway.keys.store import DbKeyStore, KeyInfo
from gateway.settings import Settings
from gateway.storage.base import Database, StorageError
from gateway.usage.report import parse_since
from gateway.web import parse_json_body

DEFAULT_WINDOW_S = 24 * 3600.0
_AUTO_BUCKET_TARGET = 120  # pick the finest bucket giving at most this many points
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


def _json(payload: Any, status: int = 200) -> Response:
    # no-store: admin answers (and a new key's secret) must not sit in any cache.
    return Response(
        orjson.dumps(payload),
        status_code=status,
        media_type="application/json",
        headers={"cache-control": "no-store"},
    )


def _backend(request: Request) -> tuple[DbKeyStore, Database]:
    services = getattr(request.app.state, "services", None)
    keys = getattr(services, "keys", None)
    db = getattr(services, "db", None)
    if not isinstance(keys, DbKeyStore) or db is None:
        raise Overloaded(
            "The admin API needs the storage-backed services.", code="admin_unavailable"
        )
    return keys, db


def key_json(info: KeyInfo) -> dict[str, Any]:
    """A key as the admin API shows it: everything but the secret."""
    return {
        "id": info.id,
        "name": info.name,
        "kind": info.kind,
        "display_prefix": info.display_prefix,
        "rpm": info.rpm,
        "tpm": info.tpm,
        "max_concurrent": info.max_concurrent,
        "admin": info.admin,
        "created_at": info.created_at,
        "revoked_at": info.revoked_at,
        "revoked": info.revoked,
    }


# -- keys ------------------------------------------------------------------------------


async def _body(request: Request) -> dict[str, Any]:
    settings: Settings = request.app.state.settings
    body = parse_json_body(await request.body(), settings.max_json_depth, param="body")
    if not isinstance(body, dict):
        raise InvalidRequest("Request body must be a JSON object.", param="body")
    return body


def _limit(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    try:
        return checked_limit(value)
    except ValueError as exc:
        raise InvalidRequest(f"{name} {exc}, or null.", param=name) from exc


async def create_key(request: Request) -> Response:
    """``POST /admin/keys`` ``{"name", "rpm"?, "tpm"?, "max_concurrent"?, "test"?}`` -> 201
    ``{key, secret}``."""
    keys, _ = _backend(request)
    body = await _body(request)
    try:
        name = checked_name(body.get("name"))
    except ValueError as exc:
        raise InvalidRequest(f"name {exc}.", param="name") from exc
    test = body.get("test", False)
    if not isinstance(test, bool):
        raise InvalidRequest("test must be a boolean.", param="test")
    kind: KeyKind = "test" if test else "live"
    created = await keys.create(
        name,
        kind=kind,
        rpm=_limit(body, "rpm"),
        tpm=_limit(body, "tpm"),
        max_concurrent=_limit(body, "max_concurrent"),
    )
    return _json({"key": key_json(created.info), "secret": created.secret}, status=201)


async def list_keys(request: Request) -> Response:
    """``GET /admin/keys[?include_revoked=false]`` -> ``{data: [key...]}``, oldest first."""
    keys, _ = _backend(request)
    include = request.query_params.get("include_revoked", "true").lower() not in ("false", "0")
    return _json({"data": [key_json(k) for k in await keys.list(include_revoked=include)]})


async def revoke_key(request: Request) -> Response:
    """``DELETE /admin/keys/{key_id}``: revoke a customer key (idempotent)."""
    keys, _ = _backend(request)
    settings: Settings = request.app.state.settings
    key_id = request.path_params["key_id"]
    # NUL: no stored id has one, and PostgreSQL refuses it as a query value.
    info = None if "\x00" in key_id else await keys.get(key_id)
    if info is None:
        raise NotFound(f"No key {key_id!r}.", code="key_not_found", param="key_id")
    if info.admin:
        raise InvalidRequest(
            "Admin keys are managed with 'syntic keys revoke'; the admin API manages "
            "customer keys.",
            code="admin_key_not_managed",
            param="key_id",
        )
    changed = await keys.revoke(key_id)
    after = await keys.get(key_id) or info
    return _json(
        {
            "key": key_json(after),
            "already_revoked": not changed,
            "propagation_s": settings.key_cache_ttl_s,
        }
    )


# -- usage and requests ----------------------------------------------------------------


def _time(request: Request, name: str, default: float, now: float) -> float:
    """Unix seconds, ISO 8601, or relative to now (``-1h``, ``-30m``, ``-7d``)."""
    raw = request.query_params.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw) if _NUMBER.match(raw) else parse_since(raw, now=now)
    except ValueError as exc:
        raise InvalidRequest(
            f"{name} must be unix seconds, ISO 8601, or relative like -1h, -30m, -7d.",
            param=name,
        ) from exc
    if not math.isfinite(value):
        raise InvalidRequest(f"{name} is out of range.", param=name)
    return value


def _bucket(request: Request, span: float) -> tuple[str, int]:
    raw = request.query_params.get("bucket")
    if raw is None or not raw:
        for name, seconds in BUCKETS.items():
            if span / seconds <= _AUTO_BUCKET_TARGET:
                return name, seconds
        return "1d", BUCKETS["1d"]
    if raw not in BUCKETS:
        raise InvalidRequest(
            f"bucket must be one of {', '.join(BUCKETS)}.", code="invalid_bucket", param="bucket"
        )
    seconds = BUCKETS[raw]
    if span / seconds > MAX_BUCKETS:
        raise InvalidRequest(
            f"At most {MAX_BUCKETS} buckets per series: widen the bucket or shorten the window.",
            code="invalid_bucket",
            param="bucket",
        )
    return raw, seconds


def _opt(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value and "\x00" in value:  # no stored value has one; PostgreSQL refuses it
        raise InvalidRequest(f"{name} must not contain NUL characters.", param=name)
    return value if value else None


def _rows(aggs: list[Aggregate], *names: str) -> list[dict[str, Any]]:
    return [{**dict(zip(names, a.group, strict=True)), **a.to_json()} for a in aggs]


async def usage(request: Request) -> Response:
    """``GET /admin/usage?since=&until=&bucket=&key_id=&model=``: totals, breakdowns by
    key, model, endpoint, status and error code, and sparse time series (buckets with no
    requests are omitted) in total, per model and per key."""
    _, db = _backend(request)
    now = time.time()
    until = _time(request, "until", now, now)
    since = _time(request, "since", until - DEFAULT_WINDOW_S, now)
    if since >= until:
        raise InvalidRequest("since must be before until.", param="since")
    bucket_name, bucket_s = _bucket(request, until - since)
    window = Window(since, until)
    key_id, model = _opt(request, "key_id"), _opt(request, "model")

    try:
        report = await usage_report(db, window, bucket_s=bucket_s, key_id=key_id, model=model)
    except StorageError as exc:
        raise Overloaded("The ledger database is unavailable.", code="ledger_unavailable") from exc
    payload: dict[str, Any] = {
        "since": since,
        "until": until,
        "bucket": bucket_name,
        "bucket_seconds": bucket_s,
        "filters": {"key_id": key_id, "model": model},
        "totals": report.totals.to_json(),
    }
    for column in GROUP_COLUMNS:
        payload[f"by_{column.removesuffix('_id')}"] = _rows(report.by[column], column)
    payload["series"] = {
        "total": _rows(report.series_total, "t"),
        "by_model": _rows(report.series_by_model, "t", "model"),
        "by_key": _rows(report.series_by_key, "t", "key_id"),
    }
    return _json(payload)


async def requests_list(request: Request) -> Response:
    """``GET /admin/requests?key_id=&model=&error_code=&status=&before=&limit=``: newest
    ledger rows first; ``error_code=none`` selects rows without an error."""
    _, db = _backend(request)
    q = request.query_params
    code = _opt(request, "error_code")
    status = _int_param(request, "status", 100, 599)
    limit = _int_param(request, "limit", 1, MAX_REQUESTS) or 100
    before = _time(request, "before", math.inf, time.time()) if q.get("before") else None
    where = RequestFilter(
        key_id=_opt(request, "key_id"),
        model=_opt(request, "model"),
        error_code="" if code == "none" else code,
        status=status,
        before=before,
    )
    try:
        rows = await recent_requests(db, where, limit=limit)
    except StorageError as exc:
        raise Overloaded("The ledger database is unavailable.", code="ledger_unavailable") from exc
    next_before = rows[-1]["started_at"] if len(rows) == limit else None
    return _json({"data": rows, "next_before": next_before})


def _int_param(request: Request, name: str, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{name} must be an integer.", param=name) from exc
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}.", param=name)
    return value

"""Where a request meets the stored responses: the history ``previous_response_id`` names,
and the row a ``store``-d response leaves for the next request."""

from __future__ import annotations

import logging
import time
from typing import Any

from gateway.bounds import valid_response_id
from gateway.context import RequestContext
from gateway.dialects.responses.decode import ResponsesRequest
from gateway.errors import GatewayError, InvalidRequest, NotFound
from gateway.stored import ResponseStore, StoredResponse

log = logging.getLogger("syntic.responses")


def key_id(ctx: RequestContext) -> str:
    # The auth middleware admits no /v1 request without a principal.
    assert ctx.principal is not None
    return ctx.principal.key_id


def not_found(response_id: str, param: str | None = None) -> NotFound:
    # A malformed id is not echoed: it is the client's string, of any size and content.
    shown = repr(response_id) if valid_response_id(response_id) else "(malformed)"
    return NotFound(f"Response with id {shown} not found.", code="response_not_found", param=param)


async def history(
    store: ResponseStore, decoded: ResponsesRequest, ctx: RequestContext, max_bytes: int
) -> list[Any]:
    """The items ``previous_response_id`` continues from: that response's own input
    history and input, then its output (404 when unknown, expired or another key's; 400
    when that conversation is over ``max_bytes``, since every turn stores it again)."""
    previous = decoded.previous_response_id
    if previous is None:
        return []
    found = await store.get(previous, key_id(ctx))
    if found is None:
        raise not_found(previous, "previous_response_id")
    if found.stored_bytes > max_bytes:
        raise InvalidRequest(
            f"The stored conversation that {previous!r} ends is {found.stored_bytes} bytes, "
            f"over this gateway's limit of {max_bytes} (responses_max_history_bytes). Start "
            "a new response and send what it needs as input.",
            code="conversation_too_large",
            param="previous_response_id",
        )
    output = found.response.get("output") or []
    return [*found.input_items, *output]


async def keep(
    store: ResponseStore,
    ctx: RequestContext,
    retention_s: float,
    items: list[Any],
    response: dict[str, Any],
) -> None:
    """Store ``response`` with the items that led to it. A database that cannot take it
    does not fail the request (its answer is already paid for): the id is then not found
    later, and the log says why."""
    now = time.time()
    stored = StoredResponse(
        id=str(response["id"]),
        key_id=key_id(ctx),
        created_at=now,
        expires_at=now + retention_s,
        input_items=items,
        response=response,
    )
    try:
        await store.save(stored)
    except GatewayError as exc:
        log.warning("response %s not stored: %s", stored.id, exc.message)

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
from gateway.offload import Offload
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
    store: ResponseStore,
    decoded: ResponsesRequest,
    ctx: RequestContext,
    max_bytes: int,
    offload: Offload | None = None,
) -> tuple[list[Any], int]:
    """The items ``previous_response_id`` continues from: every earlier response of its
    chain, oldest first, each one's input then its output (404 when unknown, expired or
    another key's; 400 when the conversation is over ``max_bytes``, since a continuation
    loads it whole), and their stored size in bytes. A large one is parsed off the loop
    through ``offload``."""
    previous = decoded.previous_response_id
    if previous is None:
        return [], 0
    owner = key_id(ctx)
    links = await store.chain(previous, owner)
    if not links:
        raise not_found(previous, "previous_response_id")
    size = sum(link_size for _, link_size in links)
    if size > max_bytes:
        raise InvalidRequest(
            f"The stored conversation that {previous!r} ends is {size} bytes, over this "
            f"gateway's limit of {max_bytes} (responses_max_history_bytes). Start a new "
            "response and send what it needs as input.",
            code="conversation_too_large",
            param="previous_response_id",
        )
    rows = await store.load([rid for rid, _ in reversed(links)], owner, offload=offload)
    if len(rows) != len(links):  # a link was deleted between the two reads
        raise not_found(previous, "previous_response_id")
    items: list[Any] = []
    for row in rows:
        items.extend(row.input_items)
        items.extend(row.response.get("output") or [])
    return items, size


async def check_quota(store: ResponseStore, ctx: RequestContext, max_bytes: int) -> None:
    """Refuse to store one more response for a key already holding ``max_bytes``. A store
    that cannot answer refuses nothing here: the save will fail and be logged, as ``keep``
    says, and the answer still goes out."""
    try:
        used = await store.bytes_used(key_id(ctx))
    except GatewayError:
        return
    if used >= max_bytes:
        raise InvalidRequest(
            f"This API key already keeps {used} bytes of stored responses, this gateway's "
            f"limit (responses_max_bytes_per_key is {max_bytes}). Delete stored responses "
            "or send store: false.",
            code="stored_responses_quota_exceeded",
            param="store",
        )


async def keep(
    store: ResponseStore,
    ctx: RequestContext,
    retention_s: float,
    decoded: ResponsesRequest,
    response: dict[str, Any],
    offload: Offload | None = None,
    size: int = 0,
) -> None:
    """Store ``response`` with the request's own input and a link to the response it
    continues. A database that cannot take it does not fail the request (its answer is
    already paid for): the id is then not found later, and the log says why. A large one
    (``size``) is encoded through ``offload``, off the event loop."""
    now = time.time()
    stored = StoredResponse(
        id=str(response["id"]),
        key_id=key_id(ctx),
        created_at=now,
        expires_at=now + retention_s,
        input_items=list(decoded.items),
        response=response,
        previous_id=decoded.previous_response_id,
    )
    try:
        await store.save(stored, offload=offload, size=size)
    except GatewayError as exc:
        log.warning("response %s not stored: %s", stored.id, exc.message)

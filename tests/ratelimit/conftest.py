from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from tests.ratelimit.helpers import REDIS_URL


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A key prefix of our own; its keys are deleted afterwards."""
    value = f"syntic_t_{secrets.token_hex(6)}:"
    yield value
    client = aioredis.Redis.from_url(REDIS_URL)
    keys = [k async for k in client.scan_iter(match=value + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()

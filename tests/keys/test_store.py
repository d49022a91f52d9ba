"""Key store on real databases: create, authenticate, cache, revoke, outages."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.errors import Overloaded
from gateway.keys.secrets import generate_key
from gateway.keys.store import DbKeyStore
from gateway.storage import Database, open_database
from gateway.storage.migrate import apply_migrations

SERVER_SECRET = "test-pepper-" + secrets.token_hex(4)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    handle = open_database(db_url)
    yield handle
    await handle.aclose()


@pytest.mark.parametrize(
    ("kind", "rpm", "tpm", "admin"),
    [("live", 60, 1000, False), ("test", None, None, False), ("admin", None, None, True)],
)
async def test_create_then_authenticate(
    db: Database, kind: str, rpm: int | None, tpm: int | None, admin: bool
) -> None:
    store = DbKeyStore(db, SERVER_SECRET)
    created = await store.create("alice", kind=kind, rpm=rpm, tpm=tpm)  # type: ignore[arg-type]
    assert created.secret.startswith(f"sk_{kind}_")
    principal = await store.authenticate(created.secret)
    assert principal is not None
    assert (principal.key_id, principal.name, principal.rpm, principal.tpm, principal.admin) == (
        created.info.id,
        "alice",
        rpm,
        tpm,
        admin,
    )
    # A second process (fresh cache) finds it in the database too.
    other = DbKeyStore(db, SERVER_SECRET)
    assert await other.authenticate(created.secret) == principal
    assert other.db_lookups == 1


async def test_secret_is_never_stored(db: Database) -> None:
    store = DbKeyStore(db, SERVER_SECRET)
    created = await store.create("bob")
    rows = await db.fetch("SELECT * FROM api_keys WHERE id = ?", (created.info.id,))
    assert len(rows) == 1
    body = created.secret[len("sk_live_") :]
    for value in rows[0]:
        assert body[:12] not in str(value)
    listed = {k.id: k for k in await store.list()}
    assert listed[created.info.id].display_prefix == created.secret[:12]


async def test_malformed_and_unknown_keys(db: Database) -> None:
    clock = Clock()
    store = DbKeyStore(db, SERVER_SECRET, ttl_s=2.0, clock=clock)
    for bad in ["", "sk_live_nope", "Bearer x", generate_key("live")[:-1] + "!"]:
        assert await store.authenticate(bad) is None
    assert store.db_lookups == 0  # malformed: rejected before any query

    unknown = generate_key("live")
    assert await store.authenticate(unknown) is None
    assert await store.authenticate(unknown) is None
    assert store.db_lookups == 1  # negative result cached
    clock.now += 2.5
    assert await store.authenticate(unknown) is None
    assert store.db_lookups == 2  # and re-checked after the TTL


async def test_cached_answers_only_what_authenticate_would_without_waiting(
    db: Database,
) -> None:
    """``cached`` is the auth middleware's no-await path: it must give authenticate's
    answer when that needs no query, and say "ask" otherwise (unknown, expired, revoked
    past the TTL)."""
    admin = DbKeyStore(db, SERVER_SECRET)
    created = await admin.create("frank")
    clock = Clock()
    store = DbKeyStore(db, SERVER_SECRET, ttl_s=2.0, clock=clock)
    assert store.cached("sk_live_nope") == (True, None)  # malformed: no query needed
    assert store.cached(created.secret) == (False, None)  # never seen: ask the database
    principal = await store.authenticate(created.secret)
    assert principal is not None and principal.key_id == created.info.id
    assert store.cached(created.secret) == (True, principal)
    unknown = generate_key("live")
    assert await store.authenticate(unknown) is None
    assert store.cached(unknown) == (True, None)  # negative answer cached
    assert store.db_lookups == 2
    await admin.revoke(created.info.id)
    clock.now += 1.9
    assert store.cached(created.secret) == (True, principal)  # inside the TTL, as authenticate
    clock.now += 0.2
    assert store.cached(created.secret) == (False, None)  # expired: must ask again
    assert store.cached(unknown) == (False, None)
    assert await store.authenticate(created.secret) is None  # revoked
    assert store.cached(created.secret) == (True, None)
    assert store.db_lookups == 3


async def test_wrong_server_secret_refuses(db: Database) -> None:
    created = await DbKeyStore(db, SERVER_SECRET).create("carol")
    assert await DbKeyStore(db, "another-pepper").authenticate(created.secret) is None


async def test_hot_path_is_cached_and_single_flight(db: Database) -> None:
    created = await DbKeyStore(db, SERVER_SECRET).create("dave")
    store = DbKeyStore(db, SERVER_SECRET, ttl_s=60)
    results = await asyncio.gather(*(store.authenticate(created.secret) for _ in range(50)))
    assert {r.key_id if r else None for r in results} == {created.info.id}
    assert store.db_lookups == 1
    for _ in range(100):
        assert await store.authenticate(created.secret) is not None
    assert store.db_lookups == 1


async def test_revocation_reaches_other_replicas_within_ttl(db: Database) -> None:
    admin = DbKeyStore(db, SERVER_SECRET)
    created = await admin.create("erin")
    clock = Clock()
    replica = DbKeyStore(db, SERVER_SECRET, ttl_s=2.0, clock=clock)
    assert await replica.authenticate(created.secret) is not None
    assert await admin.revoke(created.info.id) is True
    assert await admin.authenticate(created.secret) is None  # the revoking process: at once
    clock.now += 1.0
    assert await replica.authenticate(created.secret) is not None  # still inside its TTL
    clock.now += 1.1
    assert await replica.authenticate(created.secret) is None  # TTL passed: refused
    assert await admin.revoke(created.info.id) is False  # already revoked
    assert await admin.revoke("key_doesnotexist") is False
    info = await admin.get(created.info.id)
    assert info is not None and info.revoked


async def test_revocation_real_time_with_short_ttl(db: Database) -> None:
    admin = DbKeyStore(db, SERVER_SECRET)
    created = await admin.create("frank")
    replica = DbKeyStore(db, SERVER_SECRET, ttl_s=0.2)
    assert await replica.authenticate(created.secret) is not None
    await admin.revoke(created.info.id)
    await asyncio.sleep(0.25)
    assert await replica.authenticate(created.secret) is None


async def test_database_outage_serves_recent_keys_only() -> None:
    name = f"syntic_t_{secrets.token_hex(6)}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    db = open_database(url)
    try:
        await apply_migrations(db)
        clock = Clock()
        store = DbKeyStore(db, SERVER_SECRET, ttl_s=2.0, stale_grace_s=60.0, clock=clock)
        good = await store.create("gina")
        revoked = await store.create("hank")
        await store.revoke(revoked.info.id)
        assert await store.authenticate(good.secret) is not None
        assert await store.authenticate(revoked.secret) is None

        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        clock.now += 5.0  # past the TTL: every answer needs the database
        principal = await store.authenticate(good.secret)
        assert principal is not None and principal.key_id == good.info.id  # recently seen
        assert await store.authenticate(revoked.secret) is None  # known bad stays bad
        with pytest.raises(Overloaded) as info:
            await store.authenticate(generate_key("live"))  # never seen: can't tell
        assert info.value.status == 503
        assert info.value.code == "key_store_unavailable"
        clock.now += 120.0  # past the grace period: not "recent" any more
        with pytest.raises(Overloaded):
            await store.authenticate(good.secret)
    finally:
        await db.aclose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_list_hides_revoked_when_asked(db: Database) -> None:
    store = DbKeyStore(db, SERVER_SECRET)
    a = await store.create("ivy", rpm=5)
    b = await store.create("jack", kind="test")
    await store.revoke(b.info.id)
    active = {k.id for k in await store.list(include_revoked=False)}
    every = {k.id: k for k in await store.list()}
    assert a.info.id in active and b.info.id not in active
    assert every[b.info.id].revoked and every[a.info.id].rpm == 5


async def test_cut_link_serves_cached_keys_fast_and_recovers(pg_url: str) -> None:
    from tests.fleet.netcut import NetCut

    name = pg_url.rsplit("/", 1)[1]
    now = [0.0]  # the store's clock: TTLs and the outage retry interval move only on cue
    with NetCut(5432) as link:
        db = open_database(f"postgresql://postgres@127.0.0.1:{link.port}/{name}")
        try:
            store = DbKeyStore(
                db, SERVER_SECRET, ttl_s=0.1, outage_retry_s=0.2, clock=lambda: now[0]
            )
            created = await store.create("kim")
            assert await store.authenticate(created.secret) is not None
            link.cut()
            now[0] += 0.15  # the cached answer is past its TTL
            lookups = store.db_lookups
            for _ in range(20):  # all within the outage retry interval
                assert await store.authenticate(created.secret) is not None
                with pytest.raises(Overloaded):
                    await store.authenticate(generate_key("live"))
            # one lookup found the database gone; no other request waited on it
            assert store.db_lookups - lookups == 1
            link.restore()
            now[0] += 0.25  # past the outage retry interval
            await DbKeyStore(db, SERVER_SECRET).revoke(created.info.id)
            now[0] += 0.15
            assert await store.authenticate(created.secret) is None  # fresh answers again
        finally:
            await db.aclose()

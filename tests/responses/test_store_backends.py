"""``DbResponseStore`` on both backends: per-key rows, expiry never served, purge."""

from __future__ import annotations

from gateway.storage import open_database
from gateway.stored import DbResponseStore, StoredResponse


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _stored(
    rid: str, key: str, created: float, retention: float, previous: str | None = None
) -> StoredResponse:
    return StoredResponse(
        rid,
        key,
        created,
        created + retention,
        [{"type": "message", "role": "user", "content": "hi"}],
        {"id": rid, "object": "response", "output": []},
        previous,
    )


async def test_rows_belong_to_their_key_and_expire(db_url: str) -> None:
    clock = Clock(1_000_000.0)
    db = open_database(db_url)
    store = DbResponseStore(db, retention_s=60.0, clock=clock)
    try:
        await store.save(_stored("resp_a", "key_1", clock.now, 60.0))
        found = await store.get("resp_a", "key_1")
        assert found is not None and found.response["id"] == "resp_a"
        assert found.input_items[0]["content"] == "hi"
        assert await store.get("resp_a", "key_2") is None  # another key's id
        assert not await store.delete("resp_a", "key_2")
        clock.now += 61.0
        assert await store.get("resp_a", "key_1") is None  # expired: never served
        assert not await store.delete("resp_a", "key_1")
    finally:
        await db.aclose()


async def test_delete_and_purge(db_url: str) -> None:
    clock = Clock(2_000_000.0)
    db = open_database(db_url)
    store = DbResponseStore(db, retention_s=60.0, clock=clock, purge_every_s=30.0)
    try:
        await store.save(_stored("resp_old", "key_p", clock.now, 10.0))
        await store.save(_stored("resp_gone", "key_p", clock.now, 60.0))
        assert await store.delete("resp_gone", "key_p")
        assert await store.get("resp_gone", "key_p") is None
        clock.now += 40.0  # resp_old expired; the next write purges (30 s since the last)
        await store.save(_stored("resp_new", "key_p", clock.now, 60.0))
        rows = await db.fetch("SELECT id FROM responses WHERE key_id = ? ORDER BY id", ("key_p",))
        assert [r[0] for r in rows] == ["resp_new"]
    finally:
        await db.aclose()


async def test_a_chain_is_read_by_reference_and_kept_while_its_newest_is(db_url: str) -> None:
    clock = Clock(3_000_000.0)
    db = open_database(db_url)
    store = DbResponseStore(db, retention_s=60.0, clock=clock, purge_every_s=0.0)
    try:
        await store.save(_stored("resp_c1", "key_c", clock.now, 10.0))
        await store.save(_stored("resp_c2", "key_c", clock.now, 20.0, "resp_c1"))
        await store.save(_stored("resp_c3", "key_c", clock.now, 60.0, "resp_c2"))
        await store.save(_stored("resp_x", "key_other", clock.now, 60.0, "resp_c3"))
        links = await store.chain("resp_c3", "key_c")
        assert [rid for rid, _ in links] == ["resp_c3", "resp_c2", "resp_c1"]
        assert all(size > 0 for _, size in links)
        # Another key's row is never a link, even when named as one.
        assert [rid for rid, _ in await store.chain("resp_x", "key_other")] == ["resp_x"]
        clock.now += 30.0  # c1 and c2 expired, c3 kept: the purge keeps its whole chain
        await store.save(_stored("resp_d", "key_c", clock.now, 60.0))
        assert await store.get("resp_c1", "key_c") is None  # expired: never served itself
        loaded = await store.load([rid for rid, _ in reversed(links)], "key_c")
        assert [row.id for row in loaded] == ["resp_c1", "resp_c2", "resp_c3"]
        assert loaded[2].previous_id == "resp_c2"
        [(_, d_size)] = await store.chain("resp_d", "key_c")
        assert await store.bytes_used("key_c") == sum(s for _, s in links) + d_size
        assert await store.delete("resp_c3", "key_c")
        clock.now += 1.0
        await store.save(_stored("resp_e", "key_c", clock.now, 60.0))  # purges the chain
        rows = await db.fetch("SELECT id FROM responses WHERE key_id = ? ORDER BY id", ("key_c",))
        assert [r[0] for r in rows] == ["resp_d", "resp_e"]
    finally:
        await db.aclose()

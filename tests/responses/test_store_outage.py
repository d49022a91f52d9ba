"""The stored-response table unavailable (here: gone from the database): a created
response still gets its answer, and reads are ``503 response_store_unavailable``."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Reply, ScriptedUpstream


@pytest.fixture(scope="module")
def broken(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_gateway(
        tmp_path_factory.mktemp("store-outage"),
        [model_table("strict-model", scripted_upstream_server.base_url)],
    )
    db = Path(gw.env["SYNTIC_DATABASE_URL"].removeprefix("sqlite:///"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TABLE responses")
        conn.commit()
    yield gw
    gw.stop()


def test_answer_still_returned_and_reads_are_503(
    broken: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(Reply(content="still here"))
    headers = {"authorization": f"Bearer {broken.api_key}"}
    url = broken.base_url + "/v1/responses"
    made = httpx.post(url, json={"model": "strict-model", "input": "x"}, headers=headers)
    assert made.status_code == 200
    assert made.json()["output"][0]["content"][0]["text"] == "still here"
    read = httpx.get(f"{url}/{made.json()['id']}", headers=headers)
    assert read.status_code == 503 and "retry-after" in read.headers
    assert read.json()["error"]["code"] == "response_store_unavailable"
    again = httpx.post(
        url,
        json={"model": "strict-model", "input": "y", "previous_response_id": made.json()["id"]},
        headers=headers,
    )
    assert again.status_code == 503
    assert len(upstream.requests) == 1
    assert "not stored" in broken.log()

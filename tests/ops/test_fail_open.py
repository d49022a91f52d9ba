"""Redis configured but unreachable: requests are still served (per-process limits), each
one counted in ``syntic_ratelimit_fail_open_total``, ``syntic_redis_up`` is 0, and
``/readyz`` says why but stays 200 (``"redis": "degraded"``): a Redis outage must not take
every replica of a fleet out of rotation."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.ops.helpers import conforms, scrape
from tests.support.gateway_proc import free_port, model_table, start_gateway
from tests.support.scripted_upstream import Reply, ScriptedUpstream


def test_redis_down_is_served_and_counted(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    gw = start_gateway(
        tmp_path,
        [model_table("m", upstream.base_url)],
        env={"SYNTIC_REDIS_URL": dead},
        key_name="failopen",
    )
    try:
        limited = gw.create_key("limited", "--rpm", "100")
        before = scrape(gw.base_url)
        upstream.queue(*(Reply(content="ok") for _ in range(3)))
        for _ in range(3):
            res = httpx.post(
                gw.base_url + "/v1/chat/completions",
                headers={"authorization": f"Bearer {limited}"},
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                timeout=20,
            )
            assert res.status_code == 200, res.text
        after = scrape(gw.base_url)
        ready = httpx.get(gw.base_url + "/readyz", timeout=10)
    finally:
        gw.stop()
    fail_open = ("syntic_ratelimit_fail_open_total", ())
    assert after[fail_open] - before.get(fail_open, 0) == 3
    allowed = ("syntic_ratelimit_decisions_total", (("decision", "allowed"),))
    assert after[allowed] - before.get(allowed, 0) == 3
    assert after[("syntic_redis_up", ())] == 0  # the limiter saw it down
    assert ready.status_code == 200, ready.text
    body = ready.json()
    conforms(body, "Readiness")
    assert (body["status"], body["redis"], body["reasons"]) == ("ready", "degraded", [])
    assert [n for n, c in body["checks"].items() if not c["ok"]] == ["redis"]
    assert body["degraded"] == [body["checks"]["redis"]["reason"]]

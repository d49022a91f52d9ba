"""The scripted upstream keeps a connection alive across a held answer.

A held step watches the connection for the client leaving; that watch must be over before
the next request is read on the same connection, or the server drops a connection the
gateway's pool believes is open (a spurious 502 in whichever test sends next).
"""

from __future__ import annotations

import http.client
import json
import threading

from tests.support.scripted_upstream import RecordedRequest, Reply, ScriptedUpstream, Step

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def _held(request: RecordedRequest) -> Step:
    return Reply(content="ok", held=True)


def _post(conn: http.client.HTTPConnection) -> tuple[int, bytes]:
    conn.request("POST", "/v1/chat/completions", BODY, {"content-type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def test_a_connection_serves_the_next_request_after_a_held_answer() -> None:
    with ScriptedUpstream(responder=_held) as up:
        conn = http.client.HTTPConnection("127.0.0.1", up.port, timeout=10)
        try:
            answered: list[tuple[int, bytes]] = []
            first = threading.Thread(target=lambda: answered.append(_post(conn)))
            first.start()
            up.wait_for_requests(1)
            up.release()
            first.join(10)
            assert [status for status, _ in answered] == [200]
            status, body = _post(conn)  # the same socket: http.client never reconnects here
        finally:
            conn.close()
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "ok"
    assert len(up.requests) == 2

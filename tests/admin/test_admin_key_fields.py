"""Operator input the storage columns cannot hold gets a 400 naming the field, on SQLite and
PostgreSQL alike (never a 500, never a key one backend keeps and the other refuses)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.keys.fields import MAX_LIMIT
from tests.admin.conftest import AdminGateway

BAD_FIELDS: list[tuple[str, str, str]] = [
    # (raw JSON body, the field `param` must name, why)
    ('{"name": "k", "rpm": 2147483648}', "rpm", "rpm over INTEGER on PostgreSQL"),
    ('{"name": "k", "tpm": 2147483648}', "tpm", "tpm over INTEGER on PostgreSQL"),
    ('{"name": "k", "rpm": 9223372036854775808}', "rpm", "over SQLite's 64-bit INTEGER"),
    ('{"name": "k", "tpm": 18446744073709551616}', "tpm", "past u64: orjson gives a float"),
    ('{"name": "k", "rpm": 0}', "rpm", "zero"),
    ('{"name": "k", "tpm": -5}', "tpm", "negative"),
    ('{"name": "k", "rpm": -2147483649}', "rpm", "under INTEGER"),
    ('{"name": "k", "rpm": 60.0}', "rpm", "a float, even a whole one"),
    ('{"name": "k", "tpm": 1e3}', "tpm", "exponent notation is a float"),
    ('{"name": "k", "rpm": true}', "rpm", "a boolean is not a number"),
    ('{"name": "k", "rpm": "60"}', "rpm", "a string"),
    ('{"name": "k", "tpm": [1]}', "tpm", "an array"),
    ('{"name": "k", "test": 1}', "test", "a number is not a boolean"),
    ('{"name": "a\\u0000b"}', "name", "NUL: PostgreSQL TEXT cannot hold it"),
    ('{"name": "a\\u001b[31mred"}', "name", "a terminal escape"),
    ('{"name": "   "}', "name", "blank"),
    ('{"name": 5}', "name", "not a string"),
]


def post_raw(gw: AdminGateway, body: str) -> httpx.Response:
    headers = {**gw.admin, "content-type": "application/json"}
    return httpx.post(gw.base_url + "/admin/keys", content=body, headers=headers, timeout=20)


def assert_400(res: httpx.Response, param: str) -> None:
    assert res.status_code == 400, res.text
    envelope = res.json()
    assert envelope["error"]["param"] == param, envelope
    assert envelope["error"]["type"] == "invalid_request_error"
    assert envelope["request_id"] == res.headers["x-request-id"]


@pytest.mark.parametrize(("body", "param", "why"), BAD_FIELDS, ids=[w for *_, w in BAD_FIELDS])
def test_a_field_the_column_cannot_hold_is_a_400_naming_it(
    admin_gw: AdminGateway, body: str, param: str, why: str
) -> None:
    before = httpx.get(admin_gw.base_url + "/admin/keys", headers=admin_gw.admin).json()
    assert_400(post_raw(admin_gw, body), param)
    after = httpx.get(admin_gw.base_url + "/admin/keys", headers=admin_gw.admin).json()
    assert after == before  # nothing stored


def test_the_largest_limit_the_column_holds_is_kept_exactly(admin_gw: AdminGateway) -> None:
    res = post_raw(admin_gw, f'{{"name": "edge", "rpm": {MAX_LIMIT}, "tpm": 1}}')
    assert res.status_code == 201, res.text
    key_id = res.json()["key"]["id"]
    listed = httpx.get(admin_gw.base_url + "/admin/keys", headers=admin_gw.admin).json()
    mine = next(k for k in listed["data"] if k["id"] == key_id)
    assert (mine["rpm"], mine["tpm"]) == (2**31 - 1, 1)


@pytest.mark.parametrize(
    ("method", "path", "status", "param"),
    [
        ("DELETE", "/admin/keys/key_%00", 404, "key_id"),
        ("GET", "/admin/requests?key_id=%00", 400, "key_id"),
        ("GET", "/admin/requests?error_code=a%00", 400, "error_code"),
        ("GET", "/admin/usage?model=m%00", 400, "model"),
        ("GET", "/admin/usage?key_id=%00", 400, "key_id"),
    ],
)
def test_a_nul_in_a_lookup_value_is_a_client_error(
    admin_gw: AdminGateway, method: str, path: str, status: int, param: str
) -> None:
    # No stored value holds a NUL, and PostgreSQL refuses one as a query value: the
    # answer must not be a 500 or a "database unavailable" 503.
    res = httpx.request(method, admin_gw.base_url + path, headers=admin_gw.admin, timeout=20)
    assert res.status_code == status, res.text
    body: dict[str, Any] = res.json()
    assert body["error"]["param"] == param

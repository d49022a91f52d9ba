"""Ids the gateway issues are unpredictable: request ids (and the response ids and
idempotency owners made from them) take their random part from the OS CSPRNG, never from
a seeded generator, and a forked worker never repeats its parent's; and the JSON-depth
check rests on orjson's encoder limit, checked here so an upgrade that moves it fails."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import orjson
import pytest

from gateway.bounds import ORJSON_MAX_DEPTH, checked_depth, name_list, too_deep
from gateway.middleware.envelope import new_request_id

ROOT = Path(__file__).resolve().parents[2]
ID_MODULES = [
    "gateway/middleware/envelope.py",
    "gateway/keys/store.py",
    "gateway/keys/secrets.py",
    "gateway/dialects/anthropic/encode.py",
    "gateway/upstream/local/split.py",
    "gateway/upstream/local/adapter.py",
]


@pytest.mark.parametrize("module", ID_MODULES)
def test_id_modules_do_not_use_the_random_module(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert "random" not in imported


def test_request_ids_are_unique_and_carry_64_random_bits() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"req_[0-9a-f]{28}", i) for i in ids)
    tails = {i[-16:] for i in ids}
    assert len(tails) == len(ids)
    # Every hex digit position of the random part varies (a constant or a counter would not).
    assert all(len({t[k] for t in tails}) == 16 for k in range(16))


def test_a_forked_worker_never_repeats_its_parents_ids() -> None:
    new_request_id()  # the parent holds buffered randomness when it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: three ids to the parent, then out without cleanup
        try:
            os.write(write, ",".join(new_request_id() for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode().split(",")
    os.waitpid(pid, 0)
    parent = [new_request_id() for _ in range(3)]
    assert len(child) == 3
    assert {c[-16:] for c in child}.isdisjoint({p[-16:] for p in parent})


def test_orjson_encodes_exactly_the_depth_the_check_assumes() -> None:
    value: list[object] = []
    for _ in range(ORJSON_MAX_DEPTH - 1):
        value = [value]
    orjson.dumps(value)  # ORJSON_MAX_DEPTH levels: encodes
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps([value])


@pytest.mark.parametrize("limit", [8, 128, 200])
def test_the_depth_check_is_exact_at_its_limit(limit: int) -> None:
    for depth, deep in ((limit, False), (limit + 1, True)):
        body = b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
        assert (too_deep(body, orjson.loads(body), limit) is not None) is deep


PAD = b'"pad":"' + b"x" * 5000 + b'",'  # past the size that only counts brackets


# (body around a nest of lists, the levels it adds, the path's start when too deep)
SHAPES = [
    (b"{" + PAD + b'"a":%s}', 1, "a"),  # in a list member: encoded alone
    (b"{" + PAD + b'"o":{"k":%s}}', 2, "o.k"),  # in a dict member
    (b'["' + b"x" * 5000 + b'",%s]', 1, "[1]"),  # in a body that is a list
]


@pytest.mark.parametrize("limit", [8, 128])
@pytest.mark.parametrize(("shape", "outer", "at"), SHAPES)
def test_the_depth_check_is_exact_wherever_the_depth_is(
    limit: int, shape: bytes, outer: int, at: str
) -> None:
    for depth, deep in ((limit, False), (limit + 1, True)):
        levels = depth - outer
        body = shape % (b"[" * levels + b"]" * levels)
        path, members = checked_depth(body, orjson.loads(body), limit)
        assert (path is not None) is deep
        if deep:
            assert path is not None and path.startswith(at) and not members


def test_the_depth_checks_members_are_orjsons_own_encoding() -> None:
    body = orjson.dumps(
        {"model": "m", "messages": [{"content": "é\u2028" * 900}], "tools": [], "o": {"k": [1]}}
    )
    data = orjson.loads(body)
    path, members = checked_depth(body, data, 128)
    assert path is None
    assert list(members) == ["messages", "tools"]  # the lists only
    for key, (value, encoded) in members.items():
        assert value is data[key] and bytes(encoded) == orjson.dumps(value)


def test_the_depth_path_is_bounded_and_masks_keys() -> None:
    key = "sk_live_" + "A" * 49
    body = orjson.dumps({key: {"k" * 500: [[[[[[[[[[]]]]]]]]]]}})
    path = too_deep(body, orjson.loads(body), 8)
    assert path is not None and len(path) <= 512
    assert "sk_live_[REDACTED]" in path and "A" * 49 not in path


def test_name_lists_fit_their_cap_and_count_the_rest() -> None:
    assert name_list(["a", "b"]) == "a,b"
    names = [f"n{i:03d}" for i in range(300)]
    out = name_list(names, max_bytes=100)
    *shown, more = out.split(",")
    assert len(out) <= 100 and shown == names[: len(shown)] and more == f"+{300 - len(shown)}"

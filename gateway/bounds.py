"""Bounds on what a client controls and the gateway stores, logs or echoes.

One home for the rules every edge shares: the length of ``model``, the vendors' rule for
tool names, the cap on response headers that list names, the JSON nesting depth, the
number of input items, and the masking of strings shaped like the gateway's API keys
(the log and the ledger use the same ``redact``). Plain functions over plain values: no
settings, no I/O.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import deque
from collections.abc import Mapping
from itertools import chain, repeat
from types import MappingProxyType
from typing import Any

import orjson

MODEL_MAX_BYTES = 256
TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # OpenAI's and Anthropic's rule
# What a response id the gateway issued can look like (``resp_`` + 28 hex digits today).
RESPONSE_ID_RE = re.compile(r"resp_[A-Za-z0-9]{1,64}")
NAME_LIST_MAX_BYTES = 1024
DEFAULT_MAX_JSON_DEPTH = 128
# The lists inside an item that hold items of their own: a message's or a tool result's
# content blocks, a Responses call output's parts, a chat message's tool calls.
_NESTED_ITEMS = ("content", "output", "tool_calls")
ORJSON_MAX_DEPTH = 254  # orjson.dumps refuses deeper documents (orjson 3.x)
MASK = "[REDACTED]"
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

_SECRET_RE = re.compile(
    r"(?P<key>sk_(?:live|test|admin)_)[A-Za-z0-9]+"
    r"|(?P<bearer>\b(?i:bearer)\s+)[^\s\"',;]+"
)


def redact(text: str) -> str:
    """``text`` with every API key and bearer credential masked.

    >>> redact("Authorization: Bearer abc.def sk_live_9Fq2")
    'Authorization: Bearer [REDACTED] sk_live_[REDACTED]'
    """
    if "sk_" not in text and "bearer" not in text.lower():
        return text  # fast path: the common string has neither
    return _SECRET_RE.sub(lambda m: (m.group("key") or m.group("bearer")) + MASK, text)


def model_problem(model: str) -> str | None:
    """What is wrong with a client's ``model`` string (over ``MODEL_MAX_BYTES`` in UTF-8,
    or a control character, which PostgreSQL's TEXT refuses for NUL), or None."""
    # A str of n code points is at most 4n bytes and at least n: encode only in between.
    n = len(model)
    if n * 4 > MODEL_MAX_BYTES and (
        n > MODEL_MAX_BYTES or len(model.encode("utf-8", "surrogatepass")) > MODEL_MAX_BYTES
    ):
        return f"model must be at most {MODEL_MAX_BYTES} bytes."
    if _CONTROL_RE.search(model) is not None:
        return "model must not contain control characters."
    return None


def valid_tool_name(name: str) -> bool:
    """The vendors' rule for a function name: ``^[a-zA-Z0-9_-]{1,64}$``."""
    return len(name) <= 64 and _valid_short_name(name)


# A client sends the same tool catalogue on every turn; only names of at most 64
# characters are remembered, so the cache holds at most 4,096 x 64 characters.
@functools.lru_cache(maxsize=4096)
def _valid_short_name(name: str) -> bool:
    return TOOL_NAME_RE.fullmatch(name) is not None


def valid_response_id(response_id: str) -> bool:
    """True for a string shaped like a response id: anything else (NUL, non-ASCII, too
    long, another prefix) names no stored response and never reaches a database."""
    return RESPONSE_ID_RE.fullmatch(response_id) is not None


def name_list(names: list[str] | tuple[str, ...], max_bytes: int = NAME_LIST_MAX_BYTES) -> str:
    """``names`` comma-separated for a response header, at most ``max_bytes``: when they do
    not fit, the ones that do and then ``+N`` (N names left out). Names are expected to be
    header-safe already (tool names pass ``valid_tool_name``)."""
    out: list[str] = []
    size = 0
    for i, name in enumerate(names):
        rest = len(names) - i
        tail = len(f",+{rest}")
        if size + len(name) + 1 + (tail if rest > 1 else 0) > max_bytes:
            out.append(f"+{rest}")
            break
        out.append(name)
        size += len(name) + 1
    return ",".join(out)


def not_json_message(exc: Exception) -> str:
    return f"The request body is not valid JSON: {exc}."


def too_many_items_message(limit: int) -> str:
    return (
        f"The request carries more than {limit} items (messages, input items and the "
        "content blocks in them, counted together; max_input_items)."
    )


def too_deep_message(limit: int, at: str) -> str:
    return f"The request body nests JSON deeper than {limit} levels (at {at})."


def items_over(data: Mapping[str, Any], keys: tuple[str, ...], limit: int) -> str | None:
    """The path (``messages[3].content[7]``) of the first item past ``limit``, counting
    the items of the lists at ``keys`` in ``data`` and every content block, output part
    and tool call inside them, at any depth; None when there are at most ``limit``.

    >>> items_over({"messages": [{"content": [{}, {}]}]}, ("messages",), 2)
    'messages[0].content[1]'
    """
    lists = [value for key in keys if type(value := data.get(key)) is list]
    if _at_most(lists, limit):
        return None  # the common case: no path to find
    return _item_over(data, keys, limit)


# ``isinstance(x, dict)`` and ``isinstance(x, list)`` as C callables for ``filter``.
_is_dict = dict.__instancecheck__
_is_list = list.__instancecheck__


def _at_most(lists: list[Any], limit: int) -> bool:
    """Whether the items of ``lists`` and those nested in them number at most ``limit``,
    counted level by level in C loops without the paths. It takes any dict and any list
    where ``_item_over`` takes exact types only: it may count more, never fewer."""
    count = 0
    while lists:
        count += sum(map(len, lists))
        if count > limit:
            return False
        dicts = list(filter(_is_dict, chain.from_iterable(lists)))
        # ``filter(None)`` drops absent members (and empty lists: no items) without a call;
        # a failed ``isinstance`` costs a ``__class__`` look-up each.
        lists = [
            inner
            for name in _NESTED_ITEMS
            for inner in filter(_is_list, filter(None, map(dict.get, dicts, repeat(name))))
        ]
    return True


def _item_over(data: Mapping[str, Any], keys: tuple[str, ...], limit: int) -> str | None:
    count = 0
    queue: deque[tuple[str, list[Any]]] = deque(
        (key, value) for key in keys if type(value := data.get(key)) is list
    )
    while queue:
        where, items = queue.popleft()
        if count + len(items) > limit:
            return f"{where}[{limit - count}]"
        count += len(items)
        for i, item in enumerate(items):
            if type(item) is dict:
                for name in _NESTED_ITEMS:
                    inner = item.get(name)
                    if type(inner) is list and inner:
                        queue.append((f"{where}[{i}].{name}", inner))
    return None


def too_deep(body: bytes, data: Any, limit: int) -> str | None:
    """The path (``a.b[3].c``) of the first value nested deeper than ``limit`` in ``data``
    (the parse of ``body``), or None (``checked_depth`` without the members)."""
    return checked_depth(body, data, limit)[0]


# A body's top-level list members as orjson encoded them for the depth check, each with
# the very value it encodes: an upstream body that still holds that value reuses them.
Members = Mapping[str, tuple[Any, memoryview]]  # key -> (value, its encoding)
NO_MEMBERS: Members = MappingProxyType({})


def checked_depth(body: bytes, data: Any, limit: int) -> tuple[str | None, Members]:
    """``too_deep``'s path or None, and the encoded members of a body that needed the
    encode (a dict's lists, each checked alone, so that its bytes can be reused).

    The check is orjson's own: ``orjson.dumps`` refuses documents deeper than
    ``ORJSON_MAX_DEPTH``, so ``data`` wrapped in ``ORJSON_MAX_DEPTH - limit`` lists
    encodes exactly when ``data`` is at most ``limit`` deep (one C pass, a fraction of the
    parse). Only a body that fails it pays for the walk that finds the path."""
    if len(body) <= 2 * limit:
        return None, NO_MEMBERS  # every level costs two bytes: too short to be too deep
    if len(body) < _COUNTED_BELOW and _openers(body) <= limit:
        return None, NO_MEMBERS  # each level opens a container: fewer openers than levels
    if type(data) is not dict or limit < 2:
        return (None if _wrapped(data, limit) is not None else _deep_path(data, limit)), NO_MEMBERS
    members: dict[str, tuple[Any, memoryview]] = {}
    others: list[Any] = []
    for key, value in data.items():
        if type(value) is list:
            # A member is one level below the body: within ``limit - 1`` on its own.
            encoded = _wrapped(value, limit - 1)
            if encoded is None:
                return _deep_path(data, limit), NO_MEMBERS
            members[key] = (value, encoded)
        elif type(value) is dict:
            others.append(value)
    # The other containers in one list, which adds one level as the body does.
    if others and _wrapped(others, limit) is None:
        return _deep_path(data, limit), NO_MEMBERS
    return None, members


def _wrapped(value: Any, limit: int) -> memoryview | None:
    """``orjson.dumps(value)`` (a view of it) when ``value`` is at most ``limit`` deep,
    else None."""
    top, bottom = _chain(limit)
    bottom[0] = value
    try:
        out = orjson.dumps(top)
    except orjson.JSONEncodeError:
        return None
    finally:
        bottom[0] = None
    wraps = ORJSON_MAX_DEPTH - limit  # the chain's ``[`` ahead of the value, ``]`` after
    return memoryview(out)[wraps : len(out) - wraps]


# Below this size ``too_deep`` counts the body's ``{`` and ``[`` first: two passes that
# cost a fraction of the wrapped encode (whose 126 wrapping levels are a fixed cost), and
# a short body rarely has more openers than levels; a longer one usually does.
_COUNTED_BELOW = 4096


def _openers(body: bytes) -> int:
    """How many ``{`` and ``[`` bytes ``body`` holds (strings included: an upper bound on
    its containers). ``bytes.replace`` finds them with ``memchr`` where ``bytes.count``
    tests every byte."""
    return 2 * len(body) - len(body.replace(b"{", b"")) - len(body.replace(b"[", b""))


# The lists ``too_deep`` wraps ``data`` in, built once per thread and limit: built per
# request they cost more than parsing a small body. (outermost, innermost) by limit.
class _Chains(threading.local):
    def __init__(self) -> None:
        self.by_limit: dict[int, tuple[list[Any], list[Any]]] = {}


_chains = _Chains()


def _chain(limit: int) -> tuple[list[Any], list[Any]]:
    built = _chains.by_limit
    chain = built.get(limit)
    if chain is None:
        bottom: list[Any] = [None]
        top = bottom
        for _ in range(ORJSON_MAX_DEPTH - limit - 1):
            top = [top]
        chain = built[limit] = (top, bottom)
    return chain


def _deep_path(data: Any, limit: int) -> str | None:
    # (value, its depth, its index in trail) on an explicit stack: a recursive walk would
    # hit Python's own recursion limit on exactly the bodies it is meant to stop.
    trail: list[tuple[int, str | int]] = []
    stack: list[tuple[Any, int, int]] = [(data, 1, -1)]
    while stack:
        value, depth, at = stack.pop()
        if depth > limit:
            return _path(trail, at)
        if type(value) is dict:
            for key, child in value.items():
                if type(child) is dict or type(child) is list:
                    trail.append((at, key))
                    stack.append((child, depth + 1, len(trail) - 1))
        elif type(value) is list:
            for index, child in enumerate(value):
                if type(child) is dict or type(child) is list:
                    trail.append((at, index))
                    stack.append((child, depth + 1, len(trail) - 1))
    return None


def _path(trail: list[tuple[int, str | int]], at: int) -> str:
    parts: list[str | int] = []
    while at >= 0:
        at, key = trail[at]
        parts.append(key)
    out = ""
    for part in reversed(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if len(part) <= 64 else part[:61] + "..."
            out += f".{name}" if out else name
    if len(out) > 512:  # the deepest end says where; the param stays bounded
        out = "..." + out[-509:]
    return redact(out) or "body"

"""The engine's node table, kept packed: one plain tuple per schema location.

``_ir`` builds it, ``_interp`` walks it and ``_codegen`` reads it through ``Table.node``,
which unpacks one ``Node`` (a readable, frozen view) at a time and drops it again.

Why tuples: the cyclic garbage collector visits every container object
at each full collection, and stops tracking a tuple once everything in it is a string,
number, ``None`` or another untracked tuple. A 240 KiB schema has ~5,000 locations: as
``Node`` objects (with a frozenset of types each) they were ~10,000 objects that every
full collection walked for as long as the schema stayed cached, and that a compile in a
worker thread kept alive for a quarter of a second; packed, they cost nothing after one
young collection. The compiled ``pattern`` searchers (functions, always tracked) live in
one side table, ``Table.regex``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from validator._regex import Searcher

__all__ = ["TYPE_ORDER", "Node", "Packed", "Table", "pack"]

TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")

Packed = tuple[Any, ...]
# Field positions in a packed node; absent keyword groups are None.
FALSE, TYPES, REF, OBJECT, ARRAY, ANY_OF, ENUM, CONST, STRING, NUMBER, ALL_OF, ONE_OF = range(12)
_TYPE_SETS: dict[tuple[str, ...], frozenset[str]] = {}


@dataclass(frozen=True, slots=True)
class Node:
    """One schema location, unpacked. ``None`` means "keyword absent"; ids index the table."""

    false: bool = False
    types: frozenset[str] | None = None
    ref: int | None = None
    properties: tuple[tuple[str, int], ...] = ()
    required: tuple[str, ...] = ()
    additional: int | None = None
    items: int | None = None
    any_of: tuple[int, ...] | None = None
    all_of: tuple[int, ...] | None = None
    one_of: tuple[int, ...] | None = None
    enum: tuple[Any, ...] | None = None
    has_const: bool = False
    const: Any = None
    pattern: str | None = None
    regex: Searcher | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    multiple_of: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None

    @property
    def trivial(self) -> bool:
        """True when the node accepts every instance."""
        return self == TRUE


TRUE = Node()
FALSE_NODE = Node(false=True)


def type_set(names: list[str] | tuple[str, ...]) -> frozenset[str]:
    """A shared frozenset of type names (at most 127 distinct ones exist)."""
    key = tuple(sorted(names))
    found = _TYPE_SETS.get(key)
    if found is None:
        found = _TYPE_SETS.setdefault(key, frozenset(names))
    return found


def pack(node: Node) -> Packed:
    """``node`` as a tuple of untracked values (a const/enum may hold JSON containers)."""
    types = None if node.types is None else tuple(t for t in TYPE_ORDER if t in node.types)
    has_object = bool(node.properties or node.required) or node.additional is not None
    has_array = node.items is not None or node.min_items is not None or node.max_items is not None
    strings = (node.min_length, node.max_length, node.pattern, node.format)
    numbers = (
        node.minimum,
        node.maximum,
        node.exclusive_minimum,
        node.exclusive_maximum,
        node.multiple_of,
    )
    return (
        node.false,
        types,
        node.ref,
        (node.properties, node.required, node.additional) if has_object else None,
        (node.min_items, node.max_items, node.items) if has_array else None,
        node.any_of,
        node.enum,
        (node.const,) if node.has_const else None,
        strings if any(v is not None for v in strings) else None,
        numbers if any(v is not None for v in numbers) else None,
        node.all_of,
        node.one_of,
    )


TRUE_PACKED = pack(TRUE)


@dataclass(frozen=True, slots=True)
class Table:
    """A schema's packed nodes (node 0 is the root), its pattern searchers by node id, and
    where each node sits in the schema."""

    nodes: tuple[Packed, ...]
    regex: dict[int, Searcher] = field(default_factory=dict)
    # Each node's place in the schema, a JSON pointer (``/properties/a``): for errors.
    locations: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.nodes)

    def trivial(self, nid: int) -> bool:
        """True when node ``nid`` accepts every instance."""
        return self.nodes[nid] == TRUE_PACKED

    def node(self, nid: int) -> Node:
        """Node ``nid`` unpacked (a fresh object each call: do not keep it around)."""
        false, types, ref, obj, arr, any_of, enum, const, strings, numbers, all_of, one_of = (
            self.nodes[nid]
        )
        properties, required, additional = obj if obj is not None else ((), (), None)
        min_items, max_items, items = arr if arr is not None else (None, None, None)
        min_length, max_length, pattern, fmt = strings if strings is not None else (None,) * 4
        minimum, maximum, exclusive_minimum, exclusive_maximum, multiple = (
            numbers if numbers is not None else (None,) * 5
        )
        return Node(
            false=false,
            types=None if types is None else type_set(types),
            ref=ref,
            properties=properties,
            required=required,
            additional=additional,
            items=items,
            any_of=any_of,
            all_of=all_of,
            one_of=one_of,
            enum=enum,
            has_const=const is not None,
            const=None if const is None else const[0],
            pattern=pattern,
            regex=self.regex.get(nid),
            min_length=min_length,
            max_length=max_length,
            format=fmt,
            minimum=minimum,
            maximum=maximum,
            exclusive_minimum=exclusive_minimum,
            exclusive_maximum=exclusive_maximum,
            multiple_of=multiple,
            min_items=min_items,
            max_items=max_items,
        )

"""The lint walk: iterative, keyword-driven and bounded; collects every issue and count."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from validator._dialect import Dialect
from validator._issues import Issue, IssueCode
from validator._limits import LimitCount, Limits, serialized_size, value_chars
from validator._lint_rules import (
    _CONSTRAINING,
    _DEFS_KEYS,
    _FLAGS,
    _KNOWN_UNSUPPORTED,
    _NON_NEGATIVE_INT,
    _NUMBER,
    ANNOTATIONS,
    DIALECT_FORMATS,
    ENGINE_FORMATS,
    FREE_ANNOTATIONS,
    SCHEMA_URIS,
    TYPES,
    _beside_ref,
    _definition_ref,
    _has_type,
    _is_non_negative_int,
    _is_number,
    _is_object_schema,
    _kind,
    _primitive,
    _show,
)
from validator._paths import join, join_index, join_name
from validator._regex import check_pattern

_NODE_BUDGET = 100_000
_Child = Callable[..., None]


@dataclass(slots=True)
class _Frame:
    node: Any
    path: str
    obj_depth: int
    depth: int


@dataclass(slots=True)
class _Walk:
    schema: Any
    prefix: str
    limits: Limits
    strict: bool
    dialect: Dialect = "openai"
    local: bool = False  # ``enforced_locally``
    issues: list[Issue] = field(default_factory=list)
    properties: int = 0
    max_obj_depth: int = 0
    enum_values: int = 0
    string_chars: int = 0
    large_enum_chars: int = 0
    anyof_branches: int = 0
    defs: int = 0
    pattern_length: int = 0
    max_depth_seen: int = 0
    size: int = 0
    def_names: frozenset[str] = frozenset()

    def add(self, code: IssueCode, param: str, message: str) -> None:
        if code == "invalid_tool_schema" or self.strict:
            self.issues.append(Issue(code, param, message))

    def bad(self, param: str, message: str) -> None:
        self.add("invalid_tool_schema", param, message)

    def run(self) -> list[Issue]:
        root, lim = self.schema, self.limits
        self.size = serialized_size(root, lim.max_serialized_bytes)
        if not isinstance(root, Mapping):
            self.bad(self.prefix, f"schema must be a JSON object, not {_kind(root)}")
            return self.issues
        names: set[str] = set()
        for defs_key in _DEFS_KEYS:
            defs = root.get(defs_key)
            if isinstance(defs, Mapping):
                names.update(f"{defs_key}/{k}" for k in defs if isinstance(k, str))
        self.def_names = frozenset(names)
        if root.get("type") != "object" and not self._root_ref_to_object(root):
            self.add("schema_not_strict", self.prefix, 'the root schema must be "type": "object"')
        self._totals_before()
        stack = [_Frame(root, self.prefix, 0, 0)]
        visited = 0
        while stack:
            frame = stack.pop()
            visited += 1
            if visited > _NODE_BUDGET:
                self.bad(self.prefix, f"schema has more than {_NODE_BUDGET} subschemas")
                break
            children = self._node(frame)
            stack.extend(reversed(children))
        self._totals_after()
        return self.issues

    def _root_ref_to_object(self, root: Mapping[Any, Any]) -> bool:
        """Anthropic's strict mode takes a root ``$ref`` into ``$defs`` (pydantic's output
        for a recursive model) when the definition is an object schema."""
        if self.dialect != "anthropic" or "type" in root:
            return False
        ref = root.get("$ref")
        found = _definition_ref(ref) if isinstance(ref, str) else None
        if not found or not found[1]:
            return False
        defs = root.get(found[0])
        target = defs.get(found[1]) if isinstance(defs, Mapping) else None
        return isinstance(target, Mapping) and target.get("type") == "object"

    def counts(self) -> tuple[LimitCount, ...]:
        lim = self.limits
        pairs = [
            ("properties", self.properties, lim.max_properties),
            ("nesting_depth", self.max_obj_depth, lim.max_depth),
            ("enum_values", self.enum_values, lim.max_enum_values),
            ("string_chars", self.string_chars, lim.max_string_chars),
            ("large_enum_chars", self.large_enum_chars, lim.max_large_enum_chars),
            ("serialized_bytes", self.size, lim.max_serialized_bytes),
            ("anyof_branches", self.anyof_branches, lim.max_anyof_branches),
            ("defs", self.defs, lim.max_defs),
            ("pattern_length", self.pattern_length, lim.max_pattern_length),
            ("schema_depth", self.max_depth_seen, lim.max_schema_depth),
        ]
        return tuple(LimitCount(n, v, limit) for n, v, limit in pairs)

    def _totals_before(self) -> None:
        lim = self.limits
        if self.size > lim.max_serialized_bytes:
            self.bad(
                self.prefix,
                f"serialized schema is over {lim.max_serialized_bytes} bytes "
                "(limit max_serialized_bytes)",
            )

    def _totals_after(self) -> None:
        lim, p = self.limits, self.prefix
        totals = [
            (self.properties, lim.max_properties, "object properties", "max_properties"),
            (self.enum_values, lim.max_enum_values, "enum values", "max_enum_values"),
            (
                self.string_chars,
                lim.max_string_chars,
                "characters in property names, definition names, enum and const values",
                "max_string_chars",
            ),
            (self.anyof_branches, lim.max_anyof_branches, "anyOf branches", "max_anyof_branches"),
        ]
        for value, limit, what, name in totals:
            if value > limit:
                self.bad(p, f"schema has {value} {what}; the limit is {limit} ({name})")

    # -- one schema node -------------------------------------------------------------

    def _node(self, f: _Frame) -> list[_Frame]:
        node, path = f.node, f.path
        self.max_depth_seen = max(self.max_depth_seen, f.depth)
        if type(node) is not dict and not isinstance(node, Mapping):
            self.bad(path, f"a subschema must be a JSON object, not {_kind(node)}")
            return []
        is_object = _is_object_schema(node)
        obj_depth = f.obj_depth + (1 if is_object else 0)
        self.max_obj_depth = max(self.max_obj_depth, obj_depth)
        if is_object and obj_depth == self.limits.max_depth + 1:
            self.bad(
                path,
                f"object nesting depth {obj_depth} exceeds the limit of "
                f"{self.limits.max_depth} levels (max_depth)",
            )
        if is_object and node.get("additionalProperties") is not False:
            self.add(
                "schema_not_strict", path, 'an object schema must set "additionalProperties": false'
            )
        if f.depth >= self.limits.max_schema_depth:
            self.bad(
                path,
                f"subschemas nested deeper than {self.limits.max_schema_depth} levels "
                "(limit max_schema_depth)",
            )
            return []
        children: list[_Frame] = []

        def child(sub: Any, sub_path: str, base: int | None = None) -> None:
            depth = obj_depth if base is None else base
            children.append(_Frame(sub, sub_path, depth, f.depth + 1))

        is_root = f.depth == 0 and path == self.prefix
        has_ref = "$ref" in node
        before = len(self.issues)
        for key, value in node.items():
            if not isinstance(key, str):
                self.bad(path, f"keyword {key!r} is not a string")
                continue
            kpath = join(path, key)
            if has_ref and not _beside_ref(key):
                self.bad(kpath, f'"{key}" is not allowed beside "$ref" (only annotations)')
                continue
            self._keyword(key, value, kpath, is_root, child)
        if self.strict and len(self.issues) == before:  # else its own issue says enough
            self._constrains(node, path)
            if is_object and self.dialect == "openai":
                self._required(node, path)
        return children

    def _constrains(self, node: Mapping[Any, Any], path: str) -> None:
        """A strict schema must constrain every value: OpenAI refuses an empty schema, and
        one would let a strict tool return anything there."""
        if not any(k in node for k in _CONSTRAINING):
            self.add(
                "schema_not_strict",
                path,
                'a strict schema must constrain its value: give it "type", "enum", "const", '
                '"anyOf" or "$ref"',
            )
        elif _has_type(node, "array") and "items" not in node:
            self.add("schema_not_strict", path, 'an array schema must set "items"')

    def _keyword(self, key: str, value: Any, kpath: str, is_root: bool, child: _Child) -> None:
        if key == "type":
            self._type(value, kpath)
        elif key == "properties":
            if not isinstance(value, Mapping):
                self.bad(kpath, f'"properties" must be an object, not {_kind(value)}')
                return
            self.properties += len(value)
            for name, sub in value.items():
                self.string_chars += len(name) if isinstance(name, str) else 0
                child(sub, join_name(kpath, name))
        elif key == "required":
            self._required_value(value, kpath)
        elif key == "additionalProperties":
            if isinstance(value, Mapping):
                child(value, kpath)
            elif not isinstance(value, bool):
                self.bad(
                    kpath, f'"additionalProperties" must be a boolean or schema, not {_kind(value)}'
                )
        elif key == "items":
            if isinstance(value, list):
                self.bad(kpath, 'tuple "items" (an array of schemas) is not supported')
            else:
                child(value, kpath)
        elif key == "anyOf" or (key in ("allOf", "oneOf") and self._composition(key, kpath)):
            if not isinstance(value, list) or not value:
                self.bad(kpath, f'"{key}" must be a non-empty array of schemas')
                return
            self.anyof_branches += len(value)
            for i, sub in enumerate(value):
                child(sub, join_index(kpath, i))
        elif key in ("allOf", "oneOf"):
            pass  # _composition reported it
        elif key == "enum":
            self._enum(value, kpath)
        elif key == "const":
            self.string_chars += value_chars(value, self.limits.max_string_chars)
            if not _primitive(value):
                self._anthropic_lacks(
                    key, kpath, "a const that is not a string, number, boolean or null"
                )
        elif key == "$defs" or (key == "definitions" and self._definitions(kpath)):
            self._defs(key, value, kpath, is_root, child)
        elif key == "definitions":
            pass  # _definitions reported it
        elif key == "$ref":
            self._ref(value, kpath)
        elif key in ANNOTATIONS or key == "$comment":
            if not isinstance(value, str):
                self.bad(kpath, f'"{key}" must be a string, not {_kind(value)}')
        elif key in FREE_ANNOTATIONS:
            self._annotation(key, value, kpath)
        elif key == "$schema":
            if not is_root or not isinstance(value, str) or value not in SCHEMA_URIS:
                self.bad(
                    kpath,
                    '"$schema" is only accepted at the root, as the draft 2020-12 or draft-07 URI',
                )
        elif key == "pattern":
            self._pattern(value, kpath)
            self._anthropic_lacks(key, kpath)
        elif key == "format":
            vendor = self.strict and not self.local
            formats = DIALECT_FORMATS[self.dialect] if vendor else ENGINE_FORMATS
            if not isinstance(value, str) or value not in formats:
                self.bad(
                    kpath,
                    f"unsupported format {_show(value)}; supported: {', '.join(sorted(formats))}",
                )
        elif key in _NON_NEGATIVE_INT:
            if not _is_non_negative_int(value):
                self.bad(kpath, f'"{key}" must be a non-negative integer')
            elif key != "minItems" or value not in (0, 1):
                self._anthropic_lacks(
                    key, kpath, "minItems other than 0 or 1" if key == "minItems" else None
                )
        elif key in _NUMBER:
            if not _is_number(value):
                self.bad(kpath, f'"{key}" must be a number')
            else:
                self._anthropic_lacks(key, kpath)
        elif key == "multipleOf":
            if not _is_number(value) or value <= 0:
                self.bad(kpath, '"multipleOf" must be a number greater than 0')
            else:
                self._anthropic_lacks(key, kpath)
        elif key in _KNOWN_UNSUPPORTED:
            self.bad(kpath, f'"{key}" is not supported in strict mode')
        else:
            self.bad(kpath, f'unknown keyword "{key}" is not supported in strict mode')

    def _vendor_rules(self, dialect: Dialect) -> bool:
        """Whether ``dialect``'s own keyword rules apply (not only its structure)."""
        return self.strict and self.dialect == dialect and not self.local

    def _anthropic_lacks(self, key: str, kpath: str, what: str | None = None) -> None:
        """A keyword Anthropic's strict mode lacks, as its SDK's ``transform_schema``
        applies it: that function (and ``anthropic_copy``) moves it into the description."""
        if self._vendor_rules("anthropic"):
            subject = what or f'"{key}"'
            self.bad(
                kpath,
                f"{subject} is not supported by Anthropic's strict mode (anthropic_copy "
                "moves it into the description)",
            )

    def _composition(self, key: str, kpath: str) -> bool:
        """Whether ``allOf``/``oneOf`` is accepted here; reports it when not. The engine
        checks both; OpenAI's strict mode takes neither, Anthropic's ``allOf`` (``oneOf``
        only through ``anthropic_copy``, which sends it as ``anyOf``)."""
        if not self.strict:
            return True
        if self.dialect == "anthropic" and (key == "allOf" or self.local):
            return True
        if self.dialect == "anthropic":
            self.bad(
                kpath,
                '"oneOf" is not supported by Anthropic\'s strict mode '
                '(anthropic_copy sends it as "anyOf")',
            )
        else:
            self.bad(kpath, f'"{key}" is not supported in strict mode')
        return False

    def _definitions(self, kpath: str) -> bool:
        """Whether draft-07's ``definitions`` is accepted: by the engine and Anthropic's
        strict mode, not OpenAI's (which takes ``$defs``)."""
        if self.strict and self.dialect == "openai":
            self.bad(kpath, '"definitions" is not supported in strict mode (use "$defs")')
            return False
        return True

    def _annotation(self, key: str, value: Any, kpath: str) -> None:
        if key == "examples" and not isinstance(value, list):
            self.bad(kpath, f'"examples" must be an array, not {_kind(value)}')
        elif key in _FLAGS and not isinstance(value, bool):
            self.bad(kpath, f'"{key}" must be a boolean, not {_kind(value)}')

    def _type(self, value: Any, kpath: str) -> None:
        if isinstance(value, str):
            if value not in TYPES:
                self.bad(
                    kpath,
                    f"unknown type {_show(value)}; expected one of {', '.join(sorted(TYPES))}",
                )
            return
        if not isinstance(value, list) or not value:
            self.bad(kpath, '"type" must be a type name or a non-empty array of type names')
            return
        seen: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, str) or item not in TYPES:
                self.bad(join_index(kpath, i), f"unknown type {_show(item)}")
            elif item in seen:
                self.bad(join_index(kpath, i), f"duplicate type {_show(item)}")
            else:
                seen.add(item)

    def _required_value(self, value: Any, kpath: str) -> None:
        if not isinstance(value, list):
            self.bad(kpath, f'"required" must be an array of property names, not {_kind(value)}')
            return
        seen: set[str] = set()
        for i, name in enumerate(value):
            if not isinstance(name, str):
                self.bad(
                    join_index(kpath, i), f"a required entry must be a string, not {_kind(name)}"
                )
            elif name in seen:
                self.bad(join_index(kpath, i), f'duplicate required entry "{name}"')
            else:
                seen.add(name)

    def _required(self, node: Mapping[Any, Any], path: str) -> None:
        props = node.get("properties")
        if not isinstance(props, Mapping):
            return
        required = node.get("required")
        listed = (
            {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        )
        for name in props:
            if name not in listed:
                self.add(
                    "schema_not_strict",
                    join(path, "required"),
                    f'property "{name}" is not listed in "required" (make it optional '
                    'with a union that includes null, e.g. "type": ["string", "null"])',
                )

    def _enum(self, value: Any, kpath: str) -> None:
        if not isinstance(value, list) or not value:
            self.bad(kpath, '"enum" must be a non-empty array')
            return
        if not all(_primitive(v) for v in value):
            self._anthropic_lacks(
                "enum", kpath, "an enum with values that are not strings, numbers, booleans or null"
            )
        lim = self.limits
        self.enum_values += len(value)
        chars = [value_chars(v, lim.max_string_chars) for v in value]
        self.string_chars += sum(chars)
        if len(value) > lim.large_enum_threshold:
            string_chars = sum(len(v) for v in value if isinstance(v, str))
            self.large_enum_chars = max(self.large_enum_chars, string_chars)
            if string_chars > lim.max_large_enum_chars:
                self.bad(
                    kpath,
                    f"an enum of {len(value)} values (more than {lim.large_enum_threshold}) has "
                    f"{string_chars} characters; the limit is {lim.max_large_enum_chars} "
                    "(max_large_enum_chars)",
                )

    def _defs(self, key: str, value: Any, kpath: str, is_root: bool, child: _Child) -> None:
        if not is_root:
            self.bad(kpath, f'"{key}" is only supported at the root of the schema')
            return
        if not isinstance(value, Mapping):
            self.bad(kpath, f'"{key}" must be an object, not {_kind(value)}')
            return
        self.defs += len(value)
        if len(value) > self.limits.max_defs:
            self.bad(
                kpath,
                f"schema has {len(value)} definitions; "
                f"the limit is {self.limits.max_defs} (max_defs)",
            )
        for name, sub in value.items():
            self.string_chars += len(name) if isinstance(name, str) else 0
            # Each definition starts again at object level 0 (refs are not followed).
            child(sub, join_name(kpath, name), 0)

    def _ref(self, value: Any, kpath: str) -> None:
        if not isinstance(value, str):
            self.bad(kpath, f'"$ref" must be a string, not {_kind(value)}')
            return
        found = _definition_ref(value)
        if found is None:
            self.bad(
                kpath,
                'only local references ("#" or "#/$defs/<name>") are supported, '
                f"not {_show(value)}",
            )
        elif found[1] and f"{found[0]}/{found[1]}" not in self.def_names:
            self.bad(kpath, f"$ref {_show(value)} points at a missing definition")

    def _pattern(self, value: Any, kpath: str) -> None:
        if not isinstance(value, str):
            self.bad(kpath, f'"pattern" must be a string, not {_kind(value)}')
            return
        self.pattern_length = max(self.pattern_length, len(value))
        if len(value) > self.limits.max_pattern_length:
            self.bad(
                kpath,
                f"pattern is {len(value)} characters; the limit is "
                f"{self.limits.max_pattern_length} (max_pattern_length)",
            )
            return
        problem = check_pattern(value)
        if problem is not None:
            self.bad(kpath, f"pattern not supported: {problem}")

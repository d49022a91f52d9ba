"""Issue ``param`` paths and local ``$ref`` parsing, shared by lint, strictify and the engine.

Path grammar (the ``param`` of an :class:`~validator.Issue`)::

    tools[0].function.parameters.properties.note
    properties.items.items.anyOf[1]
    $defs.Node.properties.next
    properties["a.b"].type          # a name that is not a simple identifier

* Segments follow schema *keywords*, so a property literally named ``default`` appears as
  ``properties.default`` and is never taken for the ``default`` keyword.
* A property or definition name matching ``[A-Za-z_$][A-Za-z0-9_$-]*`` is appended with a
  dot; any other name (empty, dots, spaces, brackets, quotes, non-ASCII, ...) is appended
  as ``["..."]`` with JSON string quoting, so every path is unambiguous.
* Array positions use ``[i]``. With an empty prefix there is no leading dot.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

_SIMPLE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*\Z")


def join(path: str, keyword: str) -> str:
    """Append a schema keyword (always a simple name) to ``path``."""
    return f"{path}.{keyword}" if path else keyword


def join_name(path: str, name: object) -> str:
    """Append a property or definition ``name``, quoting it unless it is a simple name."""
    if isinstance(name, str) and _SIMPLE.match(name):
        return join(path, name)
    text = name if isinstance(name, str) else str(name)
    return f"{path}[{json.dumps(text, ensure_ascii=False)}]"


def join_index(path: str, index: int) -> str:
    """Append an array position."""
    return f"{path}[{index}]"


def parse_local_ref(ref: str) -> str | None:
    """Return the ``$defs`` name a supported local ``$ref`` points at, ``""`` for ``"#"``.

    Supported: ``"#"`` (the root, for recursion) and ``"#/$defs/<name>"`` where ``<name>``
    is JSON-pointer escaped (``~0``, ``~1``) and may be percent-encoded. Anything else
    (remote URLs, relative files, anchors, deeper pointers) returns ``None``.

    >>> parse_local_ref("#/$defs/Node")
    'Node'
    >>> parse_local_ref("https://example.com/s.json") is None
    True
    """
    if ref == "#":
        return ""
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        return None
    token = unquote(ref[len(prefix) :])
    if "/" in token or not token:
        return None
    if re.search(r"~(?![01])", token):
        return None
    return token.replace("~1", "/").replace("~0", "~")


def ref_to(name: str) -> str:
    """The ``$ref`` string for a root definition ``name`` (inverse of :func:`parse_local_ref`)."""
    escaped = name.replace("~", "~0").replace("/", "~1")
    return f"#/$defs/{escaped}"

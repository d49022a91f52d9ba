"""Command line: ``python -m validator lint|strictify|validate``.

Exit codes: 0 ok, 1 the schema has issues / cannot be projected / the instance is invalid,
2 usage or I/O error (missing file, unparseable JSON). Issues print one per line as
``code param: message`` (param ``(root)`` when empty); validation errors print their message.

Examples::

    python -m validator lint tool.json
    python -m validator lint --path 'tools[0].function.parameters' tool.json
    python -m validator strictify tool.json > strict.json
    python -m validator validate tool.json args.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from validator._issues import Issue, SchemaError
from validator._lint import lint_report
from validator._strictify import strictify

OK, INVALID, USAGE = 0, 1, 2


class _Usage(Exception):
    """A bad argument or unreadable input: exit code 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports usage errors itself, with code 2
        return int(exc.code) if isinstance(exc.code, int) else USAGE
    try:
        result: int = args.func(args)
    except _Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m validator", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("lint", help="check a schema against the strict subset")
    p.add_argument("file")
    p.add_argument("--path", default="", help="param prefix, e.g. tools[0].function.parameters")
    p.add_argument("--counts", action="store_true", help="also print the limits counted")
    p.set_defaults(func=_lint)
    p = sub.add_parser("strictify", help="project a schema onto the strict subset")
    p.add_argument("file")
    p.add_argument("--path", default="", help="param prefix for refusals")
    p.set_defaults(func=_strictify)
    p = sub.add_parser("validate", help="validate an instance against a schema")
    p.add_argument("schema")
    p.add_argument("instance")
    p.set_defaults(func=_validate)
    return parser


def _read(path: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise _Usage(f"cannot read {path}: {exc.strerror or exc}") from exc


def _load(path: str) -> Any:
    try:
        return orjson.loads(_read(path))
    except orjson.JSONDecodeError as exc:
        raise _Usage(f"{path} is not valid JSON: {exc}") from exc


def _print_issues(issues: Sequence[Issue]) -> None:
    for issue in issues:
        print(f"{issue.code} {issue.param or '(root)'}: {issue.message}")


def _lint(args: argparse.Namespace) -> int:
    report = lint_report(_load(args.file), path=args.path)
    _print_issues(report.issues)
    if args.counts:
        for c in report.counts:
            print(f"count {c.name}: {c.value} / {c.limit}")
    if report.ok:
        print("ok: no issues", file=sys.stderr)
    return OK if report.ok else INVALID


def _strictify(args: argparse.Namespace) -> int:
    result = strictify(_load(args.file), path=args.path)
    if result.schema is None:
        _print_issues(result.refusals)
        return INVALID
    sys.stdout.write(orjson.dumps(result.schema, option=orjson.OPT_INDENT_2).decode() + "\n")
    for change in result.changes:
        print(f"changed {change}", file=sys.stderr)
    return OK


def _validate(args: argparse.Namespace) -> int:
    from validator import compile as compile_schema  # the engine, via the public API

    schema = _load(args.schema)
    raw = _read(args.instance)
    try:
        compiled = compile_schema(schema)
    except SchemaError as exc:
        _print_issues(exc.issues)
        return INVALID
    errors = compiled.validate_json(raw)
    for error in errors:
        print(error.message)
    if not errors:
        print("ok: valid", file=sys.stderr)
    return INVALID if errors else OK


if __name__ == "__main__":
    sys.exit(main())

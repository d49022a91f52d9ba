"""`syntic` command line: serve | migrate | keys ... | usage | models ...

Each subcommand lives in ``gateway.commands.<name>`` and exposes
``register(subparsers)`` which adds its parser and sets ``func`` (returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from gateway.settings import ConfigError

_COMMANDS = ("serve", "migrate", "keys", "usage", "models")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="syntic", description="Syntic gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"gateway.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"gateway.commands.{name}":
                continue  # not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except ConfigError as exc:  # the operator's config: a message, not a traceback
        print(f"syntic: config error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

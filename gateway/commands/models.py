"""``syntic models list | install ID [--verify]``: the local model catalogue."""

from __future__ import annotations

import argparse
import os
import sys

from gateway.upstream.local.catalog import (
    LOCAL_MODELS,
    LocalModelError,
    install,
    is_installed,
    model_file,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("models", help="local models: list, install")
    sub = parser.add_subparsers(dest="models_command", required=True)
    lister = sub.add_parser("list", help="known local models and whether they are installed")
    lister.set_defaults(func=_list)
    installer = sub.add_parser("install", help="install and verify a local model's weights")
    installer.add_argument("model_id", choices=sorted(LOCAL_MODELS))
    installer.add_argument(
        "--verify", action="store_true", help="re-hash an installed file instead of trusting it"
    )
    installer.set_defaults(func=_install)


def _list(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    for spec in LOCAL_MODELS.values():
        state = "installed" if is_installed(spec, env) else "not installed"
        print(f"{spec.id:<14} {state:<14} {model_file(spec, env)}  {spec.description}")
    return 0


def _install(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    spec = LOCAL_MODELS[args.model_id]
    try:
        if (
            args.verify
            and model_file(spec, env).is_file()
            and not is_installed(spec, env, rehash=True)
        ):
            print(f"{spec.id}: installed file does not verify; reinstalling", file=sys.stderr)
            model_file(spec, env).unlink()
        path = install(spec, env)
    except LocalModelError as exc:
        print(f"syntic models install: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0

"""``syntic keys create | list | revoke | ensure-dev``: manage API keys.

``create`` prints the key once, on the last line of stdout; nothing else ever shows it.
``ensure-dev`` (used by ``scripts/run``) creates a ``dev`` key only when the database holds
no active key, printing it the same way; otherwise it says how to create one.
"""

from __future__ import annotations

import argparse
import time

from gateway.commands.migrate import add_config_option, run_with_db
from gateway.keys.devkey import DEV_KEY_NAME
from gateway.keys.fields import MAX_LIMIT, checked_limit, checked_name
from gateway.keys.secrets import KeyKind
from gateway.keys.store import DbKeyStore, KeyInfo
from gateway.settings import Settings
from gateway.storage import Database


def _limit(text: str) -> int:
    try:
        return checked_limit(int(text))
    except ValueError as exc:  # argparse prints an ArgumentTypeError's message as is
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_LIMIT}") from exc


def _name(text: str) -> str:
    try:
        return checked_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("keys", help="API keys: create, list, revoke")
    sub = parser.add_subparsers(dest="keys_command", required=True)

    create = sub.add_parser("create", help="create a key (printed once, on the last line)")
    create.add_argument("--name", type=_name, required=True)
    create.add_argument("--rpm", type=_limit, default=None, help="requests per minute")
    create.add_argument("--tpm", type=_limit, default=None, help="tokens per minute")
    create.add_argument(
        "--max-concurrent",
        type=_limit,
        default=None,
        help="upstream calls in flight at once per replica (default: the server's)",
    )
    kind = create.add_mutually_exclusive_group()
    kind.add_argument("--test", action="store_true", help="an sk_test_ key")
    kind.add_argument("--admin", action="store_true", help="an sk_admin_ key (admin API only)")
    add_config_option(create)
    create.set_defaults(func=_create)

    lister = sub.add_parser("list", help="list keys (never their secrets)")
    lister.add_argument("--active", action="store_true", help="hide revoked keys")
    add_config_option(lister)
    lister.set_defaults(func=_list)

    revoke = sub.add_parser("revoke", help="revoke a key by id (seen by every replica in seconds)")
    revoke.add_argument("key_id")
    add_config_option(revoke)
    revoke.set_defaults(func=_revoke)

    dev = sub.add_parser(
        "ensure-dev", help="create a 'dev' key if no active key exists (printed once, last line)"
    )
    add_config_option(dev)
    dev.set_defaults(func=_ensure_dev)


def _store(settings: Settings, db: Database) -> DbKeyStore:
    return DbKeyStore(db, settings.key_hash_secret, ttl_s=settings.key_cache_ttl_s)


def _create(args: argparse.Namespace) -> int:
    kind: KeyKind = "admin" if args.admin else "test" if args.test else "live"

    async def body(settings: Settings, db: Database) -> str:
        created = await _store(settings, db).create(
            args.name,
            kind=kind,
            rpm=args.rpm,
            tpm=args.tpm,
            max_concurrent=args.max_concurrent,
        )
        info = created.info
        print(f"created {info.id} ({info.kind}) name={info.name!r} {_limits(info)}")
        print("store this key now; it cannot be shown again:")
        print(created.secret)
        return created.secret

    code, _ = run_with_db("syntic keys create", args, body)
    return code


def _limits(info: KeyInfo) -> str:
    rpm = "unlimited" if info.rpm is None else str(info.rpm)
    tpm = "unlimited" if info.tpm is None else str(info.tpm)
    if info.max_concurrent is None:
        return f"rpm={rpm} tpm={tpm}"
    return f"rpm={rpm} tpm={tpm} concurrent={info.max_concurrent}"


def _list(args: argparse.Namespace) -> int:
    async def body(settings: Settings, db: Database) -> None:
        keys = await _store(settings, db).list(include_revoked=not args.active)
        print(f"{'ID':<21} {'KIND':<6} {'PREFIX':<16} {'STATUS':<8} {'LIMITS':<28} NAME")
        for k in keys:
            status = "revoked" if k.revoked else "active"
            print(
                f"{k.id:<21} {k.kind:<6} {k.display_prefix + '...':<16} {status:<8} "
                f"{_limits(k):<28} {k.name}"
            )

    code, _ = run_with_db("syntic keys list", args, body)
    return code


def _revoke(args: argparse.Namespace) -> int:
    async def body(settings: Settings, db: Database) -> bool:
        store = _store(settings, db)
        if await store.revoke(args.key_id):
            print(
                f"revoked {args.key_id}; every replica refuses it within "
                f"{settings.key_cache_ttl_s:g} s"
            )
            return True
        info = await store.get(args.key_id)
        if info is None:
            print(f"syntic keys revoke: no key {args.key_id}")
        else:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.revoked_at or 0))
            print(f"syntic keys revoke: {args.key_id} was already revoked at {when}")
        return False

    code, ok = run_with_db("syntic keys revoke", args, body)
    return code if code else (0 if ok else 1)


def _ensure_dev(args: argparse.Namespace) -> int:
    # Same rule as gateway.keys.devkey.ensure_dev_key, on the CLI's shared database handling.
    async def body(settings: Settings, db: Database) -> None:
        store = _store(settings, db)
        active = await store.list(include_revoked=False)
        if active:
            print(
                f"{len(active)} active key(s) already; no dev key created "
                "(a new one: syntic keys create --name NAME)"
            )
            return
        created = await store.create(DEV_KEY_NAME, kind="live")
        print(f"created {created.info.id} (live) name={DEV_KEY_NAME!r} {_limits(created.info)}")
        print("dev key, shown once (store it now):")
        print(created.secret)

    code, _ = run_with_db("syntic keys ensure-dev", args, body)
    return code

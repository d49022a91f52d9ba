"""``syntic usage [--key ID] [--since ISO|-1h] [--until ...] [--json]``: billing summary.

Per key and model: requests, 4xx / 422 / 5xx, tokens of first attempts and of schema
corrections separately, the prompt tokens read from and written to the provider's cache,
reasoning tokens, requests whose tokens were estimated, schema retries and the correction
rate.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

import orjson

from gateway.commands.migrate import add_config_option, run_with_db
from gateway.settings import Settings
from gateway.storage import Database
from gateway.usage.report import UsageSummary, parse_since, summarize


def _when(value: str) -> float:
    try:
        return parse_since(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected ISO 8601 or -1h/-30m/-7d: {exc}") from exc


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("usage", help="summarise the usage ledger for billing")
    # Let "--since -1h" parse as a value, not as an unknown option (argparse only exempts
    # plain negative numbers by default).
    parser._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?[smhd]?$")
    parser.add_argument("--key", default=None, help="only this key id")
    parser.add_argument("--since", type=_when, default=None, help="ISO 8601 or -1h, -7d ...")
    parser.add_argument("--until", type=_when, default=None, help="ISO 8601 or -5m ...")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_config_option(parser)
    parser.set_defaults(func=_usage)


def _as_json(s: UsageSummary) -> dict[str, object]:
    out: dict[str, object] = {"key_id": s.key_id, "model": s.model}  # first, as before
    out.update(dataclasses.asdict(s))
    out["first_attempt_tokens"] = s.first_attempt_tokens
    out["correction_tokens"] = s.correction_tokens
    out["correction_rate"] = round(s.correction_rate, 6)
    return out


def _usage(args: argparse.Namespace) -> int:
    async def body(settings: Settings, db: Database) -> None:
        rows = await summarize(db, key_id=args.key, since=args.since, until=args.until)
        if args.json:
            print(orjson.dumps([_as_json(r) for r in rows]).decode())
            return
        head = (
            f"{'KEY':<21} {'MODEL':<20} {'REQS':>7} {'4XX':>5} {'422':>5} {'5XX':>5} "
            f"{'FIRST_TOK':>10} {'CORR_TOK':>9} {'CACHE_RD':>9} {'CACHE_WR':>9} "
            f"{'REASON':>9} {'EST':>5} {'RETRIES':>7} {'CORR%':>6}"
        )
        print(head)
        for r in rows:
            print(
                f"{r.key_id or '-':<21} {r.model or '-':<20} {r.requests:>7} {r.errors_4xx:>5} "
                f"{r.unprocessable_422:>5} {r.errors_5xx:>5} {r.first_attempt_tokens:>10} "
                f"{r.correction_tokens:>9} {r.cache_read_tokens:>9} "
                f"{r.cache_creation_tokens:>9} {r.reasoning_tokens:>9} {r.estimated:>5} "
                f"{r.schema_retries:>7} {100 * r.correction_rate:>5.1f}%"
            )

    code, _ = run_with_db("syntic usage", args, body)
    return code

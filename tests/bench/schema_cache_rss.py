"""Gateway memory under many distinct large schemas. A script, not collected::

    .venv/bin/python tests/bench/schema_cache_rss.py [--schemas 60] [--properties 3800]
        [--max-bytes N]

Starts ``syntic serve`` (``--max-bytes``: ``SYNTIC_SCHEMA_CACHE_MAX_BYTES``; default: the
gateway's own), sends ``--schemas`` distinct strict schemas of ``--properties`` nullable
string properties (3,800: ~240 KiB, near the lint's 256 KiB cap) to ``/v1/schemas/check``,
which lints and compiles each through the caches the chat endpoints use, and prints the
process's RSS before and after with the cache's size and bytes from ``/metrics``. No model
is called.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.ops.helpers import scrape  # noqa: E402
from tests.support.gateway_proc import model_table, start_gateway  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def schema(properties: int) -> dict[str, Any]:
    props = {
        f"p{i}": {"type": ["string", "null"], "maxLength": 20 + i % 7} for i in range(properties)
    }
    return {
        "type": "object",
        "title": uuid.uuid4().hex,
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=int, default=60)
    parser.add_argument("--properties", type=int, default=3800)
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        help="SYNTIC_SCHEMA_CACHE_MAX_BYTES (default: the gateway's)",
    )
    ns = parser.parse_args()
    env = {} if ns.max_bytes is None else {"SYNTIC_SCHEMA_CACHE_MAX_BYTES": str(ns.max_bytes)}
    gw = start_gateway(
        Path(tempfile.mkdtemp(prefix="syntic-rss-")),
        [model_table("m", "http://127.0.0.1:9")],
        env=env,
        key_name="rss",
    )
    try:
        headers = {"authorization": f"Bearer {gw.api_key}"}
        before = rss_mb(gw.proc.pid)
        started = time.perf_counter()
        size = 0
        for _ in range(ns.schemas):
            params = schema(ns.properties)
            tool = {
                "type": "function",
                "function": {"name": "t", "strict": True, "parameters": params},
            }
            res = httpx.post(
                gw.base_url + "/v1/schemas/check",
                json={"tools": [tool]},
                headers=headers,
                timeout=60,
            )
            if res.status_code != 200 or not res.json()["ok"]:
                print(f"check failed: {res.status_code} {res.text[:300]}", file=sys.stderr)
                return 1
            size = len(res.request.content)
        samples = scrape(gw.base_url)
        print(
            f"{ns.schemas} distinct schemas of {ns.properties} properties (~{size // 1024} "
            f"KiB requests) in {time.perf_counter() - started:.1f} s: RSS {before:.0f} -> "
            f"{rss_mb(gw.proc.pid):.0f} MB; cache holds "
            f"{samples[('syntic_schema_cache_size', ())]:.0f} schemas, "
            f"{samples[('syntic_schema_cache_bytes', ())] / 1024:.0f} KiB of canonical JSON"
        )
    finally:
        gw.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

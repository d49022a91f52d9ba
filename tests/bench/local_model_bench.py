"""Benchmark: strict tool calls on the real local model through the gateway, in three modes.

Modes (``tests/local/conftest.py``): ``free`` (free generation, free correction),
``constrained`` (generation under the JSON-schema grammar) and ``free + grammar fix`` (free
generation, the one correction under the grammar of the tool being corrected). Each call is
forced to its tool through the openai SDK; per mode it counts the calls valid on the first
try, valid after the one correction, refused with 422, and leaked (a 200 whose arguments an
independent validator, ``jsonschema``, rejects: must be 0), with latency per call. "Grammar
let through" counts the calls where output generated under the grammar still broke the schema
(a keyword the grammar cannot express) and the gateway's own validation had to act.

The default prompt set is eight awkward prompts over two schemas (``BENCH_CASES``);
``--all`` runs all of ``tests/local/awkward.py``.

    .venv/bin/python tests/bench/local_model_bench.py [--temperature 0] [--per-case] [--all]

Needs the runtime and weights (scripts/install-local-model). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import jsonschema  # type: ignore[import-untyped]  # noqa: E402
import openai  # noqa: E402

from tests.local.awkward import CASES, Case  # noqa: E402
from tests.local.conftest import (  # noqa: E402
    CONSTRAINED,
    FREE,
    FREE_FIX,
    MODES,
    local_models_tables,
    missing_runtime,
    passthrough_env,
)
from tests.support.gateway_proc import start_gateway  # noqa: E402

OUTCOMES = ("first_try", "corrected", "refused_422", "no_call", "leaked", "error")
LABELS = {FREE: "free", CONSTRAINED: "constrained", FREE_FIX: "free + grammar fix"}
# Order numbers with the wrong digit count, dashes or letters, amounts in pounds, free-text
# reasons, durations not in the enum, meeting times in words.
BENCH_IDS = (
    "refund-pounds",
    "refund-hash",
    "refund-words",
    "refund-reason",
    "refund-letters",
    "meeting-relative",
    "meeting-pm",
    "meeting-nobody",
)
BENCH_CASES = tuple(c for c in CASES if c.id in BENCH_IDS)


@dataclass(frozen=True, slots=True)
class Result:
    case: str
    mode: str
    outcome: str
    retries: int
    latency_s: float
    detail: str


def run_case(client: openai.OpenAI, model: str, case: Case, temperature: float) -> Result:
    started = time.perf_counter()
    try:
        raw = client.chat.completions.with_raw_response.create(  # type: ignore[call-overload]
            model=model,
            messages=[{"role": "user", "content": case.prompt}],
            tools=[case.wire_tool()],
            tool_choice={"type": "function", "function": {"name": case.tool["name"]}},
            temperature=temperature,
            max_tokens=256,
        )
    except openai.UnprocessableEntityError as exc:
        latency = time.perf_counter() - started
        body = exc.response.json()["error"]
        retries = int(exc.response.headers.get("x-syntic-schema-retries", "-1"))
        return Result(
            case.id, model, "refused_422", retries, latency, f"{body['code']} {body['param']}"
        )
    except openai.APIError as exc:
        return Result(case.id, model, "error", -1, time.perf_counter() - started, str(exc)[:80])
    latency = time.perf_counter() - started
    retries = int(raw.headers["x-syntic-schema-retries"])
    calls = raw.parse().choices[0].message.tool_calls or []
    if not calls:
        return Result(case.id, model, "no_call", retries, latency, "")
    try:
        for call in calls:
            jsonschema.validate(json.loads(call.function.arguments), case.schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        return Result(case.id, model, "leaked", retries, latency, str(exc)[:80])
    outcome = "first_try" if retries == 0 else "corrected"
    return Result(case.id, model, outcome, retries, latency, calls[0].function.arguments[:60])


def grammar_let_through(result: Result) -> bool:
    """Output generated under the grammar broke the schema: the first try of a constrained
    call, or the (grammar) correction of a free + grammar fix call that was still refused."""
    if result.mode == CONSTRAINED:
        return result.retries >= 1
    return result.mode == FREE_FIX and result.outcome == "refused_422"


def _pct(n: int, total: int) -> str:
    return f"{n}/{total} ({100 * n / total:.0f}%)" if total else "0"


def summary_table(results: list[Result]) -> str:
    lines = [
        "| mode | calls | valid first try | valid after the correction | refused 422 | "
        "leaked invalid | no call / errors | grammar let through | "
        "latency mean / p50 / max (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        rows = [r for r in results if r.mode == mode]
        if not rows:
            continue
        count = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
        lat = [r.latency_s for r in rows]
        let = "-" if mode == FREE else str(sum(grammar_let_through(r) for r in rows))
        lines.append(
            f"| {LABELS[mode]} | {len(rows)} | {_pct(count['first_try'], len(rows))} | "
            f"{_pct(count['corrected'], len(rows))} | {_pct(count['refused_422'], len(rows))} | "
            f"{count['leaked']} | {count['no_call']} / {count['error']} | {let} | "
            f"{statistics.mean(lat):.1f} / {statistics.median(lat):.1f} / {max(lat):.1f} |"
        )
    lines.append("")
    lines.append("| mode | outcome | calls | mean latency (s) |")
    lines.append("|---|---|---|---|")
    for mode in MODES:
        for outcome in OUTCOMES:
            lat = [r.latency_s for r in results if r.mode == mode and r.outcome == outcome]
            if lat:
                lines.append(
                    f"| {LABELS[mode]} | {outcome} | {len(lat)} | {statistics.mean(lat):.1f} |"
                )
    return "\n".join(lines)


def per_case_table(results: list[Result]) -> str:
    lines = [
        "| case | mode | outcome | retries | latency (s) | detail |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r.case} | {LABELS[r.mode]} | {r.outcome} | {r.retries} | {r.latency_s:.1f} | "
            f"{detail} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--per-case", action="store_true", help="also print every call")
    parser.add_argument("--all", action="store_true", help="every awkward prompt, not eight")
    parser.add_argument("--limit", type=int, default=len(CASES), help="first N prompts only")
    args = parser.parse_args(argv)
    cases = (CASES if args.all else BENCH_CASES)[: args.limit]
    reason = missing_runtime()
    if reason is not None:
        print(f"local_model_bench: {reason}", file=sys.stderr)
        return 2
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="syntic-bench-") as tmp:
        gw = start_gateway(Path(tmp), local_models_tables(), env=passthrough_env())
        try:
            client = openai.OpenAI(
                base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=300
            )
            # Load the model once before timing anything.
            run_case(client, FREE, CASES[0], args.temperature)
            for mode in MODES:
                for case in cases:
                    result = run_case(client, mode, case, args.temperature)
                    results.append(result)
                    print(
                        f"{LABELS[mode]:<20} {case.id:<18} {result.outcome:<12} "
                        f"{result.latency_s:6.2f}s",
                        file=sys.stderr,
                        flush=True,
                    )
            client.close()
        finally:
            gw.stop()
    print(summary_table(results))
    if args.per_case:
        print()
        print(per_case_table(results))
    leaked = sum(r.outcome == "leaked" for r in results)
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())

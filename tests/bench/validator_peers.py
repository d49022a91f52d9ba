"""The validator beside jsonschema-rs, fastjsonschema and jsonschema, over the tests' corpus
(a script, not collected by pytest)::

    .venv/bin/python tests/bench/validator_peers.py [--rounds 7] [--json out.json]

Workloads, each timed per call over every case of the corpus (``validator_corpus``):

* ``valid``: a valid instance (parsed) to its verdict. Ours: ``CompiledSchema.validate``
  (what the gateway calls; ``[]``) and ``is_valid``; jsonschema-rs and jsonschema:
  ``is_valid``; fastjsonschema: the compiled function.
* ``text``: valid JSON text to its verdict. Ours: ``validate_json`` (orjson, the
  duplicate-key check, validation); the others: ``orjson.loads`` then their ``valid`` call.
* ``invalid``: an invalid instance to its errors. Ours: ``validate``; jsonschema-rs and
  jsonschema: ``list(iter_errors(...))``; fastjsonschema: the first error (it raises it).
* ``compile``: a schema never seen before to a validator (ours: ``compile``, a cache miss,
  generated code included; jsonschema: its validator object, which builds lazily).
* ``first-seen``: the gateway's path for a new strict schema: ours ``lint`` + a lazy
  compile (no code generation) + ``validate`` of one valid instance, the work
  ``lint_compile_async`` does in its worker thread (without the thread hop); the others:
  compile + ``is_valid``.

Method: interleaved, case by case. In each round, for each case, every library runs it
in turn (their order rotating), a cached workload repeated to about 20 us, a fresh one
once; so load on the machine falls on all of them alike. Per library and case: the
median over rounds. Reported per library: the median over cases (``median_ns``), the
mean (``mean_ns``: the corpus's total, which its few very large schemas dominate), the
median over cases of the ratio to jsonschema-rs (``median_ratio``, what the targets
judge) and the ratio of the means. Ours is ``syntic``. Targets: ``valid`` and
``invalid`` <= 2x, ``first-seen`` <= 4x. ``invalid`` is timed once every schema's error
code is generated (its first invalid instance asks for it). Writes the figures as JSON
(``--json``, and a last ``json:`` line on stdout); exit 2 if a peer library is missing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import validator
from tests.validator.corpus import Case, build_corpus, corpus_schemas
from validator import _compile

try:
    import fastjsonschema
    import jsonschema  # type: ignore[import-untyped]
    import jsonschema_rs
except ImportError as exc:  # pragma: no cover - reported, not raised
    print(
        f"missing peer library: {exc.name} (pip install -c constraints.txt -e '.[test]')",
        file=sys.stderr,
    )
    sys.exit(2)

TARGETS = {"valid": 2.0, "invalid": 2.0, "first-seen": 4.0}
LIBRARIES = ("syntic", "jsonschema-rs", "fastjsonschema", "jsonschema")
Calls = list[tuple[Callable[[Any], Any], Any]]
_SLICE_NS = 20_000  # each timed slice of a cached workload: about 20 us of calls


def _rs(schema: Any) -> Any:
    return jsonschema_rs.validator_for(schema, validate_formats=True)


def _py(schema: Any) -> Any:
    cls = jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _fast(schema: Any) -> Callable[[Any], Any]:
    fn: Callable[[Any], Any] = fastjsonschema.compile(schema)
    return fn


def _fast_ok(fn: Callable[[Any], Any]) -> Callable[[Any], bool]:
    def ok(instance: Any) -> bool:
        try:
            fn(instance)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return ok


def _fast_first_error(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def first(instance: Any) -> Any:
        try:
            fn(instance)
        except fastjsonschema.JsonSchemaException as exc:
            return exc
        return None

    return first


class Engines:
    """Each library's compiled validator for one schema (None where one refuses it)."""

    def __init__(self, schema: Any) -> None:
        self.ours = validator.compile(schema)
        self.rs = _rs(schema)
        self.fast = _fast(schema)
        self.py = _py(schema)
        self.fast_ok = _fast_ok(self.fast)

    def verdicts(self, instance: Any) -> set[bool]:
        return {
            self.ours.is_valid(instance),
            not self.ours.validate(instance),
            self.rs.is_valid(instance),
            self.fast_ok(instance),
            bool(self.py.is_valid(instance)),
        }


def load(schemas: list[Any]) -> tuple[list[tuple[Case, Engines]], dict[str, int]]:
    engines: dict[int, Engines] = {}

    def label(schema: Any) -> Callable[[Any], bool] | None:
        try:
            found = Engines(schema)
        except Exception:  # one of the four refuses the schema: not comparable
            return None
        engines[id(schema)] = found
        return found.py.is_valid  # type: ignore[no-any-return]

    def agree(schema: Any, instance: Any, verdict: bool) -> bool:
        try:
            return engines[id(schema)].verdicts(instance) == {verdict}
        except Exception:
            return False

    cases, counts = build_corpus(schemas, label, agree)
    return [(c, engines[id(c.schema)]) for c in cases], counts


def _valid_calls(pairs: list[tuple[Case, Engines]]) -> dict[str, Calls]:
    calls: dict[str, Calls] = {k: [] for k in (*LIBRARIES, "syntic is_valid")}
    for case, e in pairs:
        for instance in case.valid:
            calls["syntic"].append((e.ours.validate, instance))
            calls["syntic is_valid"].append((e.ours.is_valid, instance))
            calls["jsonschema-rs"].append((e.rs.is_valid, instance))
            calls["fastjsonschema"].append((e.fast, instance))
            calls["jsonschema"].append((e.py.is_valid, instance))
    return calls


def _loads_then(fn: Callable[[Any], Any]) -> Callable[[bytes], Any]:
    loads = orjson.loads
    return lambda raw: fn(loads(raw))


def _text_calls(pairs: list[tuple[Case, Engines]]) -> dict[str, Calls]:
    calls: dict[str, Calls] = {k: [] for k in LIBRARIES}
    for case, e in pairs:
        for instance in case.valid:
            try:
                raw = orjson.dumps(instance)
            except TypeError:  # an integer beyond 64 bits
                continue
            calls["syntic"].append((e.ours.validate_json, raw))
            calls["jsonschema-rs"].append((_loads_then(e.rs.is_valid), raw))
            calls["fastjsonschema"].append((_loads_then(e.fast), raw))
            calls["jsonschema"].append((_loads_then(e.py.is_valid), raw))
    return calls


def _codegen_idle() -> None:
    """Wait until the validator's codegen thread has done what is queued (one thread, in
    order: a no-op submitted now runs after every earlier job). A validator without error
    code (an older commit, measured for comparison) has nothing to wait for."""
    # The codegen thread lives in ``validator._compiled`` (in ``_compile`` before the split).
    home = sys.modules.get("validator._compiled", _compile)
    if not hasattr(home, "_executor"):
        return
    with home._UPGRADE_LOCK:
        executor = home._executor()
    executor.submit(lambda: None).result()


def _invalid_calls(pairs: list[tuple[Case, Engines]]) -> dict[str, Calls]:
    """The steady state: each schema's error code generated (its first invalid instance
    asks for it) before any round is timed."""
    for case, e in pairs:
        if case.invalid:
            e.ours.validate(case.invalid[0])
    _codegen_idle()
    calls: dict[str, Calls] = {k: [] for k in LIBRARIES}
    for case, e in pairs:
        for instance in case.invalid:
            calls["syntic"].append((e.ours.validate, instance))
            calls["jsonschema-rs"].append((_listed(e.rs.iter_errors), instance))
            calls["fastjsonschema"].append((_fast_first_error(e.fast), instance))
            calls["jsonschema"].append((_listed(e.py.iter_errors), instance))
    return calls


def _listed(fn: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    return lambda instance: list(fn(instance))


_fresh = itertools.count()


def _variant(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a schema never seen before (a new cache key, the same work)."""
    return {**schema, "title": f"bench variant {next(_fresh)}"}


def _first_seen_ours(pair: tuple[dict[str, Any], Any]) -> Any:
    schema, instance = pair
    issues, compiled = _compile._lint_then_compile(schema, "", "openai", False)
    assert compiled is not None, issues
    return compiled.validate(instance)


def _compile_then(make: Callable[[Any], Any]) -> Callable[[tuple[dict[str, Any], Any]], Any]:
    def run(pair: tuple[dict[str, Any], Any]) -> Any:
        schema, instance = pair
        engine = make(schema)
        is_valid = getattr(engine, "is_valid", None)
        return is_valid(instance) if is_valid is not None else _fast_ok(engine)(instance)

    return run


def _fresh_compile_calls(pairs: list[tuple[Case, Engines]], first_seen: bool) -> dict[str, Calls]:
    """Calls on new variants of the schemas; built anew before each round (a variant is
    new only once)."""
    calls: dict[str, Calls] = {k: [] for k in LIBRARIES}
    for case, _e in pairs:
        if first_seen and (not case.valid or validator.lint(case.schema)):
            continue  # the gateway compiles only schemas its lint accepts
        instance = case.valid[0] if case.valid else None
        for name, arg in zip(LIBRARIES, (_variant(case.schema) for _ in LIBRARIES), strict=True):
            if first_seen:
                fn = (
                    _first_seen_ours
                    if name == "syntic"
                    else _compile_then(
                        {"jsonschema-rs": _rs, "fastjsonschema": _fast, "jsonschema": _py}[name]
                    )
                )
                calls[name].append((fn, (arg, instance)))
            else:
                calls[name].append(
                    (
                        {
                            "syntic": validator.compile,
                            "jsonschema-rs": _rs,
                            "fastjsonschema": _fast,
                            "jsonschema": _py,
                        }[name],
                        arg,
                    )
                )
    return calls


def _time(fn: Callable[[Any], Any], arg: Any, repeat: int) -> float:
    """Mean nanoseconds per call of ``fn(arg)`` over ``repeat`` calls."""
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(repeat):
        fn(arg)
    return (clock() - start) / repeat


def measure(make: Callable[[], dict[str, Calls]], rounds: int, fresh: bool) -> dict[str, Any]:
    """Interleaved rounds, case by case: for each case every library in turn (the order
    rotating), each repeated to about ``_SLICE_NS``. Per library: the median over cases of
    its median time per call, the mean (the corpus's total, which the largest schemas
    dominate), and the median over cases of the ratio to jsonschema-rs."""
    calls = make()
    names = [n for n in calls if calls[n]]
    count = len(calls[names[0]])
    repeat = [[1] * count for _ in names]
    if not fresh:
        for i, n in enumerate(names):
            for j, (fn, arg) in enumerate(calls[n]):
                once = _time(fn, arg, 1)
                repeat[i][j] = max(1, min(200, int(_SLICE_NS / max(once, 1.0))))
    samples = [[[0.0] * rounds for _ in range(count)] for _ in names]
    for r in range(rounds):
        if fresh and r:
            calls = make()
        order = list(range(len(names)))
        for j in range(count):
            shift = (j + r) % len(order)
            for i in order[shift:] + order[:shift]:
                fn, arg = calls[names[i]][j]
                samples[i][j][r] = _time(fn, arg, repeat[i][j])
    per_case = [[statistics.median(s) for s in lib] for lib in samples]
    base = per_case[names.index("jsonschema-rs")]
    out: dict[str, Any] = {
        "cases": count,
        "median_ns": {},
        "mean_ns": {},
        "median_ratio": {},
        "mean_ratio": {},
    }
    base_mean = statistics.fmean(base)
    for i, n in enumerate(names):
        out["median_ns"][n] = statistics.median(per_case[i])
        out["mean_ns"][n] = statistics.fmean(per_case[i])
        out["median_ratio"][n] = statistics.median(
            a / b for a, b in zip(per_case[i], base, strict=True)
        )
        out["mean_ratio"][n] = out["mean_ns"][n] / base_mean
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run")
    ns = parser.parse_args(argv)
    validator.configure_cache(4096, max_bytes=64 << 20)
    started = time.monotonic()
    pairs, counts = load(corpus_schemas())
    print(f"corpus: {json.dumps(counts)} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    workloads: dict[str, tuple[Callable[[], dict[str, Calls]], bool]] = {
        "valid": (lambda: _valid_calls(pairs), False),
        "text": (lambda: _text_calls(pairs), False),
        "invalid": (lambda: _invalid_calls(pairs), False),
        "compile": (lambda: _fresh_compile_calls(pairs, False), True),
        "first-seen": (lambda: _fresh_compile_calls(pairs, True), True),
    }
    result: dict[str, Any] = {"corpus": counts, "rounds": ns.rounds, "workloads": {}}
    missed = []
    for name, (make, fresh) in workloads.items():
        if ns.only and name not in ns.only:
            continue
        measured = measure(make, ns.rounds, fresh)
        result["workloads"][name] = measured
        target = TARGETS.get(name)
        ratio = measured["median_ratio"]["syntic"]
        if target is not None and ratio > target:
            missed.append(name)
        row = "  ".join(
            f"{n} {v / 1000:.2f} us ({measured['median_ratio'][n]:.2f}x, mean "
            f"{measured['mean_ns'][n] / 1000:.1f} us {measured['mean_ratio'][n]:.2f}x)"
            for n, v in measured["median_ns"].items()
        )
        goal = f"  target <= {target}x [{'OK' if ratio <= target else 'MISSED'}]" if target else ""
        print(f"{name:<10} {row}{goal}", flush=True)
    result["missed"] = missed
    result["seconds"] = time.monotonic() - started
    if ns.json is not None:
        ns.json.write_text(json.dumps(result, indent=1) + "\n")
    print("json: " + json.dumps(result))  # the runner's result file keeps stdout
    return 0


if __name__ == "__main__":
    sys.exit(main())

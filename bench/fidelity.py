"""Fidelity against the reference replay: replay every case of a cases file and compare.

    python bench/fidelity.py --cases ../shared/reference/cases.json [--only NAME ...]

Prints, per case, ours vs expected and the error of every expected key, graded with the
tolerances of issue 3 (``plansim.sim.cases.tolerance``), then one last line
``fidelity: N/M cases within tolerance``. Exit status 0 when every case is within tolerance,
1 otherwise, 2 for an unreadable cases file.
"""

from __future__ import annotations

import argparse
import sys
import time

from plansim.errors import InputError
from plansim.sim.cases import (
    KeyCheck,
    ReferenceCase,
    case_deployment,
    case_workload,
    compare_summary,
    load_cases,
)


def _fmt(value: float | None) -> str:
    if value is None:
        return "missing"
    if float(value).is_integer() and abs(value) < 1e12:
        return f"{int(value)}"
    if abs(value) >= 1000:
        return f"{value:.2f}"
    return f"{value:.6g}"


def _rule(check: KeyCheck) -> str:
    if check.kind == "exact":
        return "exact"
    if check.kind == "abs":
        return f"±{check.tolerance:g}"
    if check.kind == "rel":
        return f"{check.tolerance:.0%}"
    return "info"


def _error(check: KeyCheck) -> str:
    if check.ours is None:
        return "-"
    if check.kind == "abs":
        return f"{check.error:.4f}"
    return f"{check.error:.2%}"


def _describe(case: ReferenceCase) -> str:
    dep = case.deployment
    if dep.get("mode") == "disagg":
        pools = f"disagg {dep.get('num_prefill_workers', 1)}P/{dep.get('num_decode_workers', 1)}D"
    else:
        pools = f"agg {dep.get('num_workers', 1)}w"
    return f"{case.trace_format}, {pools}, {case.router_mode}"


def run_case(case: ReferenceCase) -> bool:
    """Replay one case, print its table; True when every graded key is within tolerance."""
    print(f"== {case.name} ({_describe(case)})")
    try:
        from plansim.sim.host import replay

        workload = case_workload(case)
        deployment = case_deployment(case)
        started = time.perf_counter()
        result = replay(workload, deployment)
        wall_s = time.perf_counter() - started
    except InputError as exc:
        print(f"   error: {exc}")
        print(f"{case.name}: FAIL (input error)\n")
        return False
    except Exception as exc:  # a bench reports every case, even when the engine breaks
        print(f"   error: {type(exc).__name__}: {exc}")
        print(f"{case.name}: FAIL (replay raised)\n")
        return False
    checks = compare_summary(result.summary, case)
    print(f"   {'key':<34}{'ours':>16}{'expected':>16}{'error':>10}{'tol':>7}  ")
    for check in checks:
        mark = "" if check.kind == "info" else ("ok" if check.ok else "FAIL")
        print(
            f"   {check.key:<34}{_fmt(check.ours):>16}{_fmt(check.expected):>16}"
            f"{_error(check):>10}{_rule(check):>7}  {mark}"
        )
    graded = [c for c in checks if c.kind != "info"]
    passed = sum(c.ok for c in graded)
    ok = passed == len(graded)
    print(
        f"{case.name}: {'PASS' if ok else 'FAIL'} ({passed}/{len(graded)} graded keys, "
        f"{len(workload)} requests, replay {wall_s:.2f} s wall)\n"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True, help="cases.json-format file")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="replay only this case (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        cases = load_cases(args.cases)
    except InputError as exc:
        print(f"fidelity: {exc}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {c.name for c in cases})
        if unknown:
            print(f"fidelity: --only: no case named {unknown[0]!r}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.name in args.only]
    passed = sum(run_case(case) for case in cases)
    print(f"fidelity: {passed}/{len(cases)} cases within tolerance")
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())

"""A held-out benchmark of the plain lint: ExecuTorch's own backend operator test suite,
mirrored in ``benchmarks/et_suite_cases.py`` (cases nobody on this team wrote).

For each case: (1) export it and lint the ``.pt2`` with the plain lint (``lint_pt2``, the
torch-free path ``coreml-lint program.pt2`` runs, no ``--measure``): does it report an
error-level finding that predicts a lowering crash or wrong values, and which rule;
(2) the ground truth from the real stack: ``coreml_lint.verifier.verify`` (the stock
``CoreMLPartitioner`` lowering, then every Core ML partition run against eager): crash =
the lowering fails, wrong = verify says diverge, clean = it agrees.

The truth is cached in ``benchmarks/results/et_suite_truth.json``, keyed by case name and
stack versions (torch, executorch, coremltools), written after every case, so a killed run
resumes and a re-run after the op table changes only re-lints (seconds). Truth is measured
serially in this one process, cases ordered round-robin across the suite's files, until
``--budget`` CPU seconds are spent; what is left is reported as not measured.

    PYTHONPATH=. .venv/bin/python benchmarks/et_suite_mirror.py [--budget 1800] [--lint-only]

Writes ``benchmarks/results/et_suite_mirror.txt`` and ``.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import contextlib
import hashlib
import io
import json
import logging
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.et_suite_cases import CASES, Case  # noqa: E402
from coreml_lint import lint_program  # noqa: E402
from coreml_lint.core.findings import Outcome, Severity  # noqa: E402
from coreml_lint.engine.program import lint_pt2  # noqa: E402
from coreml_lint.measured.stack import installed_versions  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TRUTH = RESULTS / "et_suite_truth.json"
REPORT = RESULTS / "et_suite_mirror"
CASE_TIMEOUT = 240  # seconds of wall time for one case's lowering + verify

CRASH_OUTCOMES = {Outcome.CRASH, Outcome.LOAD_FAILURE}
BAD = ("crash", "wrong")

logging.getLogger("coremltools").setLevel(logging.ERROR)


def stack_id() -> str:
    return "+".join(f"{k}-{v}" for k, v in sorted(installed_versions().items()))


def _seed(name: str) -> None:
    torch.manual_seed(int.from_bytes(hashlib.md5(name.encode()).digest()[:4], "little"))


def build(case: Case) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    _seed(case.name)
    module, inputs = case.build()
    return module.eval(), inputs


def _flat(inputs: Any) -> list[torch.Tensor]:
    if isinstance(inputs, torch.Tensor):
        return [inputs]
    return [t for item in inputs for t in _flat(item)]


def fingerprint(module: torch.nn.Module, inputs: tuple[Any, ...]) -> str:
    """What the case is (module, parameters, input shapes, dtypes and values): a cached
    truth whose case changed is measured again."""
    parts = [repr(module)]
    parts += [
        f"{n}:{p.dtype}:{tuple(p.shape)}:{p.double().sum().item():.6g}"
        for n, p in module.state_dict().items()
    ]
    parts += [f"{t.dtype}:{tuple(t.shape)}:{t.double().sum().item():.6g}" for t in _flat(inputs)]
    return hashlib.md5("|".join(parts).encode()).hexdigest()[:12]


def export(case: Case) -> tuple[Any, tuple[Any, ...], str | None]:
    """(exported program, inputs, why not): the suite reports a case whose module fails in
    eager, or does not export, as skipped."""
    module, inputs = build(case)
    try:
        with torch.no_grad():
            module(*inputs)
    except Exception as exc:
        return None, inputs, f"eager fails: {type(exc).__name__}: {exc}"[:200]
    try:
        return torch.export.export(module, inputs), inputs, None
    except Exception as exc:
        return None, inputs, f"export fails: {type(exc).__name__}: {exc}"[:200]


# -- the plain lint -------------------------------------------------------------------------


def lint(ep: Any, workdir: Path, name: str) -> dict[str, Any]:
    """The plain lint's error-level op-level prediction: crash, wrong, or None (``via``:
    the saved ``.pt2``, as ``coreml-lint program.pt2`` reads it; ``api`` when torch cannot
    save the program, so only the Python API's ``lint_program`` can read it)."""
    path = workdir / f"{name}.pt2"
    try:
        torch.export.save(ep, str(path))
        reports, via = lint_pt2(path), "pt2"
    except NotImplementedError:
        # torch.export.save cannot write some outputs (median's ``return_types``): no
        # ``.pt2`` exists for the CLI, and the Python API lints the program in memory
        reports, via = [lint_program(ep)], "api"
    findings = [f for r in reports for f in r.findings]
    errors = [f for f in findings if f.severity is Severity.ERROR]
    crash = [f for f in errors if f.outcome in CRASH_OUTCOMES]
    wrong = [f for f in errors if f.outcome is Outcome.SILENT]
    predicted = "crash" if crash else "wrong" if wrong else None
    return {
        "predicted": predicted,
        "via": via,
        "rules": sorted({f"{f.code} {f.op or ''}".strip() for f in crash + wrong}),
        "other_errors": sorted({f.code for f in errors if f not in crash + wrong}),
        "warnings": sorted({f.code for f in findings if f.severity is Severity.WARNING}),
        "internal_errors": [e.code for r in reports for e in r.internal_errors],
    }


# -- the ground truth -----------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def truth(case: Case) -> dict[str, Any]:
    """Lower with the stock partitioner and verify: crash / wrong / clean (or skipped /
    unknown when the suite would not run it or verify could not judge)."""
    from coreml_lint.verifier import verify

    ep, inputs, why = export(case)
    if ep is None:
        return {"truth": "skipped", "detail": why}
    quiet = io.StringIO()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT)
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            report = verify(ep, inputs=tuple(_flat(inputs)))
    except _Timeout:
        return {"truth": "unknown", "detail": f"timed out after {CASE_TIMEOUT} s"}
    except Exception as exc:
        return {"truth": "unknown", "detail": f"verify raised {type(exc).__name__}: {exc}"[:300]}
    finally:
        signal.alarm(0)
    status = report.status
    detail = ""
    if status == "lowering_crash":
        kind = "crash"
        detail = f"{report.lowering_stage}: {report.lowering_error}"
    elif status == "diverge":
        kind = "wrong"
        detail = "; ".join(str(d) for d in report.divergences[:2]) or report.summary()
    elif status == "agree":
        kind = "clean"
        detail = "; ".join(report.notes)
    else:
        kind = "unknown"
        detail = "; ".join(report.not_verified) or report.summary()
    return {
        "truth": kind,
        "status": status,
        "partitions": len(report.partitions),
        "detail": " ".join(detail.split())[:300],
    }


def _load_truth() -> dict[str, Any]:
    if TRUTH.exists():
        return json.loads(TRUTH.read_text())
    return {}


def _save_truth(cache: dict[str, Any]) -> None:
    tmp = TRUTH.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    tmp.replace(TRUTH)


def round_robin(cases: list[Case]) -> list[Case]:
    """The cases taken one file at a time in turn (suite-run cases before float16 ones), so
    a budget that stops early has sampled every file evenly."""
    ordered = []
    for group in ([c for c in cases if c.suite_runs], [c for c in cases if not c.suite_runs]):
        by_file: dict[str, list[Case]] = defaultdict(list)
        for c in group:
            by_file[c.file].append(c)
        queues = [by_file[f] for f in sorted(by_file)]
        while any(queues):
            ordered += [q.pop(0) for q in queues if q]
    return ordered


def measure_truth(
    cases: list[Case], budget: float, lint_only: bool, retry: bool = False
) -> dict[str, Any]:
    cache = _load_truth()
    stack = stack_id()
    spent = sum(e.get("cpu_seconds", 0.0) for k, e in cache.items() if k.endswith(f"@{stack}"))
    torch.set_num_threads(1)
    for case in round_robin(cases):
        key = f"{case.name}@{stack}"
        module, inputs = build(case)
        spec = fingerprint(module, inputs)
        known = cache.get(key)
        if known and known.get("spec") == spec and not (retry and known["truth"] == "unknown"):
            continue
        if lint_only or spent >= budget:
            continue
        cpu, wall = time.process_time(), time.perf_counter()
        entry = truth(case)
        entry["cpu_seconds"] = round(time.process_time() - cpu, 2)
        entry["wall_seconds"] = round(time.perf_counter() - wall, 2)
        entry["spec"] = spec
        spent += entry["cpu_seconds"]
        cache[key] = entry
        _save_truth(cache)
        print(
            f"truth {case.name:50s} {entry['truth']:8s} {entry['cpu_seconds']:6.1f} cpu-s "
            f"(total {spent:7.1f}) {entry.get('detail', '')[:80]}",
            flush=True,
        )
    return {c.name: cache.get(f"{c.name}@{stack}") for c in cases}


# -- the report -----------------------------------------------------------------------------


def verdict(predicted: str | None, kind: str | None) -> str:
    if kind in BAD:
        return "caught" if predicted else "missed"
    if kind == "clean":
        return "false alarm" if predicted else "ok"
    return "-"


def run(budget: float, lint_only: bool, retry: bool = False) -> int:
    truths = measure_truth(CASES, budget, lint_only, retry)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for case in CASES:
            ep, _, why = export(case)
            linted = lint(ep, Path(tmp), case.name) if ep is not None else {"predicted": None}
            found = truths.get(case.name) or {}
            kind = found.get("truth", "not measured")
            rows.append(
                {
                    "case": case.name,
                    "file": case.file,
                    "dtype": case.dtype,
                    "suite_runs": case.suite_runs,
                    "flow_skips": case.flow_skips,
                    "call": case.call,
                    "lint": linted.get("predicted"),
                    "rules": linted.get("rules", []),
                    "lint_detail": {k: v for k, v in linted.items() if k not in ("predicted",)},
                    "truth": kind,
                    "truth_detail": found.get("detail", why or ""),
                    "verdict": verdict(linted.get("predicted"), kind),
                }
            )
        lint_seconds = time.perf_counter() - start
    truth_cpu = sum((truths.get(c.name) or {}).get("cpu_seconds", 0.0) for c in CASES)
    text = render(rows, lint_seconds, truth_cpu)
    RESULTS.mkdir(parents=True, exist_ok=True)
    REPORT.with_suffix(".txt").write_text(text)
    summary = {
        "stack": stack_id(),
        "totals": {group: totals(sel) for group, sel in _groups(rows).items()},
        "lint_seconds": round(lint_seconds, 1),
        "truth_cpu_seconds": round(truth_cpu, 1),
        "rows": rows,
    }
    REPORT.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    print(text)
    return 0


def _groups(rows: list[dict]) -> dict[str, list[dict]]:
    return {
        "suite, first call of each test function (float32)": [
            r for r in rows if r["suite_runs"] and r["call"] == 0
        ],
        "suite, further calls that change an op argument (float32)": [
            r for r in rows if r["call"] > 0
        ],
        "suite (float32, as the suite runs): the two above": [r for r in rows if r["suite_runs"]],
        "float16 variants of dtype tests": [r for r in rows if not r["suite_runs"]],
        "all": rows,
    }


def totals(rows: list[dict]) -> dict[str, Any]:
    bad = [r for r in rows if r["truth"] in BAD]
    clean = [r for r in rows if r["truth"] == "clean"]
    out: dict[str, Any] = {
        "cases": len(rows),
        "judged": len(bad) + len(clean),
        "bad": len(bad),
        "caught": sum(1 for r in bad if r["lint"]),
        "clean": len(clean),
        "false_alarms": sum(1 for r in clean if r["lint"]),
        "skipped_by_suite": sum(1 for r in rows if r["truth"] == "skipped"),
        "unknown": sum(1 for r in rows if r["truth"] == "unknown"),
        "not_measured": sum(1 for r in rows if r["truth"] == "not measured"),
        "linted_in_memory": [r["case"] for r in rows if r["lint_detail"].get("via") == "api"],
        "caught_by_rule": _by_rule([r for r in bad if r["lint"]]),
        "false_alarms_by_rule": _by_rule([r for r in clean if r["lint"]]),
    }
    for kind in BAD:
        these = [r for r in bad if r["truth"] == kind]
        out[kind] = {
            "total": len(these),
            "caught": sum(1 for r in these if r["lint"]),
            "caught_as_such": sum(1 for r in these if r["lint"] == kind),
        }
    return out


def _by_rule(rows: list[dict]) -> dict[str, int]:
    """How many of ``rows`` each rule code flagged (a case may count for several)."""
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        for code in {rule.split()[0] for rule in r["rules"]}:
            counts[code] += 1
    return dict(sorted(counts.items()))


def render(rows: list[dict], lint_seconds: float, truth_cpu: float) -> str:
    lines = [
        "ExecuTorch backend operator suite (mirrored), plain lint vs the real stack",
        f"stack: {stack_id()}; lint of every case: {lint_seconds:.1f} s; "
        f"ground truth measured: {truth_cpu:.0f} CPU-s (cached)",
        "",
    ]
    for group, selected in _groups(rows).items():
        t = totals(selected)
        lines.append(f"== {group}: {t['cases']} cases, {t['judged']} judged")
        lines.append(f"   bad cases caught: {t['caught']}/{t['bad']}")
        for kind in BAD:
            k = t[kind]
            lines.append(
                f"     {kind:5s}: caught {k['caught']}/{k['total']} "
                f"(predicted as {kind}: {k['caught_as_such']})"
            )
        lines.append(f"   false alarms on clean cases: {t['false_alarms']}/{t['clean']}")
        lines.append(f"   caught by rule: {t['caught_by_rule']}")
        lines.append(f"   false alarms by rule: {t['false_alarms_by_rule']}")
        if t["linted_in_memory"]:
            lines.append(
                f"   linted by lint_program in memory (torch.export.save cannot write the "
                f"program, so no .pt2 exists for the CLI): {t['linted_in_memory']}"
            )
        lines.append(
            f"   not judged: {t['skipped_by_suite']} skipped as the suite does (eager/export "
            f"fails), {t['unknown']} verify could not judge, {t['not_measured']} not measured"
        )
        lines.append("")
    lines.append("Bad or flagged cases:")
    for r in rows:
        if r["truth"] in BAD or r["lint"]:
            lines.append(_row(r))
    lines.append("")
    lines.append("Every case:")
    lines.append(f"{'case':58s} {'dtype':8s} {'lint':6s} {'truth':12s} verdict    rules")
    lines += [_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def _row(r: dict) -> str:
    rules = ", ".join(r["rules"])
    mark = " [flow skips]" if r["flow_skips"] else ""
    detail = (
        f"  | {r['truth_detail'][:110]}" if r["truth"] in BAD or r["truth"] == "unknown" else ""
    )
    return (
        f"{r['case'] + mark:58s} {r['dtype']:8s} {r['lint'] or '-':6s} {r['truth']:12s} "
        f"{r['verdict']:10s} {rules}{detail}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1800.0, help="truth CPU seconds")
    parser.add_argument("--lint-only", action="store_true", help="measure no new truth")
    parser.add_argument(
        "--retry-unknown", action="store_true", help="measure again what verify could not judge"
    )
    args = parser.parse_args()
    return run(args.budget, args.lint_only, args.retry_unknown)


if __name__ == "__main__":
    sys.exit(main())

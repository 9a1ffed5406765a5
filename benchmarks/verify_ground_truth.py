"""verify as ground truth: its false-alarm rate on clean models and its catch rate on silent
wrong values, measured.

Run by hand (needs torch, executorch, coremltools, transformers; a few minutes of CPU per
group):

    .venv/bin/python benchmarks/verify_ground_truth.py [GROUP ...]

Groups: ``transformers`` (every architecture tests/test_transformers.py builds), ``models``
(tests/groundtruth_models.py: ConvNeXt, MobileViT, torchvision-style conv nets, GQA, DETR's
mask, DETR), ``heldout`` (tests/groundtruth_models.py's silent-value models and their twins),
``silent`` (every ``silent=`` rule case of tests/cases.py) and ``clean`` (every clean rule
case). Without arguments: all of them. Each model is verified with its own example inputs
(verify's default), no lint rule consulted. It prints one line per model and the rates; a
clean model that does not agree is a false alarm (exit 1) or not verified (exit 2).
"""

from __future__ import annotations

import os

os.environ.setdefault("TQDM_DISABLE", "1")

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
logging.getLogger("coremltools").setLevel(logging.ERROR)

GROUPS = ("transformers", "models", "heldout", "silent", "clean")


def _transformers() -> list[tuple[str, Any, dict, bool]]:
    from test_transformers import ARCHITECTURES, _export

    # gemma's tanh GELU runs as exact GELU: wrong, but below what its outputs show here
    return [(f"transformers:{n}", (lambda n=n: _export(n)), {}, False) for n in ARCHITECTURES]


def _export(builder: Any) -> Any:
    torch.manual_seed(0)
    module, inputs = builder()
    return torch.export.export(module.eval(), inputs)


def _models() -> list[tuple[str, Any, dict, bool]]:
    from groundtruth_models import CLEAN, SLOW_CLEAN

    chosen = {**CLEAN, **SLOW_CLEAN}
    return [(f"model:{n}", (lambda b=b: _export(b)), {}, False) for n, b in chosen.items()]


def _heldout() -> list[tuple[str, Any, dict, bool]]:
    from groundtruth_models import HELDOUT

    found = []
    for name, (bad, twin) in HELDOUT.items():
        found.append((f"heldout:{name}", (lambda b=bad: _export(b)), {}, True))
        found.append((f"twin:{name}", (lambda b=twin: _export(b)), {}, False))
    return found


def _cases(silent: bool) -> list[tuple[str, Any, dict, bool]]:
    from cases import CASES
    from conftest import exported

    chosen = [
        c for c in CASES if (c.silent is not None if silent else (not c.expect and c.crash is None))
    ]
    return [(f"case:{c.id}", (lambda i=c.id: exported(i)), c.settings, silent) for c in chosen]


def _verify(make: Any, settings: dict) -> Any:
    from coreml_lint.verifier import verify

    return verify(
        make(),
        minimum_deployment_target=settings.get("ios"),
        skip_ops_for_coreml_delegation=settings.get("skip"),
        take_over_mutable_buffer=settings.get("take_over_mutable_buffer", True),
        take_over_constant_data=settings.get("take_over_constant_data", True),
        lower_full_graph=settings.get("lower_full_graph", False),
    )


def main(groups: list[str]) -> int:
    makers = {
        "transformers": _transformers,
        "models": _models,
        "heldout": _heldout,
        "silent": lambda: _cases(True),
        "clean": lambda: _cases(False),
    }
    rows = []
    for group in groups:
        for name, make, settings, bad in makers[group]():
            start = time.perf_counter()
            measured: dict[str, Any] = {}
            try:
                report = _verify(make, settings)
                code, summary = report.exit_code, report.summary().splitlines()
                measured = _measured(report)
            except Exception as exc:  # a model that cannot even be built counts as not run
                code, summary = 2, [f"{type(exc).__name__}: {exc}"]
            seconds = time.perf_counter() - start
            rows.append({"model": name, "bad": bad, "exit": code, "seconds": seconds, **measured})
            detail = " | ".join(line.strip() for line in summary[1:3])[:220]
            print(f"{name:42s} {'bad ' if bad else 'clean'} exit {code} {seconds:5.1f}s {detail}")
            sys.stdout.flush()
    _rates(rows)
    _coverage(rows)
    out = ROOT / "benchmarks" / "results" / "verify_ground_truth.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def _measured(report: Any) -> dict[str, Any]:
    """What the float64 judge saw (the data its constants are derived from) and the MIL
    ops each pass executed (the interpreter's coverage).

    ``hard_ratio``: over the semantic pass's outputs, the largest error, among elements
    whose error is above 1e-4 of the element, in units of float32's own error there (the
    verdict is "wrong" exactly when it exceeds the factor); ``rel_error``: the relative error
    at the element nearest its bound."""
    outputs = [o for p in report.partitions for o in p.semantic.outputs.values()]
    ratios = [o.get("hard_ratio") for o in outputs if o.get("hard_ratio") is not None]
    rels = [o.get("rel_error") for o in outputs if o.get("rel_error") is not None]
    ops = {op for p in report.partitions for op in p.semantic.op_types + p.float16.op_types}
    return {
        "hard_ratio": min(max(ratios), 1e30) if ratios else None,
        "rel_error": min(max(rels), 1e30) if rels else None,
        "mil_ops": sorted(ops),
        "not_verified": list(report.not_verified),
    }


def _coverage(rows: list[dict]) -> None:
    from coreml_lint.verifier.mil.registry import coverage

    kernels = set(coverage()) | {"const"}
    ops = {op for r in rows for op in r.get("mil_ops", ())}
    missing = sorted(op for op in ops if op not in kernels and not op.startswith("constexpr_"))
    print(f"MIL op types executed: {len(ops)}; without a kernel: {missing}")


def _rates(rows: list[dict]) -> None:
    clean = [r for r in rows if not r["bad"]]
    bad = [r for r in rows if r["bad"]]
    if clean:
        alarms = [r["model"] for r in clean if r["exit"] == 1]
        unverified = [r["model"] for r in clean if r["exit"] == 2]
        print(f"false alarms: {len(alarms)}/{len(clean)} clean models {alarms}")
        print(f"not verified: {len(unverified)}/{len(clean)} clean models {unverified}")
    if bad:
        missed = [r["model"] for r in bad if r["exit"] != 1]
        print(f"caught: {len(bad) - len(missed)}/{len(bad)} silent wrong values; missed {missed}")
    clean_ratios = [(r["hard_ratio"], r["model"]) for r in clean if r.get("hard_ratio")]
    bad_ratios = [(r["hard_ratio"], r["model"]) for r in bad if r.get("hard_ratio")]
    if clean_ratios:
        print(f"largest error / float32's own on a clean model: {max(clean_ratios)}")
    if bad_ratios:
        print(f"smallest such ratio on a wrong model that has one: {min(bad_ratios)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(GROUPS)))

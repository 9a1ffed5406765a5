"""What one sweep case costs, and where the time goes.

Run by hand (needs torch, executorch, coremltools):

    .venv/bin/python benchmarks/sweep_case_cost.py [--ops add.Tensor,amax.default,...] [--cases 40]

In one process (the heavy imports paid once, as a sweep worker pays them), it generates the
cases of a few ops, then measures a sample of them one case per program (the worst case: a
case the grouped run has to split) and prints the CPU seconds of each phase:

- ``imports``: torch, executorch and coremltools, once per worker (a fresh process);
- ``generate``: the legal-call search and the case list of each op, once per op;
- ``build`` + ``export``: the case's module and ``torch.export``;
- ``edge``: ``to_edge_transform_and_lower``'s own ExecuTorch passes (conversion excluded);
- ``convert``: coremltools' conversion of each partition (``CoreMLBackend._convert_to_mlmodel``);
- ``serialize``: the backend writing the converted model as an ``.mlpackage`` and its bytes;
- ``to_executorch``: the emitter;
- ``judge``: the ``verify`` oracle (the float32 conversion, eager, the MIL interpreter) on
  typical and extreme values.

``--json PATH`` writes the figures, so a before/after pair lands in ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

DEFAULT_OPS = (
    "add.Tensor,amax.default,avg_pool2d.default,convolution.default,cumsum.default,"
    "gelu.default,index_select.default,layer_norm.default,max_pool2d_with_indices.default,"
    "mean.dim,pow.Tensor_Scalar,softmax.int,topk.default,upsample_bilinear2d.vec,where.self"
)


def import_seconds() -> float:
    """CPU seconds a fresh worker spends importing the heavy stack."""
    code = (
        "import os,time;import torch, executorch.exir, coremltools;"
        "from executorch.backends.apple.coreml.partition import CoreMLPartitioner;"
        "t=os.times();print(t.user+t.system)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cpu() -> float:
    t = os.times()
    return t.user + t.system


class Phases:
    """CPU seconds per phase; nested phases are subtracted from the phase around them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[list[float]] = []

    @contextmanager
    def phase(self, name: str):
        start = cpu()
        self.stack.append([0.0])
        try:
            yield
        finally:
            inner = self.stack.pop()[0]
            spent = cpu() - start
            self.seconds[name] += spent - inner
            if self.stack:
                self.stack[-1][0] += spent


def instrument(phases: Phases) -> None:
    """Wrap the backend's conversion and serialization, the emitter and the judge."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.exir import EdgeProgramManager

    from coreml_lint.sweep import measure as measure_module

    convert = CoreMLBackend._convert_to_mlmodel
    serialize = CoreMLBackend.preprocess_model
    emit = EdgeProgramManager.to_executorch

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            with phases.phase(name):
                return fn(*args, **kwargs)

        return wrapper

    import executorch.exir as exir
    import torch

    from coreml_lint.sweep import build as build_module

    CoreMLBackend._convert_to_mlmodel = staticmethod(timed("convert", convert))
    torch.export.export = timed("export", torch.export.export)
    exir.to_edge_transform_and_lower = timed("edge", exir.to_edge_transform_and_lower)
    measure_module.case_keys = timed("keys", measure_module.case_keys)
    measure_module.build = timed("build", build_module.build)
    CoreMLBackend.preprocess_model = staticmethod(timed("serialize", serialize))
    EdgeProgramManager.to_executorch = timed("to_executorch", emit)
    import coreml_lint.verifier.api as api

    api.verify_lowered = timed("judge", api.verify_lowered)  # measure imports it when called


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", default=DEFAULT_OPS)
    parser.add_argument("--cases", type=int, default=40, help="cases measured (a sample)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    imports = import_seconds()
    from coreml_lint.sweep.tasks import _heavy, _ops, prepare

    prepare()
    _heavy()
    phases = Phases()
    instrument(phases)
    from coreml_lint.sweep import measure as measure_module
    from coreml_lint.sweep.generate import op_cases

    ops = _ops()
    cases = []
    for name in args.ops.split(","):
        with phases.phase("generate"):
            made, _ = op_cases(ops[name])
        cases += made
    generated = len(cases)
    random.Random(0).shuffle(cases)
    sample = cases[: args.cases]
    outcomes: dict[str, int] = defaultdict(int)
    started = cpu()
    for case in sample:
        with phases.phase("rest"):
            result = measure_module.measure([case])
        outcomes[result[0]["outcome"] if isinstance(result, list) else "split"] += 1
    per_case = (cpu() - started) / max(len(sample), 1)
    figures = {
        "imports_cpu_s": round(imports, 2),
        "ops": len(args.ops.split(",")),
        "cases_generated": generated,
        "generate_cpu_s_per_op": round(phases.seconds["generate"] / len(args.ops.split(",")), 3),
        "cases_measured": len(sample),
        "cpu_s_per_case": round(per_case, 3),
        "phases_cpu_s_per_case": {
            k: round(v / max(len(sample), 1), 3)
            for k, v in sorted(phases.seconds.items())
            if k != "generate"
        },
        "outcomes": dict(outcomes),
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

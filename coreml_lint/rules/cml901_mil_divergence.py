"""CML901 mil-divergence: a Core ML partition computes something else than its eager module.

What it does
    Reported by ``coreml-lint verify`` (not by the linter: it needs the real lowering). Each
    Core ML partition's MIL program, the one ExecuTorch embeds, is executed on Linux by a
    reference interpreter and compared with the partition's own eager module on the
    program's inputs, in two passes: the partition converted at float32 (each element
    against the partition computed in float64: wrong where the error is above 1e-4 of the
    element and 100 times what float32 itself commits there), and the embedded float16
    program (judged for what
    float16 cannot excuse: NaN or inf where eager has none, integers that are not exact,
    errors beyond rounding). The finding names the first MIL op whose value departs from
    eager, the graph node and model source line it comes from, the numbers, and the lint
    rule that explains it when one does.

Why it breaks
    The partitioner delegates by op name, and coremltools converts what it is given: a
    keyword it does not read, a constant it makes in the wrong dtype, an op whose Core ML
    formula differs from torch's (``1 / x`` becomes ``inverse(x, epsilon=1e-4)``: 1/0.001
    is 909). Catalogued pitfalls have rules; this is the net under them.

Example
    ``scores.masked_fill(~mask, torch.finfo(torch.float32).min)`` on a left-padded batch:
    fully masked rows become NaN in float16.

Fix
    The rule named in the finding, if any; otherwise keep the node on the CPU
    (``skip_ops_for_coreml_delegation``) or compute it another way, and verify again.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from coreml_lint.core.findings import Outcome
from coreml_lint.rulekit.rule import Rule


class MilDivergence(Rule):
    code = "CML901"
    name = "mil-divergence"
    outcome = Outcome.SILENT
    summary = "verify: a Core ML partition's MIL computes other values than eager"
    cannot_lower = "found only by verify, after lowering; the rule it names, if any, has the answer"

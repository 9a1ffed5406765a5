"""CML902 lowering-crash: the lowering ``coreml-lint verify`` ran crashed.

What it does
    Reported by ``coreml-lint verify`` when the stock lowering (``to_edge_transform_and_lower``
    with ``CoreMLPartitioner`` and your settings, then ``to_executorch``) raises before any
    partition can be compared. The finding names the stage and the error's first line; the
    linter's findings on the same program say whether a rule predicted it.

Why it breaks
    Whatever the error says: a crash is what the rules exist to predict, and one that no
    rule predicted is worth reporting to the project.

Example
    ``torch.lerp(a, b, w)`` delegated: ``Concat concat_0 got 0 values``.

Fix
    The fix of the rule that predicted it, ``coreml-lint lower``, or keeping the failing op
    on the CPU.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from coreml_lint.core.findings import Outcome
from coreml_lint.rulekit.rule import Rule


class LoweringCrash(Rule):
    code = "CML902"
    name = "lowering-crash"
    outcome = Outcome.CRASH
    summary = "verify: the stock lowering crashed before anything could be compared"
    cannot_lower = "a crash found by lowering; the lint findings say which rule predicted it"

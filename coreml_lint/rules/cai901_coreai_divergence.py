"""CAI901 coreai-divergence: the program, run on Core AI, computes other values than eager.

What it does
    Reported by ``coreml-lint verify --target coreai``, which converts the whole program with
    coreai-torch, compiles and runs it on Core AI's runtime (Linux, CPU) and compares every
    output and every written buffer (Core AI state) with eager on the same inputs: a float32
    model within float32 rounding (1e-5 of the output's scale), a ``.half()`` model within
    float16 rounding, an integer output exactly. The finding names the output, the node
    that produced it and its model source line.

Why it breaks
    Core AI converts by its own lowerings, and a few compute other values than torch
    (``avg_pool2d(..., count_include_pad=False)`` with padding averages its border windows
    over the padding too; an int64 constant past int32 is narrowed and wraps).

Example
    ``F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)``: about half the
    output's scale wrong on the border windows.

Fix
    The Core AI rule the finding names, if any (``coreml-lint --target coreai``); otherwise
    compute the value another way and verify again.
"""

from __future__ import annotations

from coreml_lint.core.findings import Outcome
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule


class CoreAIDivergence(Rule):
    code = "CAI901"
    name = "coreai-divergence"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.SILENT
    summary = "verify --target coreai: Core AI computes other values than eager"
    cannot_lower = "found only by running the program on Core AI"

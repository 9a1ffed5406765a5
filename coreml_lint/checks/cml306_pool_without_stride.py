"""CML306 pool-without-stride: ``max_pool1d``/``max_pool2d`` called without a stride.

What it does
    Flags a delegated ``max_pool1d``/``max_pool2d`` with fewer than three positional
    arguments: ``F.max_pool2d(x, 2)``.

Why it breaks
    Export omits an argument left at its default (the stride), and coremltools' handler
    requires at least three positional inputs: ``ValueError: node aten_max_pool2d_default
    (max_pool2d) got 2 input(s), expected minimum 3 inputs`` (pitfalls.md G2).
    ``nn.MaxPool2d(2)`` is fine: the module passes its stride explicitly.

Example
    ``F.max_pool2d(x, 2)``

Fix
    (a) pass the stride: ``F.max_pool2d(x, 2, 2)``, or use ``nn.MaxPool2d(2)``.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome

POOLS = {"aten.max_pool1d.default", "aten.max_pool2d.default"}


class PoolWithoutStride(Rule):
    code = "CML306"
    name = "pool-without-stride"
    outcome = Outcome.CRASH
    summary = "max_pool without stride: coremltools expects at least 3 inputs"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in POOLS:
                continue
            if len(node.args) >= 3:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} without a stride is delegated: lowering fails with "
                f"`ValueError: node aten_{node.op_base}_default ({node.op_base}) got "
                f"{len(node.args)} input(s), expected minimum 3 inputs`",
                fix=f"pass the stride explicitly: F.{node.op_base}(x, k, k)",
            )

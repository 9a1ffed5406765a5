"""CML501 output-repeats-value: a returned clone of an input or of another output.

What it does
    Flags a program output made by a delegated ``clone`` of a program input (or of another
    value the partition receives), or of a value that the partition also returns.

Why it breaks
    ExecuTorch registers ``_clone_dim_order`` for coremltools as a no-op, so the clone
    vanishes and the MIL function returns the var it copied: ``x.clone()`` makes a Core ML
    output that *is* the input var (spec output ``x`` = input name), and ``y, y.clone()``
    makes two outputs with the same name. Nothing rejects this on Linux; on device the
    output does not hold what the program means (pitfalls.md §10).

Example
    ``return x.clone(), x * 2``

Fix
    (a) return a real op, ``x * 1.0`` / ``x + 0.0``, or return ``x`` itself and let ExecuTorch
    pass it through; (b) ``skip_ops_for_coreml_delegation=["aten.clone.default",
    "dim_order_ops._clone_dim_order.default"]``; (c) rewrite output clones to their source.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome

CLONES = {
    "aten.clone.default",
    "aten._clone_dim_order.default",
    "dim_order_ops._clone_dim_order.default",
}


class OutputRepeatsValue(Rule):
    code = "CML501"
    name = "output-repeats-value"
    outcome = Outcome.SILENT
    summary = "returned clone of an input/output becomes the same Core ML var"
    lower_fixes = True  # `coreml-lint lower` rewrites or refuses it

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        outputs = ctx.user_outputs
        for position, value in enumerate(outputs):
            node = ctx.producers.get(value)
            if node is None or node.target not in CLONES or not ctx.on_coreml(node):
                continue
            source = node.tensor_inputs()[0]
            part = ctx.placement.partition_of(node)
            assert part is not None
            if source in part.inputs or source in part.states:
                what = f"the partition's input '{source}'"
                detail = "the Core ML output is the input var itself"
            elif source in outputs[:position] + outputs[position + 1 :] or (source in part.outputs):
                what = f"'{source}', which the partition also returns"
                detail = "the Core ML model has two outputs with the same name"
            else:
                continue
            yield ctx.finding(
                node,
                f"output {position} is a clone of {what}: ExecuTorch's Core ML clone is a "
                f"no-op, so {detail} and the output does not hold what the program means",
                fix=f"return '{source}' itself (ExecuTorch passes it through) or a real op "
                f"such as `{source} * 1.0`",
                partitioner=ctx.skip_advice(node),
            )

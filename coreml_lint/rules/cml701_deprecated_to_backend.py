"""CML701 deprecated-to-backend: lowering with ``to_edge(...).to_backend(CoreMLPartitioner())``.

What it does
    Flags an export script that lowers to Core ML through the deprecated
    ``to_edge(ep).to_backend(CoreMLPartitioner(...))`` path (or ``export_to_edge`` +
    ``to_backend``) instead of ``to_edge_transform_and_lower``.

Why it breaks
    It still lowers, and logs a ``DEPRECATION WARNING`` through Python logging (not
    ``warnings``). ``to_edge`` never asks the partitioner which ops to keep whole, so SDPA,
    ``linear`` and ``layer_norm`` are decomposed before Core ML sees them: the delegate gets
    2-3x more edge ops (72 vs 22 on a small transformer block) and 1.5-1.9x more MIL ops
   .

Example
    ``to_edge(torch.export.export(model, inputs)).to_backend(CoreMLPartitioner())``

Fix
    ``to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner()])`` (marked unsafe:
    the Core ML program changes, for the better, so compare outputs once).

References
    - https://github.com/pytorch/executorch/blob/main/backends/apple/coreml/partition/coreml_partitioner.py
      CoreMLPartitioner warns that to_edge() + to_backend() decomposes ops Core ML has fused
      forms of
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity, SourceFix, replacement
from coreml_lint.rulekit.examples import Invalid, Valid
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args
from coreml_lint.source.patterns import enclosing_function, single_assignment

TO_EDGE = {
    "executorch.exir.to_edge",
    "executorch.exir.program.to_edge",
    "executorch.exir.program._program.to_edge",
}
PARTITIONER = "CoreMLPartitioner"


TO_BACKEND = """
import torch
from executorch.backends.apple.coreml.partition import CoreMLPartitioner
from executorch.exir import to_edge

ep = torch.export.export(model, inputs)
lowered = to_edge(ep).to_backend(CoreMLPartitioner())
"""
TO_BACKEND_FIXED = """
import torch
from executorch.backends.apple.coreml.partition import CoreMLPartitioner
from executorch.exir import to_edge_transform_and_lower

ep = torch.export.export(model, inputs)
lowered = to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner()])
"""


@replacement
def _transform_and_lower(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``to_edge(ep).to_backend(CoreMLPartitioner(...))`` as
    ``to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(...)])``."""
    import libcst as cst

    from coreml_lint.rulekit.cst import kwarg, with_args

    inner = call.func.value
    partitioner = cst.List([cst.Element(call.args[0].value)])
    from libcst.codemod.visitors import RemoveImportsVisitor

    edits.need_import("executorch.exir", "to_edge_transform_and_lower")
    for module in ("executorch.exir", "executorch.exir.program"):
        RemoveImportsVisitor.remove_unused_import(edits.context, module, "to_edge")
    lowered = cst.Call(func=cst.Name("to_edge_transform_and_lower"))
    return with_args(lowered, [*inner.args, kwarg("partitioner", partitioner)])


class DeprecatedToBackend(Rule):
    code = "CML701"
    name = "deprecated-to-backend"
    severity = Severity.WARNING
    outcome = Outcome.CPU
    summary = "to_edge().to_backend(CoreMLPartitioner()): Core ML gets a decomposed graph"
    source_triggers = ("to_backend",)
    source_pattern = "`to_edge(ep).to_backend(CoreMLPartitioner(...))`, also split over statements"
    source_fix = "`to_edge_transform_and_lower(ep, partitioner=[...])` (the chained form)"
    examples = (Invalid(TO_BACKEND, TO_BACKEND_FIXED, at=(7, 11)), Valid(TO_BACKEND_FIXED))

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "to_backend"):
                continue
            if len(call.args) != 1 or call.keywords:
                continue
            partitioner = call.args[0]
            if isinstance(partitioner, ast.Name):  # partitioner = CoreMLPartitioner(...)
                scope = enclosing_function(ctx, call)
                partitioner = single_assignment(ctx, partitioner.id, scope)
            if not _is_coreml_partitioner(partitioner):
                continue
            inner = func.value
            chained = (
                isinstance(inner, ast.Call)
                and ctx.qualname(inner.func) in TO_EDGE
                and not has_star_args(inner)
            )
            yield ctx.finding(
                call,
                "the deprecated to_edge().to_backend() path decomposes SDPA, linear and "
                "layer_norm before Core ML sees them: 2-3x more ops in the delegate",
                fix="use to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(...)])",
                edit=ctx.edit(
                    call,
                    _transform_and_lower,
                    safe=False,
                    description="to_edge_transform_and_lower(..., partitioner=[...])",
                )
                if chained
                else None,
            )


def _is_coreml_partitioner(expr: ast.AST) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == PARTITIONER

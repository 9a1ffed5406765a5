"""CML105 bool-min-max: max/min/amax/amin/maximum/minimum on a bool tensor in Core ML.

What it does
    Flags a delegated ``amax``, ``amin``, ``max``, ``min``, ``maximum`` or ``minimum`` whose
    tensor input is bool (typically a comparison result).

Why it breaks
    coremltools hands the bool tensor straight to MIL ``reduce_max`` / ``reduce_min`` /
    ``maximum`` / ``minimum``, which accept only fp16, fp32 and int32, so lowering stops
    with ``ValueError: Op "aten_amax_default" (op_type: reduce_max) Input x=... expects
    tensor or scalar of dtype from type domain ['fp16', 'fp32', 'int32'] but got
    tensor[2,6,bool]``, at every target (pitfalls.md §4). ``any``/``all`` cast to int32
    first and lower fine.

Example
    ``m = a > 0; m.amax(dim=1)``; ``torch.maximum(a > 0, b > 0)``.

Fix
    (a) ``m.any(dim)`` for amax/max, ``m.all(dim)`` for amin/min, ``torch.logical_or`` /
    ``torch.logical_and`` for maximum/minimum, or cast to int32 first; (b) skip the op, e.g.
    ``skip_ops_for_coreml_delegation=["aten.amax.default"]``; (c) rewrite to any/all/logical
    ops in the ExportedProgram.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome
from coreml_lint.source.context import SourceContext, SourceFix, has_star_args
from coreml_lint.source.patterns import enclosing_function, is_bool

REPLACEMENTS = {
    "amax": "`.any(dim)`",
    "amin": "`.all(dim)`",
    "max": "`.any()` (or cast to int32 before `.max(dim)`)",
    "min": "`.all()` (or cast to int32 before `.min(dim)`)",
    "maximum": "`torch.logical_or(a, b)`",
    "minimum": "`torch.logical_and(a, b)` (or `a & b`)",
}
MIL_OPS = {
    "amax": "reduce_max",
    "max": "reduce_max",
    "amin": "reduce_min",
    "min": "reduce_min",
    "maximum": "maximum",
    "minimum": "minimum",
}


class BoolMinMax(Rule):
    code = "CML105"
    name = "bool-min-max"
    outcome = Outcome.CRASH
    summary = "min/max family on a bool tensor in Core ML: MIL rejects bool"
    lower_fixes = True  # `coreml-lint lower` rewrites or refuses it

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            base = node.op_base
            if base not in REPLACEMENTS or node.namespace != "aten":
                continue
            bools = [v for v in node.tensor_inputs() if ctx.dtype(v) == "bool"]
            if not bools:
                continue
            replacement = REPLACEMENTS[base]
            if base in ("max", "min") and node.target.endswith((".other",)):
                replacement = REPLACEMENTS["maximum" if base == "max" else "minimum"]
            yield ctx.finding(
                node,
                f"{base} on bool tensor '{bools[0]}' is delegated: lowering fails with "
                f"`ValueError: Op ... (op_type: {MIL_OPS[base]}) ... expects tensor or scalar "
                "of dtype from type domain ['fp16', 'fp32', 'int32'] but got tensor[...,bool]`",
                fix=f"use {replacement} on the bool tensor",
                partitioner=ctx.skip_advice(node),
            )

    source_triggers = ("max", "min")

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            if has_star_args(call):
                continue
            method = call.func.attr if isinstance(call.func, ast.Attribute) else None
            name = ctx.qualname(call.func)
            if name and name.startswith("torch.") and name[6:] in SOURCE_FIXES:
                op, operands, rest = name[6:], call.args[:1], call.args[1:]
                if op in ("maximum", "minimum") or (
                    op in ("max", "min")
                    and len(call.args) == 2
                    and not isinstance(call.args[1], ast.Constant)
                ):
                    operands, rest = call.args[:2], []
                    op = {"max": "maximum", "min": "minimum"}.get(op, op)
            elif name is None and method in SOURCE_FIXES and isinstance(call.func, ast.Attribute):
                op, operands, rest = method, [call.func.value], call.args
            else:
                continue
            scope = enclosing_function(ctx, call)
            if not operands or not all(is_bool(ctx, o, scope) for o in operands):
                continue
            replacement, fixable = SOURCE_FIXES[op]
            if op in ("max", "min") and (rest or call.keywords):
                fixable = False  # max(dim) returns (values, indices): no drop-in bool op
            yield ctx.finding(
                call,
                f"{op} on a bool tensor: Core ML's reduce_max/maximum accept only fp16, fp32 "
                "and int32, so lowering fails (`expects ... ['fp16', 'fp32', 'int32'] but got "
                "tensor[...,bool]`)",
                fix=f"use {replacement}" if fixable else "cast to int32 first: `m.int().max(dim)`",
                edit=ctx.edit(call, "bool-op", safe=True, description=replacement, op=op)
                if fixable
                else None,
            )

    def transform(self, fix: SourceFix, call: Any, edits: Any) -> Any:
        import libcst as cst

        op = fix.get("op")
        target = {
            "amax": "any",
            "max": "any",
            "amin": "all",
            "min": "all",
            "maximum": "logical_or",
            "minimum": "logical_and",
        }[op]
        func = call.func
        if isinstance(func, cst.Attribute):
            return call.with_changes(func=func.with_changes(attr=cst.Name(target)))
        return call.with_changes(func=cst.parse_expression(f"{edits.torch()}.{target}"))


SOURCE_FIXES = {
    "amax": ("`.any(dim)` / `torch.any`", True),
    "amin": ("`.all(dim)` / `torch.all`", True),
    "max": ("`.any()`", True),
    "min": ("`.all()`", True),
    "maximum": ("`torch.logical_or`", True),
    "minimum": ("`torch.logical_and`", True),
}

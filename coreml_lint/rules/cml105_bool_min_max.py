"""CML105 bool-min-max: max/min/amax/amin/maximum/minimum on a bool tensor in Core ML.

What it does
    Flags a delegated ``amax``, ``amin``, ``max``, ``min``, ``maximum`` or ``minimum`` whose
    tensor input is bool (typically a comparison result).

Why it breaks
    coremltools hands the bool tensor straight to MIL ``reduce_max`` / ``reduce_min`` /
    ``maximum`` / ``minimum``, which accept only fp16, fp32 and int32, so lowering stops
    with ``ValueError: Op "aten_amax_default" (op_type: reduce_max) Input x=... expects
    tensor or scalar of dtype from type domain ['fp16', 'fp32', 'int32'] but got
    tensor[2,6,bool]``, at every target. ``any``/``all`` cast to int32
    first and lower fine.

Example
    ``m = a > 0; m.amax(dim=1)``; ``torch.maximum(a > 0, b > 0)``.

Fix
    (a) ``m.any(dim)`` for amax/max, ``m.all(dim)`` for amin/min, ``torch.logical_or`` /
    ``torch.logical_and`` for maximum/minimum, or cast to int32 first; (b) skip the op, e.g.
    ``skip_ops_for_coreml_delegation=["aten.amax.default"]``; (c) rewrite to any/all/logical
    ops in the ExportedProgram.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args
from coreml_lint.source.patterns import enclosing_function, is_bool
from coreml_lint.source.triggers import CalleeNames

# The one table of this rule: op -> (its bool twin, the MIL op coremltools emits for it,
# what to write in the model instead).
BOOL_TWINS = {
    "amax": ("any", "reduce_max", "`.any(dim)`"),
    "amin": ("all", "reduce_min", "`.all(dim)`"),
    "max": ("any", "reduce_max", "`.any()` (or cast to int32 before `.max(dim)`)"),
    "min": ("all", "reduce_min", "`.all()` (or cast to int32 before `.min(dim)`)"),
    "maximum": ("logical_or", "maximum", "`torch.logical_or(a, b)`"),
    "minimum": ("logical_and", "minimum", "`torch.logical_and(a, b)` (or `a & b`)"),
}
PAIRWISE = {"max": "maximum", "min": "minimum"}  # max(a, b) is maximum(a, b)


@replacement
def _bool_twin(fix: SourceFix, call: Any, edits: Any) -> Any:
    """The call with its bool twin as callee (``x.max()`` -> ``x.any()``, ``torch.maximum``
    -> ``torch.logical_or``): the same arguments, the same values."""
    import libcst as cst

    twin = fix.get("twin")
    func = call.func
    if isinstance(func, cst.Attribute):
        return call.with_changes(func=func.with_changes(attr=cst.Name(twin)))
    return call.with_changes(func=cst.parse_expression(f"{edits.torch()}.{twin}"))


class BoolMinMax(Rule):
    code = "CML105"
    name = "bool-min-max"
    outcome = Outcome.CRASH
    summary = "min/max family on a bool tensor in Core ML: MIL rejects bool"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            base = node.op_base
            if base not in BOOL_TWINS or node.namespace != "aten":
                continue
            bools = [v for v in node.tensor_inputs() if ctx.dtype(v) == "bool"]
            if not bools:
                continue
            _, mil_op, replacement = BOOL_TWINS[base]
            if node.target.endswith(".other"):
                replacement = BOOL_TWINS[PAIRWISE[base]][2]
            yield ctx.finding(
                node,
                f"{base} on bool tensor '{bools[0]}' is delegated: lowering fails with "
                f"`ValueError: Op ... (op_type: {mil_op}) ... expects tensor or scalar "
                "of dtype from type domain ['fp16', 'fp32', 'int32'] but got tensor[...,bool]`",
                fix=f"use {replacement} on the bool tensor",
                partitioner=ctx.skip_advice(node),
            )

    source_triggers = (CalleeNames(*BOOL_TWINS),)
    source_pattern = "`amax/amin/max/min/maximum/minimum` on visibly bool tensors"
    source_fix = "`any` / `all` / `logical_or` / `logical_and`"
    examples = (
        Invalid("m = (x > 0).amax(dim=1)", "m = (x > 0).any(dim=1)", at=(1, 5)),
        Invalid("m = torch.maximum(a > 0, b > 0)", "m = torch.logical_or(a > 0, b > 0)", at=(1, 5)),
        Invalid("m = (x > 0).max(dim=1)", at=(1, 5)),  # returns (values, indices): no drop-in fix
        Valid("m = x.amax(dim=1)"),
        Valid("m = torch.maximum(a, b)"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            method = call.func.attr if isinstance(call.func, ast.Attribute) else None
            if method is not None and method not in BOOL_TWINS:
                continue  # a qualified name ends in the attribute: no torch.<twin> either
            if has_star_args(call):
                continue
            name = ctx.qualname(call.func)
            if name and name.startswith("torch.") and name[6:] in BOOL_TWINS:
                op, operands, rest = name[6:], call.args[:1], call.args[1:]
                if op in ("maximum", "minimum") or (
                    op in ("max", "min")
                    and len(call.args) == 2
                    and not isinstance(call.args[1], ast.Constant)
                ):
                    operands, rest = call.args[:2], []
                    op = PAIRWISE.get(op, op)
            elif name is None and method in BOOL_TWINS and isinstance(call.func, ast.Attribute):
                op, operands, rest = method, [call.func.value], call.args
            else:
                continue
            scope = enclosing_function(ctx, call)
            if not operands or not all(is_bool(ctx, o, scope) for o in operands):
                continue
            twin, _, replacement = BOOL_TWINS[op]
            # max(dim) returns (values, indices): no drop-in bool op
            fixable = not (op in ("max", "min") and (rest or call.keywords))
            yield ctx.finding(
                call,
                f"{op} on a bool tensor: Core ML's reduce_max/maximum accept only fp16, fp32 "
                "and int32, so lowering fails (`expects ... ['fp16', 'fp32', 'int32'] but got "
                "tensor[...,bool]`)",
                fix=f"use {replacement}" if fixable else "cast to int32 first: `m.int().max(dim)`",
                edit=ctx.edit(call, _bool_twin, safe=True, description=f"use {twin}", twin=twin)
                if fixable
                else None,
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The call at the finding's line, whatever names its operands have: the program
        knows they are bool tensors, so its bool twin computes the same values."""
        if finding.location is None or finding.op is None:
            return None
        _, base, overload = [*finding.op.split("."), "", ""][:3]
        if base in PAIRWISE and overload == "dim":
            return "max(dim)/min(dim) return (values, indices): no drop-in bool op"
        pairwise = overload == "other" or base in ("maximum", "minimum")
        op = PAIRWISE.get(base, base) if pairwise else base
        names = {op, next((k for k, v in PAIRWISE.items() if v == op), op)} if pairwise else {op}
        calls = [c for c in source.calls() if c.lineno == finding.location.line]
        matching = [c for c in calls if _called_name(source, c) in names and not has_star_args(c)]
        if len(matching) != 1:
            return not_one_call(finding.location.line, len(matching), op)
        twin = BOOL_TWINS[op][0]
        return source.edit(matching[0], _bool_twin, safe=True, description=f"use {twin}", twin=twin)

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Each bool min/max-family op becomes its any/all/logical twin (the same values)."""
        import torch

        from coreml_lint.rulekit.fx import aten, finish, op_base, val

        done = []
        for node in ep.graph.nodes:
            base, overload = op_base(node), getattr(node.target, "_overloadname", "")
            inputs = [val(a) for a in node.args if isinstance(a, torch.fx.Node)]
            if base not in BOOL_TWINS or overload == "dim" or node.op != "call_function":
                continue
            if not inputs or not all(v is not None and v.dtype == torch.bool for v in inputs):
                continue
            twin = BOOL_TWINS[PAIRWISE[base] if overload == "other" else base][0]
            if base in ("amax", "amin"):
                dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
                keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
                node.args, node.kwargs = (node.args[0], list(dim) or None, keepdim), {}
                node.target = getattr(aten, twin).dims
            else:
                node.target = getattr(aten, twin).default
            done.append(f"{node.name}: {base} of a bool tensor written as {twin}")
        return finish(ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        import torch

        from coreml_lint.rulekit.fx import touches

        name = getattr(node.target, "__name__", "")
        if name.endswith(("max.dim", "min.dim")) and touches(node, {torch.bool}):
            return "bool max/min with dim (no drop-in bool op; the CPU has a kernel)"
        return None


def _called_name(source: SourceContext, call: ast.Call) -> str | None:
    """``torch.maximum(a, b)`` -> ``maximum``; ``m.amax(1)`` -> ``amax``."""
    name = source.qualname(call.func)
    if name and name.startswith("torch."):
        return name[len("torch.") :]
    return call.func.attr if isinstance(call.func, ast.Attribute) and name is None else None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def _bool_case(id: str, op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], bad: bool):
    @case(id, expect={"CML105"} if bad else set(), crash=r"type domain" if bad else None)
    def _():
        return module(lambda s, a, b: op(a > 0, b > 0).float()), (
            torch.randn(2, 6),
            torch.randn(2, 6),
        )


_bool_case("bool-amax", lambda m, n: m.amax(dim=1), True)
_bool_case("bool-max-all", lambda m, n: torch.max(m), True)
_bool_case("bool-min-dim", lambda m, n: m.min(dim=1).values, True)
_bool_case("bool-maximum", lambda m, n: torch.maximum(m, n), True)
_bool_case("bool-minimum", lambda m, n: torch.minimum(m, n), True)
_bool_case("bool-any", lambda m, n: m.any(dim=1), False)
_bool_case("bool-logical-or", lambda m, n: torch.logical_or(m, n), False)
_bool_case("float-amax", lambda m, n: m.float().amax(dim=1), False)

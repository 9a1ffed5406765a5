"""CML303 rms-norm-without-eps: ``rms_norm`` reaches Core ML without an eps argument.

What it does
    Flags a delegated ``aten.rms_norm`` with fewer than four positional arguments:
    ``nn.RMSNorm(d)`` or ``F.rms_norm(x, shape)`` without ``eps=``.

Why it breaks
    Export drops a trailing ``eps=None`` (and ``weight=None``), and coremltools' handler
    requires exactly four positional inputs: ``ValueError: node aten_rms_norm_default
    (rms_norm) got 3 input(s), expected [4]`` (2 without a weight).

Example
    ``self.norm = nn.RMSNorm(16)``

Fix
    (a) pass ``eps=`` explicitly, e.g. ``eps=torch.finfo(torch.float32).eps`` (torch's own
    default) or ``1e-6``; (b) ``skip_ops_for_coreml_delegation=["rms_norm.default"]`` (ATen
    spelling: torch decomposes it and the pieces are delegated); (c) append eps to the
    node's arguments. Note: once it lowers, the Core ML formula divides by max|x| first,
    which gives NaN for an all-zero row.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix
from coreml_lint.rulekit.context import ProgramContext, direct_attribute
from coreml_lint.rulekit.examples import Invalid, Valid, case, nn, wrapped
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword
from coreml_lint.source.patterns import assigned_calls, parameter_default, resolved_qualname


class RmsNormWithoutEps(Rule):
    code = "CML303"
    name = "rms-norm-without-eps"
    outcome = Outcome.CRASH
    summary = "rms_norm without eps: coremltools expects 4 inputs"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target != "aten.rms_norm.default" or len(node.args) >= 4:
                continue
            yield ctx.finding(
                node,
                f"rms_norm is delegated without eps: lowering fails with `ValueError: node "
                f"aten_rms_norm_default (rms_norm) got {len(node.args)} input(s), expected [4]`",
                fix="pass eps= to nn.RMSNorm / F.rms_norm (torch's default is "
                "torch.finfo(dtype).eps)",
                partitioner=ctx.with_skip("rms_norm.default"),
                modules=(stack := node.modules()[-2:]),
                built_there=_built_there(ctx, stack),
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """An ``nn.RMSNorm`` built in ``__init__``: the program knows which module made the
        node (``self.<attribute>``) and in which class, so its constructor call gets eps,
        whatever name the call goes through: ``nn.RMSNorm``, an alias of it, or a
        ``norm_layer=nn.RMSNorm`` parameter (unsafe: another norm layer passed in another
        configuration would get the eps too). Refused when the program itself shows that
        line building another class as well. ``F.rms_norm`` is left to the source check."""
        modules = finding.extra.get("modules") or []
        if len(modules) < 2 or not modules[-1][1].endswith("RMSNorm"):
            return None
        attribute = direct_attribute(modules[-2][0], modules[-1][0])
        owner = modules[-2][1].rsplit(".", 1)[-1]
        if attribute is None:
            return f"{modules[-1][0]} is not an attribute of the module that calls it"
        others = [c for c in finding.extra.get("built_there", []) if c != modules[-1][1]]
        if others:
            shown = ", ".join(c.rsplit(".", 1)[-1] for c in others)
            return f"`self.{attribute}` of {owner} is also built as {shown} in this program"
        found = next(_constructors(source, owner, attribute), None)
        if found is not None:
            return _eps_edit(source, found[1], attribute, found[0])
        calls = [c for cls in source.classes(owner) for _, c in assigned_calls(cls, attribute)]
        if not calls:
            return f"no `self.{attribute} = ...(...)` in a class {owner} of this file"
        return (
            f"`self.{attribute} = {ast.unparse(calls[0].func)}(...)`: the source does not show "
            "that it is always nn.RMSNorm"
        )

    source_triggers = ("RMSNorm", "rms_norm")
    source_pattern = "`nn.RMSNorm(d)` / `F.rms_norm(x, shape)` without `eps`"
    source_fix = "`eps=torch.finfo(torch.float32).eps` (torch's fp32 default)"
    examples = (
        Invalid(
            "norm = nn.RMSNorm(64)", "norm = nn.RMSNorm(64, eps=torch.finfo(torch.float32).eps)"
        ),
        Invalid(
            "y = F.rms_norm(x, (64,), None, None)",
            "y = F.rms_norm(x, (64,), None, eps=torch.finfo(torch.float32).eps)",
        ),
        Invalid(
            "RMSNorm = nn.RMSNorm\nnorm = RMSNorm(64)",
            "RMSNorm = nn.RMSNorm\nnorm = RMSNorm(64, eps=torch.finfo(torch.float32).eps)",
        ),
        Valid("norm = nn.RMSNorm(64, eps=1e-6)"),
        Valid("Norm = nn.RMSNorm\nif big:\n    Norm = nn.LayerNorm\nnorm = Norm(64)"),
        Valid("y = F.rms_norm(x, (64,), eps=1e-5)"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            name = resolved_qualname(ctx, call.func)
            if has_star_args(call):
                continue
            if name == "torch.nn.RMSNorm":
                eps_position = 1
            elif name == "torch.nn.functional.rms_norm":
                eps_position = 3
            else:
                continue
            eps = call.args[eps_position] if len(call.args) > eps_position else keyword(call, "eps")
            if eps is not None and not (isinstance(eps, ast.Constant) and eps.value is None):
                continue
            yield ctx.finding(
                call,
                f"{name.rsplit('.', 1)[-1]} without eps: export drops eps=None and coremltools "
                "needs it, so lowering fails with `got 3 input(s), expected [4]`",
                fix="pass eps=torch.finfo(torch.float32).eps (torch's own default for float32)",
                edit=ctx.edit(
                    call,
                    "add-eps",
                    safe=True,
                    description="eps=torch.finfo(torch.float32).eps, torch's default for fp32",
                    replace=eps is not None,
                ),
                partitioner=None,
            )

    def transform(self, fix: SourceFix, call: Any, edits: Any) -> Any:
        from coreml_lint.rulekit.cst import kwarg, with_args

        torch = edits.torch()
        value = f"{torch}.finfo({torch}.float32).eps"
        args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "eps")]
        if fix.get("replace") and len(args) == len(call.args):  # eps=None passed positionally
            position = fix.get("position", 1 if fix.callee == "RMSNorm" else 3)
            args = args[:position] + args[position + 1 :]
        return with_args(call, [*args, kwarg("eps", value)])

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        import torch

        from coreml_lint.rulekit.fx import aten, finish, val

        done = []
        for node in ep.graph.nodes:
            if node.target != aten.rms_norm.default or len(node.args) >= 4:
                continue
            x = val(node.args[0])
            eps = torch.finfo(x.dtype if x is not None else torch.float32).eps
            weight = node.args[2] if len(node.args) > 2 else node.kwargs.get("weight")
            node.args, node.kwargs = (node.args[0], node.args[1], weight, eps), {}
            done.append(f"{node.name}: rms_norm given eps={eps:g} (torch's default)")
        return finish(ep), done


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("rmsnorm-no-eps", expect={"CML303"}, crash=r"got 3 input\(s\), expected \[4\]")
def _():
    return wrapped(nn.RMSNorm(16))


@case("rmsnorm-no-eps-no-affine", expect={"CML303"}, crash=r"got 2 input\(s\), expected \[4\]")
def _():
    return wrapped(nn.RMSNorm(16, elementwise_affine=False))


@case("rmsnorm-eps", expect=set())
def _():
    return wrapped(nn.RMSNorm(16, eps=1e-6))


@case("rmsnorm-no-eps-aten-skip", expect=set(), settings={"skip": ["rms_norm.default"]})
def _():
    return wrapped(nn.RMSNorm(16))


def _built_there(ctx: ProgramContext, stack: list[tuple[str, str]]) -> list[str]:
    """Every class the program has at the node's module's attribute of an owner of the
    same class (one ``self.norm = norm_layer(dim)`` line may build several)."""
    if len(stack) < 2:
        return []
    attribute = direct_attribute(stack[-2][0], stack[-1][0])
    site = (stack[-2][1].rsplit(".", 1)[-1], attribute or "")
    return sorted(ctx.module_sites.get(site, set()))


def _constructors(
    source: SourceContext, owner: str, attribute: str
) -> Iterator[tuple[ast.AST, ast.Call]]:
    """``self.<attribute> = <callee>(...)`` in class ``owner`` whose callee is nn.RMSNorm,
    a module-level alias of it, or a parameter defaulting to it."""
    for cls in source.classes(owner):
        for method, call in assigned_calls(cls, attribute):
            if resolved_qualname(source, call.func) == "torch.nn.RMSNorm":
                yield method, call
            elif isinstance(call.func, ast.Name):
                default = parameter_default(method, call.func.id)
                if resolved_qualname(source, default) == "torch.nn.RMSNorm":
                    yield method, call


def _eps_edit(
    source: SourceContext, call: ast.Call, attribute: str, method: ast.AST
) -> SourceFix | str:
    if has_star_args(call):
        return f"`self.{attribute} = ...(*args)`: eps cannot be placed"
    eps = keyword(call, "eps") or (call.args[1] if len(call.args) > 1 else None)
    if eps is not None and not (isinstance(eps, ast.Constant) and eps.value is None):
        return f"self.{attribute} already gets eps in the source: export again"
    through_parameter = (
        isinstance(call.func, ast.Name)
        and parameter_default(method, call.func.id) is not None
        and resolved_qualname(source, call.func) is None
    )
    also = f" (also to any other {call.func.id} passed in)" if through_parameter else ""
    return source.edit(
        call,
        "add-eps",
        safe=not through_parameter,
        description=f"eps=torch.finfo(torch.float32).eps, torch's default for fp32{also}",
        replace=eps is not None,
        position=1,
    )

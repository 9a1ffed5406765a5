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

References
    - https://github.com/apple/coremltools/pull/2592
      adds the rms_norm converter (for nn.RMSNorm) this rule's crash comes from
    - https://github.com/apple/coremltools/issues/2821
      the same converter inflates eps by max|x|^2 (open; fix proposed in PR #2822)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, nn, wrapped
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword
from coreml_lint.source.patterns import (
    enclosing_function,
    is_rebound,
    parameter_default,
    resolved_qualname,
)
from coreml_lint.source.sites import (
    chosen_by,
    constructor_calls,
    module_site,
    owner_stack,
    shown,
)

RMSNORM_BY_DEFAULT = """
class Block(nn.Module):
    def __init__(self, dim, norm_layer=nn.RMSNorm):
        super().__init__()
        self.norm = norm_layer(dim)


block = Block(64)
"""


@replacement
def _with_eps(fix: SourceFix, call: Any, edits: Any) -> Any:
    """The norm call with ``eps=torch.finfo(torch.float32).eps`` (an ``eps=None`` it passed,
    by keyword or at ``fix.get("position")``, removed)."""
    from coreml_lint.rulekit.cst import kwarg, with_args

    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "eps")]
    if fix.get("replace") and len(args) == len(call.args):  # eps=None passed positionally
        position = fix.get("position", 1 if fix.callee == "RMSNorm" else 3)
        args = args[:position] + args[position + 1 :]
    return with_args(call, [*args, kwarg("eps", _fp32_eps(edits))])


@replacement
def _partial_with_eps(fix: SourceFix, node: Any, edits: Any) -> Any:
    """The expression that chooses the norm class (``nn.RMSNorm`` as a default or an
    argument) as ``functools.partial(nn.RMSNorm, eps=...)``."""
    import libcst as cst

    from coreml_lint.rulekit.cst import code

    edits.need_import("functools")
    return cst.parse_expression(f"functools.partial({code(node)}, eps={_fp32_eps(edits)})")


def _fp32_eps(edits: Any) -> str:
    torch = edits.torch()
    return f"{torch}.finfo({torch}.float32).eps"


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
                modules=(stack := owner_stack(chain := node.modules())),
                chain=chain,
                built_there=_built_there(ctx, stack),
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """An ``nn.RMSNorm`` the model builds: the program knows which module made the node
        and which class owns it, so the call that builds it gets eps, however it is laid out
        (``self.norm = ...``, an item of a ``ModuleList`` comprehension, a ``Sequential``
        argument, a helper's return value: ``source/sites.py``) and whatever name the call
        goes through: ``nn.RMSNorm``, an alias of it, or a ``norm_layer=nn.RMSNorm``
        parameter (unsafe: another norm layer passed in another configuration would get the
        eps too). Refused when the program itself shows that place holding another class
        as well. ``F.rms_norm`` is left to the source check."""
        modules = finding.extra.get("modules") or []
        if len(modules) < 2 or modules[-1][1] != "torch.nn.modules.normalization.RMSNorm":
            return None
        site = module_site(modules)
        if site is None:
            return f"{modules[-1][0]} is not built by a module that calls it"
        owner, relative = site
        others = [c for c in finding.extra.get("built_there", []) if c != modules[-1][1]]
        if others:
            names = ", ".join(c.rsplit(".", 1)[-1] for c in others)
            return f"`{shown(relative)}` of {owner} is also built as {names} in this program"
        built = constructor_calls(source, owner, relative)
        norms = [(m, c) for m, c in built if _is_rms_norm(source, m, c)]
        if len(norms) == 1:
            return _eps_edit(source, norms[0][1], shown(relative), norms[0][0])
        if len(norms) > 1:
            return f"{len(norms)} calls in class {owner} may build `{shown(relative)}`"
        if not built:
            return f"no call in a class {owner} of this file builds `{shown(relative)}`"
        upstream = _chosen_upstream(source, finding.extra.get("chain") or [], modules, built)
        if upstream is not None:
            return upstream
        return (
            f"`{shown(relative)} = {ast.unparse(built[0][1].func)}(...)`: the source does not "
            "show that it is always nn.RMSNorm"
        )

    source_triggers = ("RMSNorm", "rms_norm")
    source_pattern = (
        "`nn.RMSNorm(d)` / `F.rms_norm(x, shape)` without `eps`; `norm_layer(d)` whose "
        "parameter defaults to `nn.RMSNorm` (unsafe: other norm layers passed in get eps too)"
    )
    source_fix = "`eps=torch.finfo(torch.float32).eps` (torch's fp32 default)"
    examples = (
        Invalid(
            "norm = nn.RMSNorm(64)",
            "norm = nn.RMSNorm(64, eps=torch.finfo(torch.float32).eps)",
            at=(1, 8),
        ),
        Invalid(
            "y = F.rms_norm(x, (64,), None, None)",
            "y = F.rms_norm(x, (64,), None, eps=torch.finfo(torch.float32).eps)",
            at=(1, 5),
        ),
        Invalid(
            "RMSNorm = nn.RMSNorm\nnorm = RMSNorm(64)",
            "RMSNorm = nn.RMSNorm\nnorm = RMSNorm(64, eps=torch.finfo(torch.float32).eps)",
            at=(2, 8),
        ),
        Invalid(
            "norms = nn.ModuleList([nn.RMSNorm(64) for _ in range(4)])",
            "norms = nn.ModuleList([nn.RMSNorm(64, eps=torch.finfo(torch.float32).eps) "
            "for _ in range(4)])",
            at=(1, 24),
        ),
        Invalid(
            RMSNORM_BY_DEFAULT,
            RMSNORM_BY_DEFAULT.replace(
                "norm_layer(dim)", "norm_layer(dim, eps=torch.finfo(torch.float32).eps)"
            ),
            at=(5, 21),
        ),
        Invalid(
            RMSNORM_BY_DEFAULT + "other = Block(64, nn.LayerNorm)\n",
            at=(5, 21),
        ),  # flagged, not fixed: eps would change the LayerNorm's
        Valid(RMSNORM_BY_DEFAULT.replace("Block(64)", "Block(64, nn.LayerNorm)")),
        Valid("norm = nn.RMSNorm(64, eps=1e-6)"),
        Valid("Norm = nn.RMSNorm\nif big:\n    Norm = nn.LayerNorm\nnorm = Norm(64)"),
        Valid("y = F.rms_norm(x, (64,), eps=1e-5)"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            name = resolved_qualname(ctx, call.func)
            if has_star_args(call):
                continue
            through = _rms_norm_parameter(ctx, call) if name is None else None
            if through is not None:
                yield from _parameter_finding(ctx, call, *through)
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
                    _with_eps,
                    safe=True,
                    description="eps=torch.finfo(torch.float32).eps, torch's default for fp32",
                    replace=eps is not None,
                ),
                partitioner=None,
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
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
    """Every class the program has at the node's module's place in an owner of the same
    class (one ``self.norm = norm_layer(dim)`` line may build several)."""
    site = module_site(stack)
    return sorted(ctx.module_sites.get(site, set())) if site is not None else []


def _chosen_upstream(
    source: SourceContext, chain: list, modules: list, built: list
) -> SourceFix | str | None:
    """``self.norm = norm_layer(dim)`` whose ``norm_layer`` the module that builds this one
    passes down (its default is another class): the place that chose nn.RMSNorm, found by
    following the program's module stack (``sites.chosen_by``), gets
    ``functools.partial(nn.RMSNorm, eps=...)``: every norm layer built from that choice
    gets eps, and no other choice changes."""
    method, call = built[0]
    if len(built) != 1 or not isinstance(call.func, ast.Name) or method.name != "__init__":
        return None
    owner = tuple(modules[0])
    chain = [tuple(entry) for entry in chain]
    if owner not in chain:
        return None
    origin = chosen_by(source, chain, chain.index(owner), method, call.func.id)
    if resolved_qualname(source, origin) == "torch.nn.RMSNorm":
        return source.edit_expression(
            origin,
            _partial_with_eps,
            safe=False,
            description="functools.partial(nn.RMSNorm, eps=torch.finfo(torch.float32).eps) "
            "where the norm layer is chosen (a partial where a class was)",
        )
    if isinstance(origin, ast.Call) and resolved_qualname(source, origin.func) == (
        "functools.partial"
    ):
        return f"`{ast.unparse(origin)}` chooses the norm layer: export again"
    return None


def _is_rms_norm(source: SourceContext, method: ast.AST, call: ast.Call) -> bool:
    """The callee is nn.RMSNorm, a module-level alias of it, or a parameter defaulting to it."""
    if resolved_qualname(source, call.func) == "torch.nn.RMSNorm":
        return True
    if isinstance(call.func, ast.Name) and isinstance(
        method, (ast.FunctionDef, ast.AsyncFunctionDef)
    ):
        default = parameter_default(method, call.func.id)
        return resolved_qualname(source, default) == "torch.nn.RMSNorm"
    return False


def _rms_norm_parameter(ctx: SourceContext, call: ast.Call) -> tuple[ast.AST, bool] | None:
    """The function whose parameter ``call`` calls, when that parameter defaults to
    nn.RMSNorm (``norm_layer=nn.RMSNorm``, as timm writes it), the function never rebinds
    it, and some call of it in this file takes the default (or none is in this file); and
    whether another call passes something else (then eps is not added: it would change
    that layer's)."""
    func = call.func
    if not isinstance(func, ast.Name):
        return None
    function = enclosing_function(ctx, call)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    default = parameter_default(function, func.id)
    if resolved_qualname(ctx, default) != "torch.nn.RMSNorm" or is_rebound(ctx, func.id, function):
        return None
    used, other = _parameter_uses(ctx, function, func.id)
    return (function, other) if used else None


def _parameter_uses(ctx: SourceContext, function: Any, parameter: str) -> tuple[bool, bool]:
    """(whether a call of ``function`` in this file, or of its class for ``__init__``, takes
    nn.RMSNorm for ``parameter``, by default or explicitly, or none is in this file;
    whether one passes something else or may: ``*args``, a method's calls)."""
    owner = ctx.parents.get(function)
    if isinstance(owner, ast.ClassDef) and function.name == "__init__":
        callee, skip = owner.name, 1
    elif owner is ctx.tree:
        callee, skip = function.name, 0
    else:
        return True, True  # a method: its calls cannot be told apart
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][skip:]
    index = positional.index(parameter) if parameter in positional else None
    calls = [c for c in ctx.calls() if isinstance(c.func, ast.Name) and c.func.id == callee]
    used, other = not calls, False
    for c in calls:
        if has_star_args(c):
            other = True
            continue
        given = keyword(c, parameter)
        if given is None and index is not None and len(c.args) > index:
            given = c.args[index]
        if given is None or resolved_qualname(ctx, given) == "torch.nn.RMSNorm":
            used = True
        else:
            other = True
    return used, other


def _parameter_finding(
    ctx: SourceContext, call: ast.Call, function: ast.AST, other: bool
) -> Iterator[Finding]:
    eps = keyword(call, "eps") or (call.args[1] if len(call.args) > 1 else None)
    if eps is not None and not (isinstance(eps, ast.Constant) and eps.value is None):
        return
    edit = None if other else _eps_edit(ctx, call, call.func.id, function)
    yield ctx.finding(
        call,
        f"{call.func.id} is nn.RMSNorm by default and gets no eps: export drops eps=None and "
        "coremltools needs it, so lowering fails with `got 3 input(s), expected [4]`",
        fix="pass eps=torch.finfo(torch.float32).eps where nn.RMSNorm is passed or defaulted"
        if other
        else "pass eps=torch.finfo(torch.float32).eps (torch's own default for float32)",
        edit=edit if isinstance(edit, SourceFix) else None,
        partitioner=None,
    )


def _eps_edit(
    source: SourceContext, call: ast.Call, attribute: str, method: ast.AST
) -> SourceFix | str:
    if has_star_args(call):
        return f"`{attribute} = ...(*args)`: eps cannot be placed"
    eps = keyword(call, "eps") or (call.args[1] if len(call.args) > 1 else None)
    if eps is not None and not (isinstance(eps, ast.Constant) and eps.value is None):
        return f"{attribute} already gets eps in the source: export again"
    through_parameter = (
        isinstance(call.func, ast.Name)
        and parameter_default(method, call.func.id) is not None
        and resolved_qualname(source, call.func) is None
    )
    also = f" (also to any other {call.func.id} passed in)" if through_parameter else ""
    return source.edit(
        call,
        _with_eps,
        safe=not through_parameter,
        description=f"eps=torch.finfo(torch.float32).eps, torch's default for fp32{also}",
        replace=eps is not None,
        position=1,
    )

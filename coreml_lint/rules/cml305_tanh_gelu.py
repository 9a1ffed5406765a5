"""CML305 tanh-gelu: ``gelu(approximate="tanh")`` runs as exact GELU in Core ML.

What it does
    Flags a delegated ``aten.gelu`` with ``approximate="tanh"`` (``F.gelu(x,
    approximate="tanh")``, ``nn.GELU(approximate="tanh")``, the ``gelu_pytorch_tanh``
    activation of Gemma, GPT-2 style models, ...).

Why it breaks
    Export records ``approximate`` as a keyword argument (its schema is keyword-only), and
    coremltools' handler only selects ``TANH_APPROXIMATION`` from a second *positional*
    input, so the MIL is ``gelu(x, mode="EXACT")``. It lowers without a word and computes a
    different function (up to 4.7e-4 apart in fp32 on [-4, 4]).
    Moving the argument to a positional one cannot work: the schema is keyword-only.

Example
    ``return F.gelu(x, approximate="tanh")``

Fix
    (a) write the formula, which coremltools fuses back into ``TANH_APPROXIMATION``:
    ``0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x.pow(3))))``;
    (b) ``skip_ops_for_coreml_delegation=["aten.gelu.default"]`` (CPU gelu);
    (c) ``ep.run_decompositions({aten.gelu.default: torch's decomposition})``.

References
    - https://github.com/apple/coremltools/pull/2863
      fix the gelu converter ignoring the `approximate` keyword argument (open)
    - https://github.com/apple/coremltools/pull/1911
      allow gelu approximations: the converter reads `approximate` as a positional input
      (merged 2023)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import (
    F,
    Invalid,
    Valid,
    case,
    module,
    nn,
    returns,
    torch,
    wrapped,
)
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword
from coreml_lint.source.patterns import bound_constant
from coreml_lint.source.sites import (
    constructor_calls,
    functions_called_at,
    module_site,
    owner_stack,
    shown,
)

TANH_GELU_FUNCTION = """
def tanh_gelu(x):
    \"\"\"tanh-approximate GELU written out, so Core ML runs TANH_APPROXIMATION (coreml-lint).\"\"\"
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))
"""
TANH_GELU_MODULE = """
class TanhGELU(torch.nn.Module):
    \"\"\"tanh-approximate GELU written out, so Core ML runs TANH_APPROXIMATION (coreml-lint).\"\"\"

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))
"""
# When the approximation is chosen by an expression (a config), the fix keeps the choice:
# these compute exactly what F.gelu / nn.GELU compute, with the tanh branch written out.
CONFIGURABLE_GELU_FUNCTION = """
def exportable_gelu(x, approximate="none"):
    \"\"\"F.gelu, its tanh approximation written out so Core ML runs it (coreml-lint).\"\"\"
    if approximate == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))
    return torch.nn.functional.gelu(x, approximate=approximate)
"""
CONFIGURABLE_GELU_MODULE = """
class ExportableGELU(torch.nn.GELU):
    \"\"\"nn.GELU, its tanh approximation written out so Core ML runs it (coreml-lint).\"\"\"

    def forward(self, x):
        if self.approximate == "tanh":
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))
        return super().forward(x)
"""
_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
TANH_GELU_FUNCTION_FIXED = _HEADER + TANH_GELU_FUNCTION + "\n\ny = tanh_gelu(x)"
TANH_GELU_MODULE_FIXED = _HEADER + TANH_GELU_MODULE + "\n\nact = TanhGELU()"


# The rewrites: a call of a small helper written once per file (a function for ``F.gelu``,
# a module for ``nn.GELU``): short lines, and the formula in one place. Each helper is
# written against the file's name for torch.
@replacement
def _formula_call(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``F.gelu(x, approximate="tanh")`` as ``tanh_gelu(x)``."""
    import libcst as cst

    from coreml_lint.rulekit.cst import code

    edits.need_helper("tanh_gelu", TANH_GELU_FUNCTION.replace("torch.", f"{edits.torch()}."))
    return cst.parse_expression(f"tanh_gelu({code(call.args[0].value)})")


@replacement
def _formula_module(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``nn.GELU("tanh")`` as ``TanhGELU()``."""
    import libcst as cst

    edits.need_helper("TanhGELU", TANH_GELU_MODULE.replace("torch.", f"{edits.torch()}."))
    return cst.parse_expression("TanhGELU()")


@replacement
def _configurable_callee(fix: SourceFix, call: Any, edits: Any) -> Any:
    """A GELU whose approximation an expression chooses: the same arguments, a callee
    that writes the tanh branch out and keeps the choice."""
    import libcst as cst

    module = fix.callee == "GELU"
    name = "ExportableGELU" if module else "exportable_gelu"
    helper = CONFIGURABLE_GELU_MODULE if module else CONFIGURABLE_GELU_FUNCTION
    edits.need_helper(name, helper.replace("torch.", f"{edits.torch()}."))
    return call.with_changes(func=cst.Name(name))


class TanhGelu(Rule):
    code = "CML305"
    name = "tanh-gelu"
    outcome = Outcome.SILENT
    summary = 'gelu(approximate="tanh") lowers as exact GELU'

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target != "aten.gelu.default":
                continue
            if node.arg(1, "approximate", "none") != "tanh":
                continue
            yield ctx.finding(
                node,
                'gelu(approximate="tanh") is delegated, but coremltools never reads the '
                'keyword: the Core ML model computes `gelu(x, mode="EXACT")`',
                fix="write the tanh formula: 0.5 * x * (1 + torch.tanh(0.7978845608 * "
                "(x + 0.044715 * x.pow(3))))",
                partitioner=ctx.skip_advice(node),
                modules=owner_stack(node.modules()),
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The program knows the GELU is tanh whatever expression chose it: the
        ``F.gelu(x, approximate=<expr>)`` call at the finding's line (or the one in a helper
        called there: a stack trace keeps ``forward`` frames only), or the ``nn.GELU``
        that ``__init__`` assigns to the attribute the program's module stack names, gets
        a callee that writes the tanh branch out and keeps ``<expr>`` deciding (another
        configuration still gets what it asked for). The ``nn.GELU`` is found wherever the
        model builds it: an attribute, a ``Sequential`` argument, a comprehension's item, a
        helper's return value (``source/sites.py``). Unsafe, like the source fix."""
        modules = finding.extra.get("modules") or []
        if len(modules) >= 2 and modules[-1][1] == "torch.nn.modules.activation.GELU":
            return _module_fix(source, modules)
        if finding.location is None:
            return None
        line = finding.location.line
        calls = [c for c in source.calls() if c.lineno == line and _functional_gelu(source, c)]
        if not calls:  # made in a helper called there: its own F.gelu call, if only one
            helpers = functions_called_at(source, line)
            calls = [
                c
                for helper in helpers
                for c in ast.walk(helper)
                if isinstance(c, ast.Call) and _functional_gelu(source, c)
            ]
            if helpers and len(calls) != 1:
                names = ", ".join(h.name for h in helpers)
                return f"{names} called at line {line} holds {len(calls)} F.gelu calls, not one"
        if len(calls) != 1:
            return not_one_call(line, len(calls), "F.gelu(x, approximate=...)")
        approximate = keyword(calls[0], "approximate")
        said = bound_constant(source, approximate, calls[0]) if approximate else "none"
        if said is not None and said != "tanh":
            return f'the source says approximate="{said}" where the program has tanh: export again'
        return _gelu_edit(source, calls[0], functional=True)

    source_triggers = ("gelu", "GELU")
    source_pattern = (
        '`F.gelu(x, approximate="tanh")`, `nn.GELU("tanh")` (also through a module-level constant)'
    )
    source_fix = "the tanh formula (a `tanh_gelu` function, a `TanhGELU` module for `nn.GELU`)"
    examples = (
        Invalid('y = F.gelu(x, approximate="tanh")', TANH_GELU_FUNCTION_FIXED, at=(1, 5)),
        Invalid('act = nn.GELU("tanh")', TANH_GELU_MODULE_FIXED, at=(1, 7)),
        Invalid(
            'def f(x):\n    mode = "tanh"\n    return F.gelu(x, approximate=mode)',
            _HEADER
            + TANH_GELU_FUNCTION
            + '\n\ndef f(x):\n    mode = "tanh"\n    return tanh_gelu(x)',
            at=(3, 12),
        ),
        Valid("y = F.gelu(x)"),
        Valid("def f(x, mode):\n    return F.gelu(x, approximate=mode)"),
        Valid('y = F.gelu(x, approximate="none")'),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            name = ctx.qualname(call.func)
            if name not in ("torch.nn.functional.gelu", "torch.nn.GELU"):
                continue
            functional = name.endswith("gelu")
            approximate = keyword(call, "approximate")
            if approximate is None and not functional and call.args:
                approximate = call.args[0]  # nn.GELU("tanh"); F.gelu's is keyword-only
            if bound_constant(ctx, approximate, call) != "tanh":
                continue
            if functional and (len(call.args) != 1 or has_star_args(call)):
                continue
            yield ctx.finding(
                call,
                'gelu(approximate="tanh") lowers as exact GELU in Core ML: export records '
                "approximate= as a keyword argument, and coremltools never reads it",
                fix="write the tanh formula out (coremltools fuses it into TANH_APPROXIMATION)",
                edit=ctx.edit(
                    call,
                    _formula_call if functional else _formula_module,
                    safe=False,
                    description="tanh GELU written out (same function; float rounding may differ)",
                ),
            )

    # torch's decomposition of tanh GELU rounds differently from the fused kernel.
    rewrite_tolerance = 1e-5

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """torch's own decomposition of tanh GELU: Core ML then computes the formula with
        an explicit ``tanh`` (coremltools 9.0 does not fuse it back into a gelu op)."""
        import torch

        from coreml_lint.rulekit.fx import aten, decompose

        nodes = [n for n in ep.graph.nodes if _is_tanh_gelu(n)]
        table = {aten.gelu.default: torch._decomp.decomposition_table[aten.gelu.default]}
        return decompose(
            ep, nodes, table, "tanh GELU written out as torch's decomposition (tanh formula)"
        )

    def mil_problem(self, model: Any, original: Any) -> str | None:
        meant = any(_is_tanh_gelu(n) for n in original.graph.nodes)
        if meant and 'mode="EXACT"' in str(model._mil_program):
            return "gelu EXACT where tanh GELU was meant"
        return None


def _is_tanh_gelu(node: Any) -> bool:
    import torch

    return node.target == torch.ops.aten.gelu.default and node.kwargs.get("approximate") == "tanh"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("gelu-tanh", expect={"CML305"}, silent=returns(r'gelu\(x=[^)]*mode="EXACT"'))
def _():
    return module(lambda s, x: F.gelu(x, approximate="tanh")), (torch.randn(2, 8),)


@case("gelu-tanh-module", expect={"CML305"}, silent=returns(r'mode="EXACT"'))
def _():
    return wrapped(nn.GELU(approximate="tanh"))


@case("gelu-exact", expect=set())
def _():
    return module(lambda s, x: F.gelu(x)), (torch.randn(2, 8),)


@case(
    "gelu-tanh-formula",
    expect=set(),
    # The written-out formula (with x.pow(3)) is fused back into the tanh mode.
    clean=lambda lowered: 'mode="TANH_APPROXIMATION"' in lowered.mil,
)
def _():
    def forward(s, x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x.pow(3))))

    return module(forward), (torch.randn(2, 8),)


@case("gelu-tanh-skipped", expect=set(), settings={"skip": ["aten.gelu.default"]})
def _():
    return module(lambda s, x: F.gelu(x, approximate="tanh")), (torch.randn(2, 8),)


def _gelu_edit(source: SourceContext, call: ast.Call, functional: bool) -> SourceFix:
    """The literal-tanh fix when the source says tanh, else the configurable callee."""
    approximate = keyword(call, "approximate")
    if approximate is None and not functional and call.args:
        approximate = call.args[0]
    description = "tanh GELU written out (same function; float rounding may differ)"
    if bound_constant(source, approximate, call) == "tanh":
        written_out = _formula_call if functional else _formula_module
        return source.edit(call, written_out, safe=False, description=description)
    return source.edit(
        call,
        _configurable_callee,
        safe=False,
        description=f"{description}; the approximation is still chosen by "
        f"`{ast.unparse(approximate) if approximate is not None else 'none'}`",
    )


def _functional_gelu(source: SourceContext, call: ast.Call) -> bool:
    return (
        source.qualname(call.func) == "torch.nn.functional.gelu"
        and len(call.args) == 1
        and not has_star_args(call)
    )


def _module_fix(source: SourceContext, modules: list[tuple[str, str]]) -> SourceFix | str:
    """The fix of the one ``nn.GELU(...)`` call that builds the program's GELU module."""
    site = module_site(modules)
    if site is None:
        return f"{modules[-1][0]} is not built by a module that calls it"
    owner, relative = site
    calls = [
        call
        for _, call in constructor_calls(source, owner, relative)
        if source.qualname(call.func) == "torch.nn.GELU" and not has_star_args(call)
    ]
    if len(calls) != 1:
        return f"no one `{shown(relative)} = nn.GELU(...)` in a class {owner} of this file"
    return _gelu_edit(source, calls[0], functional=False)

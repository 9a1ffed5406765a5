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
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix
from coreml_lint.rulekit.context import ProgramContext, direct_attribute, not_one_call
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
from coreml_lint.source.patterns import assigned_calls, bound_constant

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
                modules=node.modules()[-2:],
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The program knows the GELU is tanh whatever expression chose it: the
        ``F.gelu(x, approximate=<expr>)`` call at the finding's line, or the ``nn.GELU``
        that ``__init__`` assigns to the attribute the program's module stack names, gets
        a callee that writes the tanh branch out and keeps ``<expr>`` deciding (another
        configuration still gets what it asked for). Unsafe, like the source fix."""
        modules = finding.extra.get("modules") or []
        if len(modules) >= 2 and modules[-1][1] == "torch.nn.modules.activation.GELU":
            attribute = direct_attribute(modules[-2][0], modules[-1][0])
            owner = modules[-2][1].rsplit(".", 1)[-1]
            calls = [
                call
                for cls in source.classes(owner)
                for _, call in assigned_calls(cls, attribute or "")
                if source.qualname(call.func) == "torch.nn.GELU" and not has_star_args(call)
            ]
            if len(calls) != 1:
                return f"no one `self.{attribute} = nn.GELU(...)` in a class {owner} of this file"
            return _gelu_edit(source, calls[0], functional=False)
        if finding.location is None:
            return None
        line = finding.location.line
        calls = [
            c
            for c in source.calls()
            if c.lineno == line
            and source.qualname(c.func) == "torch.nn.functional.gelu"
            and len(c.args) == 1
            and not has_star_args(c)
        ]
        if len(calls) != 1:
            return not_one_call(line, len(calls), "F.gelu(x, approximate=...)")
        return _gelu_edit(source, calls[0], functional=True)

    source_triggers = ("gelu", "GELU")
    source_pattern = (
        '`F.gelu(x, approximate="tanh")`, `nn.GELU("tanh")` (also through a module-level constant)'
    )
    source_fix = "the tanh formula (a `tanh_gelu` function, a `TanhGELU` module for `nn.GELU`)"
    examples = (
        Invalid('y = F.gelu(x, approximate="tanh")', TANH_GELU_FUNCTION_FIXED),
        Invalid('act = nn.GELU("tanh")', TANH_GELU_MODULE_FIXED),
        Invalid(
            'def f(x):\n    mode = "tanh"\n    return F.gelu(x, approximate=mode)',
            _HEADER
            + TANH_GELU_FUNCTION
            + '\n\ndef f(x):\n    mode = "tanh"\n    return tanh_gelu(x)',
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
                    "gelu-formula" if functional else "gelu-module",
                    safe=False,
                    description="tanh GELU written out (same function; float rounding may differ)",
                ),
            )

    def transform(self, fix: SourceFix, call: Any, edits: Any) -> Any:
        """A call of a small helper written once per file (a function for ``F.gelu``, a
        module for ``nn.GELU``): short lines, and the formula in one place."""
        import libcst as cst

        from coreml_lint.rulekit.cst import code

        torch = edits.torch()  # the helper is written against the file's name for torch
        if fix.kind == "gelu-configurable":  # same arguments, a callee that keeps the choice
            module = fix.callee == "GELU"
            name = "ExportableGELU" if module else "exportable_gelu"
            helper = CONFIGURABLE_GELU_MODULE if module else CONFIGURABLE_GELU_FUNCTION
            edits.need_helper(name, helper.replace("torch.", f"{torch}."))
            return call.with_changes(func=cst.Name(name))
        if fix.kind == "gelu-module":
            edits.need_helper("TanhGELU", TANH_GELU_MODULE.replace("torch.", f"{torch}."))
            return cst.parse_expression("TanhGELU()")
        edits.need_helper("tanh_gelu", TANH_GELU_FUNCTION.replace("torch.", f"{torch}."))
        return cst.parse_expression(f"tanh_gelu({code(call.args[0].value)})")

    # torch's decomposition of tanh GELU rounds differently from the fused kernel.
    rewrite_tolerance = 1e-5

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
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
        kind = "gelu-formula" if functional else "gelu-module"
        return source.edit(call, kind, safe=False, description=description)
    return source.edit(
        call,
        "gelu-configurable",
        safe=False,
        description=f"{description}; the approximation is still chosen by "
        f"`{ast.unparse(approximate) if approximate is not None else 'none'}`",
    )

"""CML305 tanh-gelu: ``gelu(approximate="tanh")`` runs as exact GELU in Core ML.

What it does
    Flags a delegated ``aten.gelu`` with ``approximate="tanh"`` (``F.gelu(x,
    approximate="tanh")``, ``nn.GELU(approximate="tanh")``, the ``gelu_pytorch_tanh``
    activation of Gemma, GPT-2 style models, ...).

Why it breaks
    Export records ``approximate`` as a keyword argument (its schema is keyword-only), and
    coremltools' handler only selects ``TANH_APPROXIMATION`` from a second *positional*
    input, so the MIL is ``gelu(x, mode="EXACT")``. It lowers without a word and computes a
    different function (up to 4.7e-4 apart in fp32 on [-4, 4]) (pitfalls.md §9, G2).
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

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword


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
            )

    source_triggers = ("gelu", "GELU")

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            name = ctx.qualname(call.func)
            if name not in ("torch.nn.functional.gelu", "torch.nn.GELU"):
                continue
            functional = name.endswith("gelu")
            approximate = keyword(call, "approximate")
            if approximate is None and not functional and call.args:
                approximate = call.args[0]  # nn.GELU("tanh"); F.gelu's is keyword-only
            if ctx.constant(approximate) != "tanh":
                continue
            if functional and (len(call.args) != 1 or has_star_args(call)):
                continue
            yield ctx.finding(
                call,
                'gelu(approximate="tanh") lowers as exact GELU in Core ML: coremltools never '
                "reads the keyword export records it as",
                fix="write the tanh formula out (coremltools fuses it into TANH_APPROXIMATION)",
                edit=ctx.edit(
                    call,
                    "gelu-formula" if functional else "gelu-module",
                    safe=False,
                    description="tanh GELU written out (same function; float rounding may differ)",
                ),
            )

    def transform(self, fix: SourceFix, call: Any, edits: Any) -> Any:
        import libcst as cst

        torch = edits.torch()
        if fix.kind == "gelu-module":
            edits.need_import("torch")  # the helper class is written against `torch`
            edits.need_helper("TanhGELU", TANH_GELU_HELPER)
            return cst.parse_expression("TanhGELU()")
        argument = call.args[0].value
        code = cst.Module([]).code_for_node(argument)
        if isinstance(argument, (cst.Name, cst.Attribute)):
            return cst.parse_expression(f"({_formula(code, torch)})")
        return cst.parse_expression(f"(lambda x: {_formula('x', torch)})({code})")

    # torch's decomposition of tanh GELU rounds differently from the fused kernel.
    rewrite_tolerance = 1e-5

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        """torch's own decomposition of tanh GELU: coremltools fuses it back into
        ``gelu(mode="TANH_APPROXIMATION")``."""
        import torch

        from coreml_lint.rulekit.fx import aten, decompose

        nodes = [n for n in ep.graph.nodes if _is_tanh_gelu(n)]
        table = {aten.gelu.default: torch._decomp.decomposition_table[aten.gelu.default]}
        return decompose(ep, nodes, table, "tanh GELU decomposed (Core ML fuses it as tanh)")

    def mil_problem(self, model: Any, original: Any) -> str | None:
        meant = any(_is_tanh_gelu(n) for n in original.graph.nodes)
        if meant and 'mode="EXACT"' in str(model._mil_program):
            return "gelu EXACT where tanh GELU was meant"
        return None


TANH_GELU_HELPER = """
class TanhGELU(torch.nn.Module):
    \"\"\"tanh-approximate GELU written out, so Core ML runs TANH_APPROXIMATION (coreml-lint).\"\"\"

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))
"""


def _formula(x: str, torch: str) -> str:
    return f"0.5 * {x} * (1.0 + {torch}.tanh(0.7978845608028654 * ({x} + 0.044715 * {x}.pow(3))))"


def _is_tanh_gelu(node: Any) -> bool:
    import torch

    return node.target == torch.ops.aten.gelu.default and node.kwargs.get("approximate") == "tanh"

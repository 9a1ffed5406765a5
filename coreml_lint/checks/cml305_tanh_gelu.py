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

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome


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

"""CML104 bfloat16-on-coreml: a Core ML op reads, makes or casts to bfloat16.

What it does
    Flags every delegated node with a bfloat16 input or output tensor, or a
    ``dtype=torch.bfloat16`` argument.

Why it breaks
    The partitioner delegates bf16 ops (its test is by name), and coremltools has no
    bfloat16 entry in its dtype tables, so lowering stops with
    ``KeyError: torch.bfloat16``. ``to_executorch`` is never reached.

Example
    ``self.lin = nn.Linear(8, 8).to(torch.bfloat16)``; ``self.lin(x.to(torch.bfloat16))``.

Fix
    (a) keep the model float32 (Core ML computes in fp16 anyway with the default
    ``compute_precision``); (b) keep the bf16 ops on the CPU, e.g.
    ``skip_ops_for_coreml_delegation=["aten.linear.default",
    "dim_order_ops._to_dim_order_copy.default"]``; (c) rewrite bf16 parameters and casts
    to float32 in the ExportedProgram (changes numerics).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import DType
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, nn, torch
from coreml_lint.rulekit.rule import Rule


class Bfloat16OnCoreML(Rule):
    code = "CML104"
    name = "bfloat16-on-coreml"
    outcome = Outcome.CRASH
    summary = "bfloat16 tensor on a Core ML op: KeyError: torch.bfloat16 at lowering"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes(include_decomposed=True):
            values = [*node.tensor_inputs(), *node.outputs]
            casts = any(
                isinstance(v, DType) and v.name == "bfloat16"
                for v in [*node.args, *node.kwargs.values()]
            )
            if not casts and not any(ctx.dtype(v) == "bfloat16" for v in values):
                continue
            yield ctx.finding(
                node,
                f"{ctx.edge_name(node)} works on bfloat16 inside Core ML: lowering fails "
                "with `KeyError: torch.bfloat16` (coremltools has no bfloat16 type)",
                fix="keep the model in float32 (Core ML computes in float16 by default)",
                partitioner=ctx.skip_advice(node),
            )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        import torch

        from coreml_lint.rulekit.fx import touches

        return "touches a bfloat16 tensor" if touches(node, {torch.bfloat16}) else None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("bfloat16-cast", expect={"CML104"}, crash=r"KeyError: torch\.bfloat16")
def _():
    return module(lambda s, x: (x.to(torch.bfloat16) + 1).float()), (torch.randn(2, 4),)


@case("bfloat16-linear", expect={"CML104"}, crash=r"KeyError: torch\.bfloat16")
def _():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8).to(torch.bfloat16)

        def forward(self, x, y):
            return torch.matmul(self.lin(x.to(torch.bfloat16)).float(), y)

    return M(), (torch.randn(1, 2, 8), torch.randn(8, 3))


@case("float16-cast", expect=set())
def _():
    return module(lambda s, x: (x.to(torch.float16) + 1).float()), (torch.randn(2, 4),)

"""CML604 full-graph-unsupported-op: ``lower_full_graph=True`` with an op Core ML will not take.

What it does
    With ``lower_full_graph=True``, flags every node the partitioner would leave on the CPU.

Why it breaks
    With ``lower_full_graph=True`` the partitioner's support test raises instead of falling
    back: ``NotImplementedError: CoreML does not support the op ..., but you have set
    lower_full_graph=True in the CoreMLPartitioner.`` (executorch 1.5.1
    ``coreml_partitioner.py``). Ops refused by executorch's own list (argmax with dim=None,
    add with alpha != 1, acosh, asinh, diagonal, rand) count too.

Example
    ``torch.acosh(x)`` with ``CoreMLPartitioner(lower_full_graph=True)``.

Fix
    (a) ``lower_full_graph=False``; (b) replace the op with one Core ML converts.

References
    - https://github.com/pytorch/executorch/pull/12532
      adds lower_full_graph, which raises when an op cannot be delegated
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.placement import CPU
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule


class FullGraphUnsupportedOp(Rule):
    code = "CML604"
    name = "full-graph-unsupported-op"
    outcome = Outcome.CRASH
    summary = "lower_full_graph=True with an op that cannot be delegated"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if not ctx.settings.lower_full_graph:
            return
        for node in ctx.graph.nodes:
            p = ctx.placement.nodes[node.name]
            if p.where != CPU:
                continue
            yield ctx.finding(
                node,
                f"{p.edge_name} cannot be delegated ({p.reason}) and lower_full_graph=True: "
                "partitioning fails with `NotImplementedError: CoreML does not support the op "
                f"{p.edge_name.lower()}, but you have set lower_full_graph=True`",
                fix="replace the op with one coremltools converts",
                partitioner={"lower_full_graph": False},
            )

    def adjust_settings(self, settings: PartitionerSettings) -> PartitionerSettings:
        return settings.changed(lower_full_graph=False)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case(
    "full-graph-acosh",
    expect={"CML604"},
    settings={"lower_full_graph": True},
    crash=r"CoreML does not support the op",
)
def _():
    return module(lambda s, x: torch.acosh(x + 2)), (torch.rand(4),)

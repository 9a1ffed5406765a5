"""CML602 input-less-partition: a Core ML partition with no inputs, below iOS18.

What it does
    Flags a predicted Core ML partition that receives no input at all (it computes only
    from constants: ``torch.arange(4).float() * 2`` split from the rest by a CPU op), when
    the deployment target is below iOS18.

Why it breaks
    ExecuTorch's Core ML backend asserts that a model without inputs targets iOS18:
    ``AssertionError: Deploying a model with no inputs in CoreML requires you set
    minimum_deployment_target to iOS18 or later in the CoreMLPartitioner.``
    The partitioner itself never avoids such partitions. A constant
    subgraph merged into a partition that also has an input is fine.

Example
    ``c = torch.arange(4).float() * 2; return torch.acosh(x) + c`` where the ``add`` runs on
    the CPU.

Fix
    (a) an iOS18 target; (b) precompute the constant into a ``register_buffer``;
    (c) ``executorch.exir.passes.constant_prop_pass.constant_prop_pass(ep)`` before lowering.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule


class InputLessPartition(Rule):
    code = "CML602"
    name = "input-less-partition"
    outcome = Outcome.CRASH
    summary = "Core ML partition without inputs below iOS18: AssertionError at lowering"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 18:
            return
        for part in ctx.placement.partitions:
            if part.inputs or part.states or not part.outputs:
                continue
            first = part.nodes[0]
            yield ctx.finding(
                first,
                f"Core ML partition {part.id} ({len(part.nodes)} ops, starting with "
                f"{ctx.edge_name(first)}) has no inputs: lowering fails with `AssertionError: "
                "Deploying a model with no inputs in CoreML requires you set "
                "minimum_deployment_target to iOS18`",
                fix="precompute the constant into a register_buffer, or run "
                "constant_prop_pass(ep) before lowering",
                partitioner={"minimum_deployment_target": 18},
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """executorch's ``constant_prop_pass`` folds the constant-only subgraph."""
        from executorch.exir.passes.constant_prop_pass import constant_prop_pass

        before = sum(1 for n in ep.graph.nodes if n.op == "call_function")
        ep = constant_prop_pass(ep)
        folded = before - sum(1 for n in ep.graph.nodes if n.op == "call_function")
        return ep, [f"constant_prop_pass folded {folded} constant op(s)"] if folded else []


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def constant_plus(s, x):
    c = torch.arange(4).float() * 2
    return x + c


@case(
    "input-less-partition",
    expect={"CML602"},
    settings={"skip": ["aten.add.tensor"]},
    crash=r"no inputs in CoreML requires",
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case(
    "input-less-partition-ios18",
    expect=set(),
    settings={"skip": ["aten.add.tensor"], "ios": 18},
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case("constant-merged-with-input", expect=set())
def _():
    return module(lambda s, x: (torch.arange(4).float().exp(), x * 2)), (torch.randn(4),)

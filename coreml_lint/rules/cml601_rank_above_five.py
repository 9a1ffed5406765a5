"""CML601 rank-above-five: a tensor of rank 6 or more used by a Core ML op.

What it does
    Flags a delegated op that reads or makes a tensor of rank > 5, unless the tensor only
    passes through reshapes and permutes (an ``einsum`` that only reorders the labels of
    one operand is one) inside one partition.

Why it breaks
    The partitioner has no rank rule; coremltools checks ranks after its graph passes and
    stops with ``ValueError: Core ML only supports tensors with rank <= 5. Layer
    "aten_view_copy_default_cast_fp16", with type "reshape", outputs a rank 6 tensor.``
    A 6-D reshape + permute chain lowers, because a coremltools pass rewrites it into
    rank-4 reshape/transpose ops.

Example
    ``t.reshape(1, 2, 3, 2, 2, 5).sum(0)``

Fix
    (a) stay at 5-D or below (``t.reshape(2, 3, 2, 2, 5).sum(0)``), or apply elementwise ops
    before the 6-D reshape; (b) a partitioner that refuses nodes touching >5-D tensors.

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

# Ops coremltools turns into reshape/transpose (or nothing: clone is a no-op), which its
# graph pass rewrites into rank-4 ops when the chain ends below rank 6.
SHAPE_ONLY = {"view", "_unsafe_view", "reshape", "permute", "transpose", "t", "clone"}


def _shape_only(node: Any) -> bool:
    """A reshape or permute, or an ``einsum`` of one operand that only reorders its labels
    (``"nchpwq->nhwpqc"``, a patchify): coremltools converts that to a transpose."""
    if node.op_base in SHAPE_ONLY:
        return True
    if node.op_base != "einsum" or not node.args or not isinstance(node.args[0], str):
        return False
    inputs, _, output = node.args[0].replace(" ", "").partition("->")
    return (
        len(node.tensor_inputs()) == 1
        and "," not in inputs
        and "." not in inputs
        and len(set(inputs)) == len(inputs)
        and sorted(inputs) == sorted(output)
    )


class RankAboveFive(Rule):
    code = "CML601"
    name = "rank-above-five"
    outcome = Outcome.CRASH
    summary = "tensor of rank > 5 used by a Core ML op other than reshape/permute"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        reported: set[str] = set()
        for value, info in ctx.graph.tensors.items():
            if info.rank <= 5:
                continue
            producer = ctx.producers.get(value)
            touching = [u for u in ctx.users.get(value, []) if ctx.on_coreml(u)]
            if producer is not None and ctx.on_coreml(producer):
                touching.insert(0, producer)
            if not touching:
                continue
            offender = next((n for n in touching if not _shape_only(n)), None)
            crossing = None
            if offender is None and value in ctx.boundaries:
                crossing = ctx.boundaries[value]
                offender = touching[0]
            if offender is None or offender.name in reported:
                continue
            reported.add(offender.name)
            where = (
                f"crosses the boundary of partition {crossing.id}"
                if crossing
                else f"is used by {ctx.edge_name(offender)}"
            )
            yield ctx.finding(
                offender,
                f"rank-{info.rank} tensor '{value}' {where} in Core ML: lowering fails with "
                "`ValueError: Core ML only supports tensors with rank <= 5`",
                fix="keep tensors at rank 5 or below (merge two dimensions), or do the "
                "elementwise work before the >5-D reshape",
                partitioner=ctx.skip_advice(offender),
                rank=info.rank,
            )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        from coreml_lint.rulekit.fx import tensors_of

        return (
            "touches a tensor of rank > 5" if any(t.dim() > 5 for t in tensors_of(node)) else None
        )


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("rank6-sum", expect={"CML601"}, crash=r"rank <= 5")
def _():
    return module(lambda s, t: t.reshape(1, 2, 3, 2, 2, 5).sum(0).sum(0)), (torch.randn(120),)


@case("rank6-reshape-permute", expect=set())
def _():
    def forward(s, t):
        return t.reshape(1, 2, 3, 2, 2, 5).permute(5, 4, 3, 2, 1, 0).reshape(-1)

    return module(forward), (torch.randn(120),)


@case("rank6-einsum-permutation", expect=set())
def _():
    def forward(s, x):  # patchify and back, as DiT and MAE write it
        t = torch.einsum("nchpwq->nhwpqc", x.reshape(2, 4, 4, 2, 6, 2)).reshape(2, 24, 16)
        t = torch.einsum("nhwpqc->nchpwq", (t * 2).reshape(2, 4, 6, 2, 2, 4))
        return t.reshape(2, 4, 8, 12)

    return module(forward), (torch.randn(2, 4, 8, 12),)


@case("rank6-einsum-sum", expect={"CML601"}, crash=r"rank <= 5")
def _():
    return module(lambda s, t: torch.einsum("abcdef->bcdef", t.reshape(1, 2, 3, 2, 2, 5))), (
        torch.randn(120),
    )


@case("rank5-sum", expect=set())
def _():
    return module(lambda s, t: t.reshape(2, 3, 2, 2, 5).sum(0)), (torch.randn(120),)

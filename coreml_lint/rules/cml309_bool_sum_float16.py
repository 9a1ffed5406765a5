"""CML309 bool-sum-float16: a count of True values that Core ML computes in float16.

What it does
    Flags a delegated ``sum`` of a bool tensor (``mask.sum(dim)``, ``(x > 0).sum()``,
    ``count_nonzero``) over more than 2048 elements per result.

Why it breaks
    torch counts in int64. coremltools casts the bool tensor to float16 and runs
    ``reduce_sum`` in float16, whose integers are exact only up to 2048: a count of 3001
    comes back as 3000 (the partition returns float, which ExecuTorch's runtime converts to
    the program's int64 after the rounding). Over 2048 elements or fewer every count is
    exact, so it is not flagged.

Example
    ``n_valid = (tokens != pad_id).sum(dim=1)`` over a 4096-token sequence.

Fix
    (a) count in int32: ``mask.int().sum(dim)`` (the same int64 result in torch; an int32
    ``reduce_sum`` in Core ML); (b) ``coreml-lint lower`` inserts that cast.

References
    - https://github.com/apple/coremltools/issues/1570
      reduce_sum of a bool tensor is rejected by the MIL type domain
    - https://github.com/apple/coremltools/pull/1623
      adds the cast of a bool input in reduce_sum (merged 2022)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

SUMS = ("aten.sum.default", "aten.sum.dim_IntList")
EXACT_UP_TO = 2048  # float16 represents every integer up to here


class BoolSumFloat16(Rule):
    code = "CML309"
    name = "bool-sum-float16"
    outcome = Outcome.SILENT
    summary = "sum of a bool tensor over more than 2048 elements: counted in float16"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in SUMS or not node.tensor_inputs():
                continue
            source = node.tensor_inputs()[0]
            if ctx.dtype(source) != "bool":
                continue
            extent = _reduced_extent(ctx.shape(source), node)
            if extent is not None and extent <= EXACT_UP_TO:
                continue
            size = f"{extent} elements" if extent else "a size not known when exporting"
            yield ctx.finding(
                node,
                f"sum of bool tensor '{source}' over {size} is counted in float16 by Core ML "
                "(coremltools casts the bool to fp16 for reduce_sum): counts above 2048 are "
                "rounded (3001 becomes 3000)",
                fix="count in int32: `mask.int().sum(dim)` (the same result in torch)",
                extent=extent,
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Cast the bool operand of each sum to int32 (torch's result is int64 either way;
        Core ML then sums int32, exactly)."""
        import torch

        from coreml_lint.rulekit.fx import aten, cast, finish, val

        done = []
        for node in list(ep.graph.nodes):
            if node.target not in (aten.sum.default, aten.sum.dim_IntList):
                continue
            operand = node.args[0]
            if getattr(val(operand), "dtype", None) != torch.bool:
                continue
            with ep.graph.inserting_before(node):
                counted = cast(ep, operand, torch.int32)
            node.args = (counted, *node.args[1:])
            done.append(f"{node.name}: bool counted in int32 instead of float16")
        return finish(ep), done


def _reduced_extent(shape: tuple[int | str, ...] | None, node: Node) -> int | None:
    """Elements summed into each result; None when a dimension is symbolic."""
    if shape is None:
        return None
    dims = node.arg(1, "dim") if node.target.endswith("dim_IntList") else None
    axes = range(len(shape)) if not dims else [d % max(len(shape), 1) for d in dims]
    sizes = [shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        return None
    return math.prod(sizes)  # type: ignore[arg-type]


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
COUNTED_IN_FP16 = r"reduce_sum\(x=%\w+_to_fp16,"


@case("bool-sum-long-row", expect={"CML309"}, silent=returns(COUNTED_IN_FP16))
def _() -> Any:
    # every value passes (whatever the inputs): torch counts 3001, float16 holds 3000
    return module(lambda s, x: (x > -100).sum(dim=1)), (torch.randn(2, 3001),)


@case("bool-sum-all-long", expect={"CML309"}, silent=returns(COUNTED_IN_FP16))
def _() -> Any:
    return module(lambda s, x: (x > -100).sum() + 1), (torch.randn(1, 3001),)


@case("bool-sum-short-row", expect=set())
def _() -> Any:
    return module(lambda s, x: (x > 0).sum(dim=1)), (torch.randn(2, 6),)


@case("int-sum-long-row", expect=set(), clean=returns(r"int32\)\(Tensor\) = reduce_sum"))
def _() -> Any:
    return module(lambda s, x: (x > 0).int().sum(dim=1)), (torch.randn(2, 4096),)

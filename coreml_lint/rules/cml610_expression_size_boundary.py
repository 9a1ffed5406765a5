"""CML610 expression-size-boundary: a Core ML partition input whose size is an expression.

What it does
    Flags a Core ML partition of a dynamic program (``torch.export.Dim``) that receives a
    tensor with a dynamic size that is an expression of the program's symbols rather than
    one symbol: ``(H - 1) // 2 + 1`` after a strided convolution, ``H + 2`` after a pad,
    when an op the partitioner leaves on the CPU (or a skip entry) splits the graph there.

Why it breaks
    coremltools makes each dynamic input size of a partition a ``RangeDim`` by looking the
    size up among the program's range constraints, which name only the exported symbols
    (and derived dims). An expression is not there: ``ValueError: Core ML does not support
    size variables that are expressions of symbolic variables, but got (((s53 - 1)//2)) + 1
    in tensor aten_acosh_default``, at every target. The same graph with static sizes, with
    only a dynamic batch, or split where the size is still a plain symbol lowers (measured,
    torch 2.13 / executorch 1.5.1 / coremltools 9.0). ``coreml-lint lower`` can meet it
    too: a resize it keeps on the CPU (CML607) splits the graph after a strided stem.

Example
    ``self.b(torch.acosh(self.a(x)))`` where ``self.a`` is a stride-2 convolution and ``x``
    has a dynamic height: acosh runs on the CPU, and the second partition gets
    ``(H - 1) // 2 + 1`` rows.

Fix
    (a) Export the size as a derived dim so it is a named one (``H = 2 * _h`` for a stride
    2 stem; lower in the exporting process, CML608). (b) Keep the CPU op out of the middle
    of the dynamic part (an op Core ML delegates instead), or keep the ops after it on the
    CPU too (``skip_ops_for_coreml_delegation``). (c) Static sizes, or enumerated shapes.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.program import symbolic
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import dynamic_case, nn, torch
from coreml_lint.rulekit.rule import Rule


class ExpressionSizeBoundary(Rule):
    code = "CML610"
    name = "expression-size-boundary"
    outcome = Outcome.CRASH
    summary = (
        "Core ML partition input sized by an expression of dynamic dims (after a CPU op): "
        "Core ML does not support size variables that are expressions"
    )
    cannot_lower = (
        "the partition boundary's size is not a named dynamic dim; export it as a derived "
        "Dim, or keep the ops after the CPU op on the CPU too"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        keys = list(ctx.graph.meta.get("range_constraints") or {})
        points = list(symbolic.sample_points(ctx.graph.meta))
        for part in ctx.placement.partitions:
            for value in part.inputs:
                size = _expression_size(ctx.shape(value) or (), keys, points)
                readers = ctx.readers_in(value, part)
                if size is None or not readers:
                    continue
                yield ctx.finding(
                    readers[0],
                    f"Core ML partition {part.id} receives {value!r}, whose size "
                    f"{symbolic.pretty(size)} is an expression of the program's dynamic dims, "
                    "not one of them: lowering fails with `ValueError: Core ML does not "
                    "support size variables that are expressions of symbolic variables`",
                    fix="export that size as a derived Dim, or keep the ops after the CPU op "
                    "on the CPU too",
                )


def _expression_size(
    shape: tuple[int | str, ...], keys: list[str], points: list[dict[str, int]]
) -> str | None:
    """The first dynamic size that is neither a plain symbol nor a range-constraint key."""
    for size in shape:
        if not symbolic.is_symbolic(size) or symbolic.is_plain_symbol(size):
            continue
        assert isinstance(size, str)
        if not points or symbolic.evaluate(size, points[0]) is None:
            continue  # an expression we cannot evaluate: say nothing rather than guess
        if any(symbolic.same_size(size, key, points) for key in keys):
            continue
        return size
    return None


# -- program cases (dynamic shapes): what the stock CoreMLPartitioner really does ------------
def split_after_stride(stride: int) -> object:
    """A strided convolution, acosh (never delegated: the graph splits), a convolution."""

    class Split(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, stride=stride, padding=1)
            self.b = nn.Conv2d(8, 4, 1)

        def forward(self, x: object) -> object:
            return self.b(torch.acosh(self.a(x).abs() + 1.5))

    return Split().eval()


def _height() -> dict[str, object]:
    return {"x": {2: torch.export.Dim("h", min=8, max=64)}}


@dynamic_case("split-after-strided-conv", expect={"CML610"}, crash=r"expressions of symbolic")
def _():
    return split_after_stride(2), (torch.randn(2, 3, 16, 16),), _height()


@dynamic_case("split-after-same-size-conv", expect=set())
def _():
    return split_after_stride(1), (torch.randn(2, 3, 16, 16),), _height()


@dynamic_case("split-after-strided-conv-dynamic-batch", expect=set())
def _():
    batch = {"x": {0: torch.export.Dim("b", min=1, max=4)}}
    return split_after_stride(2), (torch.randn(2, 3, 16, 16),), batch

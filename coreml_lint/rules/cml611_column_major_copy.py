"""CML611 column-major-copy: a copy of a value laid out in an order ExecuTorch cannot name.

What it does
    Flags a dtype conversion or a copy (``.float()``, ``.to(torch.int32)``, ``.clone()``,
    and the one type promotion makes: ``idx * 1.0``, ``idx + 0.5`` of an integer ``idx``) of
    the indices ``torch.nonzero`` (or ``torch.argwhere``) returns for a 2-D or larger input:
    it lays its ``(n, rank)`` result out column-major, an order that is neither contiguous
    nor channels-last, and arithmetic on it (``idx + 1``) keeps that layout.

Why it breaks
    ExecuTorch writes every copy as a ``_to_dim_order_copy`` (or ``_clone_dim_order``) that
    keeps its input's dim order, and names it by a memory format, which exists for
    contiguous and channels-last orders only. ``to_edge_transform_and_lower`` stops before
    any partitioner runs, with or without Core ML: ``AssertionError: Failed to map a given
    dim_order: [1, 0] to a torch.memory_format``. A view (``x.t().float()``) lowers: the
    edge dialect makes each view a contiguous ``*_copy``. So do a 1-D input's indices
    (``(n, 1)`` is contiguous), ``idx + 1`` (no copy), and ``idx[:, 0].float()`` (measured,
    torch 2.13 / executorch 1.5.1 / coremltools 9.0).

Example
    ``torch.nonzero(mask).float().mean(dim=0)``: the centroid of a thresholded map.

Fix
    Make the value contiguous before the copy: ``torch.nonzero(mask).contiguous().float()``,
    or read one column at a time (``idx[:, 0].float()``).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.program.graph import Node
from coreml_lint.program.layout import concrete, dim_order, named_orders
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule

CRASH = "AssertionError: Failed to map a given dim_order"
COPIES = frozenset({"aten._to_copy.default", "aten.clone.default"})
# Ops that lay their output out column-major in the edge program ExecuTorch names layouts
# in (measured: torch 2.13 / executorch 1.5.1).
COLUMN_MAJOR = frozenset({"nonzero", "argwhere"})


class ColumnMajorCopy(Rule):
    code = "CML611"
    name = "column-major-copy"
    outcome = Outcome.CRASH
    summary = (
        "dtype conversion or copy of torch.nonzero's column-major indices (.float(), "
        "idx * 1.0): Failed to map a given dim_order in to_edge_transform_and_lower"
    )
    cannot_lower = (
        "ExecuTorch's dim-order pass fails before any partitioner runs, on the CPU as in "
        "Core ML: make the value contiguous in the model (`.contiguous()` before the copy)"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            if not node.outputs or not _copies(ctx, node):
                continue
            # the copy's own layout: ``.contiguous().float()`` is one contiguous copy
            found = _layout_made_by(ctx, node.outputs[0])
            if found is None:
                continue
            maker, order = found
            copy = "copies" if node.target in COPIES else "promotes to another dtype"
            yield ctx.finding(
                node,
                f"{node.op_base} {copy} {maker.op_base}'s output laid out in dim order "
                f"{order}, which is neither contiguous nor channels-last: ExecuTorch names a "
                "copy's layout by a memory format, and to_edge_transform_and_lower fails "
                f"before any partitioner runs (`{CRASH}: {order} to a torch.memory_format`)",
                fix=f"make it contiguous first (`.contiguous()` after the {maker.op_base}), "
                "or read one column at a time (`idx[:, 0].float()`)",
                maker=maker.name,
            )


def _copies(ctx: ProgramContext, node: Node) -> bool:
    """A ``_to_copy`` or ``clone``, or an op that makes floats of integer or bool inputs
    (type promotion casts them first, keeping their layout)."""
    if node.target in COPIES:
        return True
    made = ctx.dtype(node.outputs[0]) or ""
    read = [ctx.dtype(v) or "" for v in node.tensor_inputs()]
    integers = ("int", "uint", "bool")
    return made.startswith(("float", "bfloat")) and any(d.startswith(integers) for d in read)


def _layout_made_by(ctx: ProgramContext, value: str) -> tuple[Node, list[int]] | None:
    """(the op that laid ``value`` out, the dim order) where that order is one ExecuTorch
    cannot name and the op is not a view: followed back through ops that keep their first
    input's order (the copy itself, ``idx + 1``)."""
    order = _order(ctx, value)
    if order is None or order in named_orders(len(order)):
        return None
    while (producer := ctx.producers.get(value)) is not None:
        inputs = producer.tensor_inputs()
        if inputs and _order(ctx, inputs[0]) == order:
            value = inputs[0]
            continue
        return (producer, order) if _keeps_its_layout(ctx, producer) else None
    return None  # a program input laid out so: CML312's


def _keeps_its_layout(ctx: ProgramContext, maker: Node) -> bool:
    """Whether the edge program still lays the value out so: the ops measured to make
    column-major indices there (``nonzero``, and ``argwhere``, which to_edge makes a
    ``nonzero``). A view's layout is not (it becomes a contiguous ``*_copy``), nor that of
    an op to_edge decomposes into pieces that lay their outputs out afresh (``lstm``'s
    batch-first output, recorded as a transposed view, lowers)."""
    return maker.op_base in COLUMN_MAJOR


def _order(ctx: ProgramContext, value: str) -> list[int] | None:
    info = ctx.graph.tensors.get(value)
    if info is None or info.strides is None or len(info.strides) != info.rank:
        return None
    symbols: dict[str, int] = {}
    shape, strides = concrete(info.shape, symbols), concrete(info.strides, symbols)
    if shape is None or strides is None:
        return None
    return dim_order(shape, strides)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def _centroid(after: Any) -> Any:
    return module(lambda s, x: after(torch.nonzero(x > 0.5)).mean(dim=0)), (_map(),)


def _map() -> Any:
    torch.manual_seed(0)
    return torch.rand(6, 6)


_FAILS = r"Failed to map a given dim_order: \[1, 0\] to a torch\.memory_format"


@case("nonzero-to-float", expect={"CML611"}, crash=_FAILS)
def _():
    return _centroid(lambda idx: idx.float())


@case("nonzero-times-float", expect={"CML611"}, crash=_FAILS)
def _():
    return _centroid(lambda idx: (idx + 1) * 0.5)


@case("argwhere-to-int32-3d", expect={"CML611"}, crash=_FAILS)
def _():
    return module(lambda s, x: torch.argwhere(x > 0.5).to(torch.int32) + 1), (torch.rand(3, 4, 5),)


@case("nonzero-contiguous-to-float", expect=set())
def _():
    """The fix."""
    return _centroid(lambda idx: idx.contiguous().float())


@case("nonzero-column-to-float", expect=set())
def _():
    return _centroid(lambda idx: idx[:, 0].float())


@case("nonzero-of-vector-to-float", expect=set())
def _():
    return module(lambda s, x: torch.nonzero(x > 0.5).float().sum()), (torch.rand(7),)


@case("transposed-ints-to-float", expect=set())
def _():
    """A view's layout: the edge dialect's ``permute_copy`` is contiguous."""
    return module(lambda s, x: (x.t() + 1).float() * 0.5), (torch.randint(0, 5, (3, 4)),)

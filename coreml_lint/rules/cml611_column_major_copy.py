"""CML611 column-major-copy: a copy of a value laid out in an order ExecuTorch cannot name.

What it does
    Flags a dtype conversion or a copy (``.float()``, ``.to(torch.int32)``, ``.clone()``,
    and the cast ExecuTorch inserts for a mixed-dtype ``add``, ``sub``, ``mul``, ``div`` or
    ``minimum``: ``idx * 0.5``, ``idx / 2`` of an integer ``idx``) of the indices
    ``torch.nonzero`` (or ``torch.argwhere``) returns for a 2-D or larger input: it lays
    its ``(n, rank)`` result out column-major, an order that is neither contiguous nor
    channels-last, and arithmetic on it (``idx + 1``) keeps that layout.

Why it breaks
    ExecuTorch writes every copy as a ``_to_dim_order_copy`` (or ``_clone_dim_order``) that
    keeps its input's dim order, and names it by a memory format, which exists for
    contiguous and channels-last orders only. ``to_edge_transform_and_lower`` stops before
    any partitioner runs, with or without Core ML: ``AssertionError: Failed to map a given
    dim_order: [1, 0] to a torch.memory_format``. A view (``x.t().float()``) lowers: the
    edge dialect makes each view a contiguous ``*_copy``. So do a 1-D input's indices
    (``(n, 1)`` is contiguous), ``idx + 1`` (no copy), ``idx[:, 0].float()``, and
    ``type_as`` or ``1.0 - idx``, which Core ML keeps whole (measured on 91 programs with
    the stock CoreMLPartitioner, torch 2.13 / executorch 1.5.1 / coremltools 9.0).

Example
    ``torch.nonzero(mask).float().mean(dim=0)``: the centroid of a thresholded map.

Fix
    Make the value contiguous before the copy: ``torch.nonzero(mask).contiguous().float()``,
    or read one column at a time (``idx[:, 0].float()``).

References
    No report of this pitfall was found (pytorch/executorch issues searched 2026-12).
    Related, on dim order as ExecuTorch's layout and the ambiguities of mapping it to a
    memory format (closed):

    - https://github.com/pytorch/executorch/issues/6330

    and on ops whose layout conversion the graph does not show (open):

    - https://github.com/pytorch/executorch/issues/11086
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
# Copies the reader writes for an op Core ML keeps whole, which never becomes a
# ``_to_dim_order_copy`` (``type_as``).
KEPT_WHOLE = frozenset({"aten.type_as.default"})
# The ops ExecuTorch's RemoveMixedTypeOperators pass casts a mixed-dtype operand for (a copy
# keeping that operand's layout); other ops on integer indices take them as they are.
PROMOTING = frozenset(
    {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor"}
    | {"aten.div.Tensor_mode", "aten.minimum.default"}
)
# Ops that lay their output out column-major in the edge program ExecuTorch names layouts
# in (measured: torch 2.13 / executorch 1.5.1).
COLUMN_MAJOR = frozenset({"nonzero", "argwhere"})
# torch's views (``OpTable.view``) are what the edge dialect writes as contiguous ``*_copy``
# ops (``slice_copy``); ``_unsafe_view``, a reshape's own, is one too though torch does not
# tag it a view.
UNSAFE_VIEW = "aten._unsafe_view.default"


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
            for value in _copied(ctx, node):
                found = _layout_made_by(ctx, value)
                if found is None:
                    continue
                maker, order = found
                what = (
                    f"copies {maker.op_base}'s output"
                    if node.target in COPIES
                    else f"casts {maker.op_base}'s integer output to {ctx.dtype(node.outputs[0])}"
                )
                yield ctx.finding(
                    node,
                    f"{node.op_base} {what}, laid out in dim order {order}, neither contiguous "
                    "nor channels-last: ExecuTorch names a copy's layout by a memory format, "
                    "and to_edge_transform_and_lower fails before any partitioner runs "
                    f"(`{CRASH}: {order} to a torch.memory_format`)",
                    fix=f"make it contiguous first (`.contiguous()` after the {maker.op_base}), "
                    "or read one column at a time (`idx[:, 0].float()`)",
                    maker=maker.name,
                )
                break


def _copied(ctx: ProgramContext, node: Node) -> list[str]:
    """The values ``node`` copies with their layout: a ``_to_copy``'s or ``clone``'s output
    (its own layout: ``.contiguous().float()`` is one contiguous copy), or the integer or
    bool operands of a mixed-dtype op ExecuTorch casts (``idx * 0.5``)."""
    if not node.outputs:
        return []
    if node.target in COPIES:
        return [] if node.origin in KEPT_WHOLE else node.outputs[:1]
    made = ctx.dtype(node.outputs[0]) or ""
    if node.target not in PROMOTING or not made.startswith(("float", "bfloat")):
        return []
    integers = ("int", "uint", "bool")
    return [v for v in node.tensor_inputs() if (ctx.dtype(v) or "").startswith(integers)]


def _layout_made_by(ctx: ProgramContext, value: str) -> tuple[Node, list[int]] | None:
    """(``nonzero``, the dim order) when ``value`` is laid out in an order ExecuTorch cannot
    name and that layout comes from ``nonzero``'s: followed back through ops with an
    operand of the same order (``idx + 1``), never through a view."""
    order = _order(ctx, value)
    if order is None or order in named_orders(len(order)):
        return None
    while (producer := ctx.producers.get(value)) is not None:
        if producer.op_base in COLUMN_MAJOR:
            return producer, order
        if producer.aten_name in ctx.table.view or producer.target == UNSAFE_VIEW:
            return None
        same = [v for v in producer.tensor_inputs() if _order(ctx, v) == order]
        if not same:
            return None
        value = same[0]
    return None  # a program input laid out so: CML312's


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


@case("constant-times-nonzero", expect={"CML611"}, crash=_FAILS)
def _():
    """The integer operand second: ExecuTorch casts it, keeping its layout."""
    return _centroid(lambda idx: torch.tensor([2.0, 3.0]) * idx)


@case("argwhere-columns-sliced-to-float", expect=set())
def _():
    """A slice is a view: the edge dialect's ``slice_copy`` is contiguous."""
    return module(lambda s, x: torch.argwhere(x > 0.5)[:, 1:].float().mean(0)), (
        torch.rand(3, 4, 5),
    )

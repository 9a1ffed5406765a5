"""CML320 condition-broadcasts-select: a mask larger than the tensor it fills gives Core ML
the tensor's shape.

What it does
    Flags a delegated ``masked_fill`` with a number (or a 0-d tensor), or ``torch.where``
    with a number as its first branch (``where.ScalarSelf``), whose condition has more dims
    or larger ones than the tensor it fills, so that torch broadcasts the tensor up to the
    condition's shape:
    ``h.unsqueeze(0).masked_fill(~mask[:, :, None], float("-inf"))`` with ``h`` of shape
    ``(N, D)`` and ``mask`` of shape ``(G, N)``, a graph readout's per-graph max pooling.

Why it breaks
    coremltools converts both to MIL ``select(cond, a=value, b=x)``, whose output shape is
    that of ``a`` and ``b`` broadcast together, not of the condition: Core ML computes
    ``(1, N, D)`` where torch computes ``(G, N, D)``. Nothing fails at conversion; the result
    has the wrong shape (``coreml-lint verify``: "the program declares shape (1, 16), eager
    computes (3, 16)"), or a later op fails on it (``Dimension mismatch in concat
    ("aten_cat_default"): shapes [3, 16] vs. (1, 16)``). ``torch.where`` with two tensor
    branches, or with the number second (export makes it a tensor: ``where.self``),
    converts otherwise and keeps the condition's shape.

Example
    ``h.unsqueeze(0).masked_fill(~(batch[None] == graphs[:, None])[..., None], -inf).amax(1)``

Fix
    (a) expand the tensor to the full shape first:
    ``h.unsqueeze(0).expand(G, -1, -1).masked_fill(...)`` (the same values);
    (b) ``coreml-lint lower`` writes that expand into the program.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

# op -> (position of the condition, position of the tensor it fills): the overloads
# coremltools makes a ``select`` of with one number branch
SELECTS = {
    "aten.masked_fill.Scalar": (1, 0),
    "aten.masked_fill.Tensor": (1, 0),
    "aten.where.ScalarSelf": (0, 2),
}


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape torch broadcasts ``shapes`` to, or None where a size is symbolic."""
    if not all(isinstance(s, int) for shape in shapes for s in shape):
        return None
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    return tuple(max(sizes) for sizes in zip(*padded, strict=True))


class ConditionBroadcastsSelect(Rule):
    code = "CML320"
    name = "condition-broadcasts-select"
    outcome = Outcome.SILENT
    summary = (
        "masked_fill/where with a number, its mask larger than the tensor: Core ML keeps the "
        "tensor's shape"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            positions = SELECTS.get(node.target)
            if positions is None or len(node.args) <= max(positions):
                continue
            condition, filled = (node.args[p] for p in positions)
            if not (isinstance(condition, TensorRef) and isinstance(filled, TensorRef)):
                continue
            mine, full = ctx.shape(filled.name), ctx.shape(node.outputs[0])
            mask = ctx.shape(condition.name)
            if mine is None or full is None or mask is None:
                continue
            value = node.args[2] if node.target == "aten.masked_fill.Tensor" else None
            theirs = ctx.shape(value.name) if isinstance(value, TensorRef) else ()
            computed = _broadcast(mine, theirs or ())
            if computed is None or _broadcast(mine, mask) != tuple(full) or computed == full:
                continue
            shown = ", ".join(map(str, computed))
            yield ctx.finding(
                node,
                f"{node.op_base}'s condition (shape {tuple(mask)}) is larger than the tensor "
                f"it fills ({tuple(mine)}): torch broadcasts to {tuple(full)}, but Core ML's "
                f"select takes the shape of its values and computes ({shown}), a wrong shape "
                "that a later op may refuse (`Dimension mismatch`)",
                fix=f"expand the tensor first: `.expand({', '.join(map(str, full))})` before "
                f"{node.op_base} (the same values)",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """The filled tensor is expanded to the broadcast shape before the op (torch's own
        broadcast, written out), so coremltools' select gets values of the full shape."""
        import torch

        from coreml_lint.rulekit.fx import emit, fake_mode, finish, val

        aten = torch.ops.aten
        done = []
        mode = None
        for node in list(ep.graph.nodes):
            name = f"aten.{getattr(node.target, '__name__', '')}"
            positions = SELECTS.get(name)
            if positions is None or len(node.args) <= max(positions):
                continue
            filled = node.args[positions[1]]
            full, mine = val(node), val(filled)
            if full is None or mine is None or tuple(mine.shape) == tuple(full.shape):
                continue
            mode = mode or fake_mode(ep)
            with ep.graph.inserting_before(node):
                wide = emit(ep, mode, aten.expand.default, (filled, list(full.shape)))
            node.replace_input_with(filled, wide)
            done.append(
                f"{node.name}: the tensor it fills expanded from {tuple(mine.shape)} to "
                f"{tuple(full.shape)} first"
            )
        return finish(ep), done


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def _readout(op: str) -> tuple[Any, tuple[Any, ...]]:
    """Max pooling of node features per graph: (N, D) features, a (G, N) membership."""

    def forward(s: Any, h: Any, member: Any) -> Any:
        wide = h.unsqueeze(0)
        if op == "masked_fill":
            wide = wide.masked_fill(~member.unsqueeze(-1), float("-inf"))
        elif op == "where-number-first":
            wide = torch.where(~member.unsqueeze(-1), -1e4, wide)
        elif op == "where-number-second":
            wide = torch.where(member.unsqueeze(-1), wide, -1e4)
        elif op == "masked_fill-tensor":
            wide = wide.masked_fill(~member.unsqueeze(-1), torch.tensor(-1e4))
        elif op == "expanded":
            wide = wide.expand(3, -1, -1).masked_fill(~member.unsqueeze(-1), float("-inf"))
        return wide.amax(1) + 1

    member = torch.tensor([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]]).bool()
    return module(forward), (torch.randn(6, 8), member)


# MIL evidence: the select makes (1, 6, 8) where torch makes (3, 6, 8)
_NARROW = returns(r"\(1, 6, 8, fp\d+\)\(Tensor\) = select")


@case("condition-broadcasts-masked-fill", expect={"CML320"}, silent=_NARROW)
def _() -> Any:
    return _readout("masked_fill")


@case("condition-broadcasts-masked-fill-tensor", expect={"CML320"}, silent=_NARROW)
def _() -> Any:
    return _readout("masked_fill-tensor")


@case("condition-broadcasts-where-number-first", expect={"CML320"}, silent=_NARROW)
def _() -> Any:
    return _readout("where-number-first")


@case("condition-broadcasts-where-number-second", expect=set())
def _() -> Any:
    # export writes the number as a scalar tensor (where.self), which converts otherwise
    return _readout("where-number-second")


@case("condition-broadcasts-expanded-first", expect=set())
def _() -> Any:
    return _readout("expanded")

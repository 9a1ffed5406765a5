"""CML401 index-put-form: an indexed assignment form coremltools cannot convert.

What it does
    Flags a delegated ``index_put`` (``y[...] = v``, ``index_put_``, ``index_copy_``) in the
    forms that crash: a multi-entry index tensor next to a whole slice ``:``;
    ``accumulate=True`` next to ``:``; integer index tensors of different shapes (broadcast).
    A single-entry index next to ``:``, accumulate without ``:``, bool masks, 0-d or int
    indices and full same-shape index tensors all lower fine and are not flagged.

Why it breaks
    coremltools' ``index_put`` takes an index list with a ``:`` through a
    slice-assign path that uses each index as a scalar begin, so it works for one element
    only (``ValueError: Input squeeze_0 has rank 1 != other inputs rank 0``) and refuses
    accumulate (``NotImplementedError: If there existed any whole slice ... only
    torch.index_put(..., accumulate=False) handled yet``). Without ``:`` it stacks the index
    tensors, which needs equal shapes (``ValueError: Component tensor ... has shape (1, 3),
    others have (2, 1)``). A negative index next to ``:`` also crashes; its value is not in
    the graph, so this rule cannot see it.

Example
    ``y[:, torch.tensor([0, 2])] = v``

Fix
    (a) spell out every index with full same-shape tensors (``arange`` + ``expand``, or
    ``torch.broadcast_tensors``) and use non-negative indices;
    (b) ``skip_ops_for_coreml_delegation=["aten.index_put.default"]``;
    (c) rewrite the index_put into full, broadcast, non-negative indices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule


class IndexPutForm(Rule):
    code = "CML401"
    name = "index-put-form"
    outcome = Outcome.CRASH
    summary = "index_put with ':' and a multi-entry index, accumulate, or broadcast indices"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in ("aten.index_put.default", "aten._unsafe_index_put.default"):
                continue
            problem = self._problem(ctx, node)
            if problem is None:
                continue
            yield ctx.finding(
                node,
                f"index_put {problem[0]}: lowering fails with `{problem[1]}`",
                fix="index with full, same-shape, non-negative index tensors (arange + expand, "
                "or torch.broadcast_tensors) instead of ':'",
                partitioner=ctx.skip_advice(node),
            )

    @staticmethod
    def _problem(ctx: ProgramContext, node: Node) -> tuple[str, str] | None:
        indices = node.arg(1, "indices") or []
        accumulate = node.arg(3, "accumulate", False) is True
        tensors = [i for i in indices if isinstance(i, TensorRef)]
        if any(ctx.dtype(t.name) == "bool" for t in tensors):
            return None
        last_tensor = max((k for k, i in enumerate(indices) if i is not None), default=-1)
        has_slice = any(i is None for i in indices[:last_tensor])
        shapes = [ctx.shape(t.name) for t in tensors]
        if has_slice and accumulate:
            return (
                "with accumulate=True next to ':'",
                "NotImplementedError: If there existed any whole slice (e.g. : in x[:, 0]), "
                "only torch.index_put(..., accumulate=False) handled yet",
            )
        if has_slice:
            sizes = [
                math.prod(s) for s in shapes if s is not None and all(isinstance(d, int) for d in s)
            ]
            if any(size > 1 for size in sizes) or any(
                s is not None and not all(isinstance(d, int) for d in s) for s in shapes
            ):
                return (
                    "with a multi-entry index tensor next to ':'",
                    "ValueError: Input squeeze_0 has rank 1 != other inputs rank 0",
                )
            return None
        known = [s for s in shapes if s is not None]
        if len(known) > 1 and any(s != known[0] for s in known):
            return (
                "with index tensors of different shapes (broadcast)",
                "ValueError: Component tensor ... has shape ..., others have ...",
            )
        return None

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        """In a functional graph a clone that is not an output copies nothing anyone could
        tell apart; dropping it keeps a delegate from holding only a no-op clone around the
        index_put the refusal below sends to the CPU (a delegate that returns its input
        var, see CML501)."""
        from coreml_lint.rulekit.fx import aten, finish

        output = next(n for n in ep.graph.nodes if n.op == "output")
        done = []
        for node in list(ep.graph.nodes):
            if node.target != aten.clone.default or output in node.users:
                continue
            node.replace_all_uses_with(node.args[0])
            ep.graph.erase_node(node)
            done.append(f"{node.name}: internal clone dropped")
        return finish(ep), done

    def refuse(self, node: Any) -> str | None:
        """Every index_put then runs on the CPU (the portable index_put.out)."""
        from coreml_lint.rulekit.fx import op_base

        if op_base(node) in ("index_put", "_unsafe_index_put"):
            return "index_put form coremltools cannot convert"
        return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def assign(index: Callable[[torch.Tensor, torch.Tensor], None], v_shape: tuple[int, ...]):
    def forward(s, x, v):
        y = x.clone()
        index(y, v)
        return y

    return module(forward), (torch.randn(2, 4, 3), torch.randn(*v_shape))


def _set(y, key, v):
    y[key] = v


@case("index-put-slice-multi", expect={"CML401"}, crash=r"rank 1 != other inputs rank 0")
def _():
    return assign(lambda y, v: _set(y, (slice(None), torch.tensor([0, 2])), v), (2, 2, 3))


@case("index-put-slice-single", expect=set())
def _():
    return assign(lambda y, v: _set(y, (slice(None), torch.tensor([1])), v), (2, 1, 3))


@case("index-put-broadcast", expect={"CML401"}, crash=r"Component tensor")
def _():
    i0, i1 = torch.tensor([[0], [1]]), torch.tensor([[0, 2, 3]])
    return assign(lambda y, v: _set(y, (i0, i1), v), (2, 3, 3))


@case("index-put-same-shape", expect=set())
def _():
    i0, i1 = torch.tensor([0, 1]), torch.tensor([3, 0])
    return assign(lambda y, v: _set(y, (i0, i1), v), (2, 3))


@case(
    "index-put-accumulate-slice",
    expect={"CML401"},
    crash=r"only torch.index_put\(\.\.\., accumulate=False\)",
)
def _():
    idx = torch.tensor([1, 1])
    return assign(lambda y, v: torch.ops.aten.index_put_(y, [None, idx], v, True), (2, 2, 3))


@case("index-put-bool-mask", expect=set())
def _():
    def forward(s, x, v):
        y = x.clone()
        y[x > 0] = 0.5
        return y + v

    return module(forward), (torch.randn(2, 4, 3), torch.randn(2, 4, 3))

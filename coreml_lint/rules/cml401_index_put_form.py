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

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

INDEX_WRITES = (
    "aten.index_put.default",
    "aten._unsafe_index_put.default",
    "aten.index_copy.default",
)


def _indices(ctx: ProgramContext, node: Node) -> tuple[list[Any], bool]:
    """The index list (``None`` for a ':') and ``accumulate``, as coremltools' index_put
    will see them: ``index_copy(x, dim, index, v)`` is ``index_put(x, [None]*dim + [index])``."""
    if node.target == "aten.index_copy.default":
        dim, index = node.arg(1, "dim"), node.arg(2, "index")
        source = node.tensor_inputs()[0]
        rank = len(ctx.shape(source) or ()) or 1
        return [None] * (dim % rank) + [index], False
    return list(node.arg(1, "indices") or []), node.arg(3, "accumulate", False) is True


class IndexPutForm(Rule):
    code = "CML401"
    name = "index-put-form"
    outcome = Outcome.CRASH
    summary = "index_put with ':' and a multi-entry index, accumulate, or broadcast indices"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        # index_copy is decomposed into index_put by the edge step (``[None]*dim + [index]``).
        for node in ctx.coreml_nodes(include_decomposed=True):
            if node.target not in INDEX_WRITES:
                continue
            problem = self._problem(ctx, node)
            if problem is None:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} {problem[0]}: lowering fails with `{problem[1]}`",
                fix="index with full, same-shape, non-negative index tensors (arange + expand, "
                "or torch.broadcast_tensors) instead of ':', or write with scatter",
                partitioner=ctx.skip_advice(node),
            )

    @staticmethod
    def _problem(ctx: ProgramContext, node: Node) -> tuple[str, str] | None:
        indices, accumulate = _indices(ctx, node)
        tensors = [i for i in indices if isinstance(i, TensorRef)]
        if any(ctx.dtype(t.name) == "bool" for t in tensors):
            return None
        has_slice = any(i is None for i in indices)
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
                    "ValueError: Input squeeze_N has rank 1 != other inputs rank 0",
                )
            return None
        known = [s for s in shapes if s is not None]
        if len(known) > 1 and any(s != known[0] for s in known):
            return (
                "with index tensors of different shapes (broadcast)",
                "ValueError: Component tensor ... has shape ..., others have ...",
            )
        return None

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """A write of several positions along one dim (a KV-cache update with a multi-token
        prefill) becomes ``scatter``, which coremltools converts into
        ``scatter_along_axis`` and, for a buffer at iOS18, keeps as Core ML state. Then
        internal clones go (a delegate holding only a no-op clone around an index_put that
        still goes to the CPU would return its input var, see CML501)."""
        from coreml_lint.rulekit.fx import fake_mode

        mode = fake_mode(ep)
        done = []
        for node in list(ep.graph.nodes):
            found = _one_dim_write(node)
            if found is not None:
                done.append(_as_scatter(ep, mode, node, *found))
        return ep, done + _drop_internal_clones(ep)

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """Every index_put then runs on the CPU (the portable index_put.out)."""
        from coreml_lint.rulekit.fx import op_base

        if op_base(node) in ("index_put", "_unsafe_index_put"):
            return "index_put form coremltools cannot convert"
        return None


def _one_dim_write(node: Any) -> tuple[Any, int, Any, Any] | None:
    """(x, dim, index, values) when ``node`` writes several positions along one dim: an
    ``index_copy``, or an ``index_put`` with one integer index tensor and ':' elsewhere."""
    import torch

    from coreml_lint.rulekit.fx import aten, val

    if node.target == aten.index_copy.default:
        x, dim, index, values = node.args[:4]
        dim = dim % val(x).dim()
    elif node.target == aten.index_put.default:
        x, indices, values = node.args[:3]
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        tensors = [k for k, i in enumerate(indices) if i is not None]
        if accumulate or len(tensors) != 1 or len(tensors) == len(indices):
            return None  # no ':': coremltools' scatter_nd path converts it
        dim, index = tensors[0], indices[tensors[0]]
    else:
        return None
    index_val = val(index)
    if index_val is None or index_val.dtype.is_floating_point or index_val.dtype == torch.bool:
        return None  # a bool mask converts already
    if index_val.dim() == 0:
        return None  # so does a 0-d index
    length = index_val.numel()
    if isinstance(length, int) and length == 1:
        return None  # one position converts already
    if not isinstance(length, int) and index_val.dim() != 1:
        return None  # a dynamic N-d index: not seen in practice
    return x, dim, index, values


def _as_scatter(ep: Any, mode: Any, node: Any, x: Any, dim: int, index: Any, values: Any) -> str:
    """Make ``node`` ``scatter.src(x, dim, index broadcast, values broadcast)`` in place (its
    name, and so any buffer-mutation output spec, stays)."""
    import torch

    from coreml_lint.rulekit.fx import aten, emit, val

    x_val, index_val = val(x), val(index)
    length = index_val.numel()
    shape = list(x_val.shape)
    shape[dim] = length
    view = [1] * x_val.dim()
    view[dim] = length
    # what index_put broadcasts the values to: an N-d index keeps its dims in place
    indexed = [*x_val.shape[:dim], *index_val.shape, *x_val.shape[dim + 1 :]]
    was = node.target.__name__.split(".")[0]
    with ep.graph.inserting_before(node):
        view, shape, indexed = (_graph_sizes(ep, index, sizes) for sizes in (view, shape, indexed))
        if node.target == aten.index_put.default:  # index_put accepts negative positions
            index = emit(ep, mode, aten.remainder.Scalar, (index, x_val.shape[dim]))
        if val(index).dtype != torch.int64:
            index = emit(ep, mode, aten._to_copy.default, (index,), {"dtype": torch.int64})
        index = emit(ep, mode, aten.view.default, (index, view))
        if all(isinstance(d, int) for d in shape):
            index = emit(ep, mode, aten.expand.default, (index, shape))
        else:  # a dynamic length: broadcast by adding int zeros (coremltools' tile would make
            # every dim symbolic, and scatter_along_axis' shape check then fails)
            rest = [1 if k == dim else d for k, d in enumerate(shape)]
            zeros = emit(ep, mode, aten.full.default, (rest, 0), {"dtype": torch.int64})
            index = emit(ep, mode, aten.add.Tensor, (index, zeros))
        sizes = [val(d) if isinstance(d, torch.fx.Node) else d for d in indexed]
        if list(val(values).shape) != sizes:
            values = emit(ep, mode, aten.expand.default, (values, indexed))
        if len(indexed) != len(shape):
            values = emit(ep, mode, aten.reshape.default, (values, shape))
    node.target, node.args, node.kwargs = aten.scatter.src, (x, dim, index, values), {}
    buffer = ep.graph_signature.inputs_to_buffers.get(getattr(x, "name", ""), x.name)
    return (
        f"{node.name}: {was} of {length} positions along dim {dim} of {buffer} "
        f"{tuple(x_val.shape)} written as scatter"
    )


def _graph_sizes(ep: Any, index: Any, sizes: list[Any]) -> list[Any]:
    """``sizes`` with each symbolic entry (a dynamic prefill length) read off ``index`` by a
    ``sym_size`` node: a view or expand size must be a graph value, not a bare symbol."""
    from coreml_lint.rulekit.fx import aten, val

    out = []
    for size in sizes:
        if isinstance(size, int):
            out.append(size)
            continue
        dims = val(index).shape
        k = next(k for k, d in enumerate(dims) if not isinstance(d, int) and d == size)
        node = ep.graph.call_function(aten.sym_size.int, (index, k))
        node.meta["val"] = dims[k]
        out.append(node)
    return out


def _drop_internal_clones(ep: Any) -> list[str]:
    """A clone whose only readers are index_puts (``y = x.clone(); y[key] = v``, written
    functionally) copies nothing anyone could tell apart; dropped, it cannot leave a
    delegate holding only a no-op clone once the index_put goes to the CPU. Other clones
    stay (one in front of ``_unsafe_view`` makes its input contiguous)."""
    from coreml_lint.rulekit.fx import aten, finish

    writes = (aten.index_put.default, aten._unsafe_index_put.default)
    done = []
    for node in list(ep.graph.nodes):
        users = list(node.users)
        if node.target != aten.clone.default or not users:
            continue
        if not all(u.target in writes and u.args[0] is node for u in users):
            continue
        node.replace_all_uses_with(node.args[0])
        ep.graph.erase_node(node)
        done.append(f"{node.name}: clone read only by an index_put dropped")
    finish(ep)
    return done


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


def kv_cache(length: int) -> tuple[Any, tuple[Any, ...]]:
    """A static KV cache written as transformers' StaticLayer writes it:
    ``cache.index_copy_(2, cache_position, key_states)``, ``length`` tokens at a time."""

    def forward(s: Any, k: Any, cache_position: Any) -> Any:
        s.cache.index_copy_(2, cache_position, k)
        return s.cache.sum(-2)

    positions = torch.arange(length) + 1
    return module(forward, cache=torch.zeros(1, 2, 8, 4)), (torch.randn(1, 2, length, 4), positions)


SQUEEZE = r"Input squeeze_\d+ has rank 1 != other inputs rank 0"


@case("cache-prefill-ios18", expect={"CML401"}, settings={"ios": 18}, crash=SQUEEZE)
def _() -> Any:
    return kv_cache(4)


@case(
    "cache-prefill-not-taken-over",
    expect={"CML401"},
    settings={"take_over_mutable_buffer": False},
    crash=SQUEEZE,
)
def _() -> Any:
    return kv_cache(4)


@case("cache-decode-ios18", expect=set(), settings={"ios": 18}, clean=returns(r"read_state"))
def _() -> Any:
    return kv_cache(1)

"""The key of a measured call: one definition for the sweep's own programs and for the
nodes the linter reads, so a measured entry applies exactly where it was measured.

A ``Key`` is

- ``op``: the node's target in edge spelling (``aten.amax.default``);
- ``operands``: each tensor operand as ``dtype:origin``, origin ``in`` (the partition
  receives it), ``op`` (made inside the same partition) or ``const`` (a parameter, buffer or
  constant Core ML owns; ``const1`` of one element);
- ``variant``: every non-tensor argument export recorded, by position or keyword, as
  ``values.value_text`` records it (``keepdim=True``, ``a1=[2,2]``, ``exponent=frac``),
  but a factory's placement keywords (``IMMATERIAL``);
- ``shape``: the shape class of the first tensor operand (``r4``, ``r3u``).

A measured *cell* adds the ``context`` (what reads the op's output: nothing, a consumer
inside the partition, ``linear``/``addmm``/``matmul``) and the deployment ``target``; the
sweep records both with each result (``MeasuredKey``), the linter asks for them
(``BehaviourTable.answer(key, target, context)``). ``KeyMaker`` computes keys over the
linter's canonical graph; the sweep runs the same ``KeyMaker`` over each program it
measures (``sweep/measure.py``), so a new dimension is one field here and one generator
axis there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, TypedDict

from coreml_lint.measured.values import (
    POOLS,
    along_dim_texts,
    ceil_text,
    describe_variant,
    downsized_text,
    grouped_text,
    overlap_text,
    ranks_text,
    shape_class,
    sized_text,
    squeeze_text,
    value_text,
)
from coreml_lint.program.graph import Graph, Node, TensorRef
from coreml_lint.program.placement import Placement

ORIGIN_WORDS = {
    "in": "a partition input",
    "op": "made inside Core ML",
    "const": "a constant",
    "const1": "a one-element constant",
}


def const_origin(shape: tuple[Any, ...] | None) -> str:
    """``const``, or ``const1`` for a constant of one element (a single PReLU alpha, a
    scalar buffer): a converter can branch on a constant whose values are all one
    (coremltools' prelu takes a rank-3 input only with one alpha), and the sweep's
    constants hold several different values, so a one-element constant is keyed apart
    (and unmeasured, never answered by them)."""
    known = shape is not None and all(isinstance(d, int) for d in shape)
    return "const1" if known and math.prod(shape) == 1 else "const"


# Consumers whose dtype handling an op's output can break (measured as two-op contexts).
CONTEXT_OPS = frozenset({"aten.linear.default", "aten.addmm.default", "aten.matmul.default"})

# The context of a case whose op output is consumed inside the partition (the sweep's
# ``inside`` axis): what a node whose outputs stay in its partition meets.
INSIDE = "inside"

# The sweep returns every output of an op; a node with outputs nobody reads (layer norm's
# saved mean and rstd) is another program, and keyed apart from what was measured.
UNUSED_OUTPUTS = "outputs=partly-unused"


@dataclass(frozen=True)
class Key:
    op: str
    operands: str  # "bool:op,float32:in"
    variant: str  # "a1=ints1;keepdim=False"
    shape: str  # "r2", "r0", "r3u"

    def describe(self, names: list[str] | None = None) -> str:
        """``aten.rms_norm.default on float32 (a partition input) with eps=frac``; positional
        arguments by their schema names when ``names`` are known."""
        dtypes = ", ".join(
            f"{d} ({ORIGIN_WORDS.get(o, o)})"
            for d, _, o in (p.partition(":") for p in self.operands.split(",") if p)
        )
        variant = describe_variant(self.variant, names)
        return f"{self.op} on {dtypes or 'no tensor'}" + (f" with {variant}" if variant else "")


class MeasuredKey(TypedDict):
    """A key as the sweep records it with each result: the ``Key``'s fields, the context
    the case measured, and where the predicted placement put the node (``coreml``,
    ``dec``omposed first, or another backend)."""

    op: str
    operands: str
    variant: str
    shape: str
    context: str
    placed: str


def measured_key(key: Key, context: str, placed: str) -> MeasuredKey:
    return MeasuredKey(
        op=key.op,
        operands=key.operands,
        variant=key.variant,
        shape=key.shape,
        context=context,
        placed=placed,
    )


# Ops export keeps that ExecuTorch's edge dialect turns into another before the partitioner
# sees them (``x & 1`` is ``__and__`` in the exported program, ``bitwise_and`` at the edge):
# the sweep measured them under the edge name.
SAME_OP = {
    f"aten.__{name}__.{overload}": f"aten.bitwise_{name}.{overload}"
    for name in ("and", "or", "xor")
    for overload in ("Scalar", "Tensor")
}


def _squeeze_dims(args: list[Any], shape: tuple[Any, ...] | None) -> tuple[str, list] | None:
    """``squeeze.dim(x, d)`` as ``squeeze.dims(x, [d])``; ``squeeze(x)`` as ``squeeze.dims``
    of every dim (torch's decompositions), or None where the rank is unknown."""
    if len(args) >= 2:
        return "aten.squeeze.dims", [args[0], [args[1]]]
    return None if shape is None else ("aten.squeeze.dims", [args[0], list(range(len(shape)))])


def _transposed(args: list[Any], shape: tuple[Any, ...] | None) -> tuple[str, list] | None:
    """``transpose(x, a, b)`` and ``t(x)`` as torch decomposes them: a ``permute`` swapping
    the two dims, or an ``alias`` (ExecuTorch's ``alias_copy``) where they are one dim."""
    if shape is None:
        return None
    rank = len(shape)
    if len(args) >= 3:
        first, second = args[1], args[2]
    elif rank == 2:
        first, second = 0, 1
    else:
        first = second = 0  # ``t`` of a vector or a scalar is the tensor itself
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in (first, second)):
        return None
    if rank == 0 or first % rank == second % rank:
        return "aten.alias_copy.default", [args[0]]
    order = list(range(rank))
    order[first % rank], order[second % rank] = order[second % rank], order[first % rank]
    return "aten.permute.default", [args[0], order]


# Ops torch decomposes into one other op with its arguments rewritten before the
# partitioner sees them: the sweep measured that op, so the node is keyed as it.
ONE_OP_DECOMPOSITIONS = {
    "aten.squeeze.dim": _squeeze_dims,
    "aten.squeeze.default": _squeeze_dims,
    "aten.transpose.int": _transposed,
    "aten.t.default": _transposed,
}


def keyed_whole(target: str) -> bool:
    """Whether a node torch decomposes is still keyed as one measured op (renamed, or
    decomposed into one other op)."""
    return target in SAME_OP or target in ONE_OP_DECOMPOSITIONS


class KeyMaker:
    """Keys of the nodes of one placed graph (shared lookups worked out once)."""

    def __init__(self, graph: Graph, placement: Placement) -> None:
        self.graph = graph
        self.placement = placement
        self.producers = graph.producers()
        self.kinds = {spec.name: spec.kind for spec in graph.inputs}

    def origin(self, value: str, node: Node) -> str:
        """Where a node's operand comes from. A float32 value made inside Core ML is keyed
        as an input: the sweep makes operands inside the program only for the other dtypes
        (a cast there is what can differ), so ``float32:in`` is what was measured."""
        producer = self.producers.get(value)
        if producer is not None:
            mine = self.placement.nodes[node.name].partition
            theirs = self.placement.nodes[producer.name].partition
            inside = mine is not None and mine == theirs
            return "op" if inside and self.graph.dtype(value) != "float32" else "in"
        if self.kinds.get(value) in ("parameter", "buffer", "constant"):
            if not self.placement.settings.take_over_constant_data:
                return "in"
            info = self.graph.tensors.get(value)
            return const_origin(info.shape if info is not None else None)
        return "in"

    def keyed_node(self, node: Node) -> Node:
        """The node as the table keys it: renamed (``__and__`` is ``bitwise_and``), or the
        one op torch decomposes it into with that op's arguments (``transpose`` is
        ``permute``); the node itself otherwise."""
        op = SAME_OP.get(node.target, node.target)
        if op in ONE_OP_DECOMPOSITIONS and not node.kwargs:  # export passes these positionally
            decomposed = ONE_OP_DECOMPOSITIONS[op](node.args, self.first_shape(node))
            if decomposed is not None:
                return replace(node, target=decomposed[0], args=decomposed[1])
        return replace(node, target=op) if op != node.target else node

    def first_shape(self, node: Node) -> tuple[Any, ...] | None:
        """The shape of the node's first operand (of its output where it has none)."""
        refs = node.tensor_inputs()
        first = refs[0] if refs else (node.outputs[0] if node.outputs else None)
        info = self.graph.tensors.get(first) if first else None
        return info.shape if info is not None else None

    def key(self, node: Node) -> Key:
        refs = node.tensor_inputs()
        operands = ",".join(f"{self.graph.dtype(r)}:{self.origin(r, node)}" for r in refs)
        shape = self.first_shape(node)
        shapes = [info.shape if (info := self.graph.tensors.get(r)) else None for r in refs]
        node = self.keyed_node(node)
        variant = variant_of(node, shape, shapes)
        if len(node.outputs) > 1 and not all(o in self.read for o in node.outputs):
            variant += ";" * bool(variant) + UNUSED_OUTPUTS
        return Key(node.target, operands, variant, shape_class(shape))

    @cached_property
    def read(self) -> set[str]:
        """Values some node or the program's outputs read."""
        found = {o.name for o in self.graph.outputs if o.name}
        found.update(r for node in self.graph.nodes for r in node.tensor_inputs())
        return found


# A factory's placement keywords: export writes ``device=cpu, pin_memory=False`` into every
# ``torch.zeros``/``full``/``arange`` a model calls, where the sweep's calls mostly leave
# them out. Measured: 508 pairs of cells that differ only in these keywords, over 24 ops
# and every target, never differ in outcome, so a key that kept them would miss every
# measured factory call a model makes.
IMMATERIAL = frozenset({"device", "layout", "pin_memory"})


def variant_of(
    node: Node,
    shape: tuple[Any, ...] | None = None,
    shapes: list[tuple[Any, ...] | None] | None = None,
) -> str:
    """The non-tensor arguments of a node as export recorded them: small integers and
    lists of them exactly, other values by class; scale factors, a pooling's ceil and a
    squeeze's dims by what they do to the first operand's ``shape`` (``values.scaled_text``,
    ``ceil_text``, ``squeeze_text``), an attention's ``enable_gqa`` by whether the heads of
    its operands (``shapes``, every tensor operand's) differ (``grouped_text``), and a gather's
    or scatter's index by how its shape relates to its input's (``along_dim_texts``), and a
    fold's windows by whether they overlap (``overlap_text``), and an antialiased resize by
    whether it shrinks (``downsized_text``), a resize's output size by its ratio to the
    input's (``sized_text``), and a matmul by its operands' ranks where
    they differ (``ranks_text``)."""
    parts = [
        f"a{i}={value_text(v, shape)}"
        for i, v in enumerate(node.args)
        if not isinstance(v, TensorRef) and not _only_tensors(v)
    ]
    if (derived := ceil_text(node.target, node.args, shape)) is not None:
        ceil = f"a{POOLS[node.target][5]}="
        parts = [ceil + derived if p == ceil + "True" else p for p in parts]
    for derive in (squeeze_text, sized_text):  # argument 1 read against the shape
        if (derived := derive(node.target, node.args, shape)) is not None:
            parts = [f"a1={derived}" if p.startswith("a1=") else p for p in parts]
    parts += [
        f"{k}={value_text(v, shape)}"
        for k, v in sorted(node.kwargs.items())
        if not isinstance(v, TensorRef) and not _only_tensors(v) and k not in IMMATERIAL
    ]
    if (derived := grouped_text(node.target, node.kwargs, shapes)) is not None:
        parts = [f"enable_gqa={derived}" if p == "enable_gqa=True" else p for p in parts]
    parts += along_dim_texts(node.target, node.args, shapes)
    if (derived := overlap_text(node.target, node.args)) is not None:
        parts.append(derived)
    if (derived := downsized_text(node.target, node.args, shape)) is not None:
        parts.append(derived)
    if (derived := ranks_text(node.target, shapes)) is not None:
        parts.append(derived)
    return ";".join(parts)


def _only_tensors(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(i, TensorRef) for i in value)
    )

"""Turn a saved graph into the functional ATen graph the partitioner sees.

``torch.export.save`` stores the *training* IR: in-place ops (``add_``, ``copy_`` into a
slice of a buffer), and CompositeImplicit ops such as ``to.dtype`` or ``reshape``.
``to_edge_transform_and_lower`` first calls ``ep.run_decompositions({})``, which
functionalizes the graph (mutations become new values plus ``BUFFER_MUTATION`` outputs)
and decomposes the CompositeImplicit ops that torch will not preserve. Only then does
``CoreMLPartitioner.ops_to_not_decompose`` look at it. We mirror that step here, without
torch, for the ops that matter to placement; a CompositeImplicit op we do not model is
kept and marked ``opaque_decomposition``. ``tests/test_reader.py`` checks the result
against torch's own ``run_decompositions({})`` on every test program.

A tensor-subclass parameter (torchao's quantized weights) is saved as one input read through
``export.access_subclass_inner_tensor`` once per inner tensor; ``run_decompositions`` unwraps
it into one plain parameter per inner tensor (``l1.parametrizations.weight.original0``, ...),
which a Core ML partition then owns as a constant. We do the same: each inner tensor becomes
an input of the outer one's kind, named by the access node's output.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from coreml_lint.program.gcpause import gc_paused
from coreml_lint.program.graph import (
    CHANNELS_LAST,
    CONTIGUOUS_FORMAT,
    DType,
    Graph,
    InputSpec,
    Node,
    Opaque,
    OutputSpec,
    TensorInfo,
    TensorRef,
)
from coreml_lint.program.layout import concrete, dense_in
from coreml_lint.program.optable import OpTable, load_optable

# Checks that export inserts and ExecuTorch strips before partitioning.
_ASSERTION_OPS = {
    "aten._assert_tensor_metadata.default",
    "aten._assert_scalar.default",
    "aten._assert_async.msg",
    "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default",
}
_CASTS = {
    "aten.to.dtype",
    "aten.to.dtype_layout",
    "aten.to.device",
    "aten.to.other",
    "aten.type_as.default",
    "aten._to_copy.default",
}
_RESHAPES = {
    "aten.reshape.default",
    "aten.flatten.using_ints",
    "aten.unflatten.int",
    "aten.view_as.default",
    "aten.reshape_as.default",
}
_IDENTITIES = {"aten.alias.default", "aten.detach.default", "aten.detach_.default"}
# CompositeImplicit ops torch always decomposes, by what they become in the ATen graph.
_RENAMES = {
    "aten.chunk.default": "aten.split.Tensor",
    "aten.unsafe_chunk.default": "aten.unsafe_split.Tensor",
    "aten.lift_fresh_copy.default": "aten.clone.default",
}
# The op that writes a view's new value back into its source, by the view's op.
_SCATTERS = {
    "slice": "aten.slice_scatter.default",
    "select": "aten.select_scatter.default",
    "diagonal": "aten.diagonal_scatter.default",
    "as_strided": "aten.as_strided_scatter.default",
}
_DROPOUTS = {"aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default"}
SUBCLASS_ACCESS = "export.access_subclass_inner_tensor.default"
_CONSTANT_KINDS = ("parameter", "buffer", "constant")


def canonicalize(graph: Graph, table: OpTable | None = None) -> Graph:
    """A new graph in functional ATen form; the input graph is not changed."""
    with gc_paused():
        return _Canonicalizer(graph, table or load_optable()).run()


def _is_inplace(node: Node) -> bool:
    base = node.op_base
    return (
        node.namespace == "aten"
        and base.endswith("_")
        and not base.startswith("__")
        and len(node.target.split(".")) == 3
    )


class _Canonicalizer:
    def __init__(self, graph: Graph, table: OpTable) -> None:
        self.graph = graph
        self.table = table
        self.tensors: dict[str, TensorInfo] = dict(graph.tensors)
        self.rename: dict[str, str] = {}  # a value that torch elides -> the value it stands for
        self.view_of: dict[str, tuple[str, Node]] = {}  # view value -> (its source, view node)
        self.current: dict[str, str] = {}  # mutated base value -> its latest value
        self.alias_of: dict[str, str] = {}  # whole new value of a mutated base -> the base
        self.nodes: list[Node] = []
        self.mutated: dict[str, str] = {}  # base value name -> latest value (for outputs)
        self.specs = {spec.name: spec for spec in graph.inputs}
        self.inner: dict[str, list[InputSpec]] = {}  # subclass input -> its inner tensors
        self.reshaped: dict[str, str] = {}  # view made by reshape of an intermediate -> source

    def resolve(self, name: str) -> str:
        """The value a name reads now: an in-place op's result aliases its base, so a later
        read of it (``buf.copy_(v).add_(1)``) sees the base's latest value."""
        seen = 0
        while name in self.rename and seen < 10_000:
            name = self.rename[name]
            seen += 1
        return self.current.get(self.alias_of.get(name, name), name)

    def _map_args(self, value: Any) -> Any:
        """``value`` with every tensor name resolved; the same object when none changes."""
        if isinstance(value, TensorRef):
            name = self.resolve(value.name)
            return value if name == value.name else TensorRef(name)
        if isinstance(value, list):
            mapped = [self._map_args(v) for v in value]
            return value if all(a is b for a, b in zip(mapped, value, strict=True)) else mapped
        return value

    def run(self) -> Graph:
        for node in self.graph.nodes:
            if node.target in _ASSERTION_OPS:
                continue
            args = self._map_args(node.args)
            kwargs = {k: self._map_args(v) for k, v in node.kwargs.items()}
            if args is not node.args or any(kwargs[k] is not v for k, v in node.kwargs.items()):
                node = node.replaced(args=args, kwargs=kwargs)
            if node.target == SUBCLASS_ACCESS and self._unwrap_subclass(node):
                continue
            if node.target in _IDENTITIES:
                self._identity(node)
            elif node.target in _DROPOUTS and node.arg(2, "train") is False:
                # torch decomposes an inference-mode dropout into a copy.
                self._emit(node, target="aten.clone.default", args=node.args[:1], kwargs={})
            elif node.target == "aten.contiguous.default":
                self._contiguous(node)
            elif _is_inplace(node):
                self._functionalize(node)
            elif node.target in _CASTS:
                self._cast(node)
            elif node.target in _RESHAPES:
                self._reshape(node)
            elif node.target in _RENAMES:
                self._emit(node, target=_RENAMES[node.target])
            elif node.target == "aten.batch_norm.default":
                training = node.arg(5, "training", False)
                target = "aten._native_batch_norm_legit" + (
                    ".default" if training else "_no_training.default"
                )
                self._emit(node, target=target)
            elif node.target in _DROPOUTS:
                self._emit(node, target="aten.native_dropout.default")
            elif node.target == "aten.expand_as.default":
                self._emit(
                    node,
                    target="aten.expand.default",
                    args=[node.args[0], self._shape(node)],
                    kwargs={},
                )
            else:
                aten = node.aten_name
                opaque = aten in self.table.cia and aten not in self.table.cia_preserved
                emitted = self._emit(node, opaque_decomposition=opaque)
                if aten in self.table.view and node.outputs:
                    src = node.tensor_inputs()[0] if node.tensor_inputs() else None
                    if src is not None:
                        # A view of a written value is a view of the base it stands for
                        # (``z[1:] = a; z[0].fill_(b)``: the second write is into ``z``).
                        self.view_of[node.outputs[0]] = (self.alias_of.get(src, src), emitted)
        return self._finish()

    def _unwrap_subclass(self, node: Node) -> bool:
        """An inner tensor of a subclass parameter becomes an input of the same kind."""
        owner, attr = node.arg(0, "src"), node.arg(1, "attr")
        spec = self.specs.get(owner.name) if isinstance(owner, TensorRef) else None
        if spec is None or spec.kind not in _CONSTANT_KINDS or not isinstance(attr, str):
            return False
        if len(node.outputs) != 1:
            return False
        target = f"{spec.target or spec.name}.{attr}"
        inner = InputSpec(node.outputs[0], spec.kind, target, spec.persistent)
        self.inner.setdefault(spec.name, []).append(inner)
        return True

    def _inputs(self) -> list[InputSpec]:
        """The graph's inputs, each unwrapped subclass input replaced by its inner tensors
        (kept too while a node still reads it whole)."""
        read = {name for node in self.nodes for name in node.tensor_inputs()}
        inputs: list[InputSpec] = []
        for spec in self.graph.inputs:
            inner = self.inner.get(spec.name)
            if inner is None or spec.name in read:
                inputs.append(spec)
            inputs.extend(inner or ())
        return inputs

    def _reshape(self, node: Node) -> None:
        """``reshape`` is a view when strides allow it, else ``clone`` + ``_unsafe_view``."""
        src = node.tensor_inputs()[0]
        src_info = self.tensors.get(src)
        shape = self._shape(node)
        if src_info is None or src_info.strides is None or _viewable(src_info, shape):
            self._emit(node, target="aten.view.default", args=[node.args[0], shape], kwargs={})
            if node.outputs and src in self.tensors and src not in self.specs:
                self.reshaped[node.outputs[0]] = src
            return
        clone = f"{node.name}_contiguous"
        self.tensors[clone] = TensorInfo(src_info.dtype, src_info.shape)
        self.nodes.append(
            Node(
                name=clone,
                target="aten.clone.default",
                args=[TensorRef(src)],
                kwargs={},
                outputs=[clone],
                stack_trace=node.stack_trace,
                origin=node.target,
            )
        )
        self._emit(
            node, target="aten._unsafe_view.default", args=[TensorRef(clone), shape], kwargs={}
        )

    def _contiguous(self, node: Node) -> None:
        """``contiguous()`` copies only a tensor that is not contiguous already;
        ``contiguous(memory_format=...)`` is torch's ``clone`` to that format."""
        info = self.tensors.get(node.tensor_inputs()[0])
        layout = node.arg(1, "memory_format")
        if isinstance(layout, Opaque) and layout.value not in (None, CONTIGUOUS_FORMAT):
            out = self.tensors.get(node.outputs[0]) if node.outputs else None
            if info is None or out is None or info.strides != out.strides:
                kwargs = {"memory_format": layout}
                self._emit(node, target="aten.clone.default", args=node.args[:1], kwargs=kwargs)
                return
        if info is None or _is_contiguous(info):
            self._identity(node)
        else:
            self._emit(node, target="aten.clone.default", args=node.args[:1], kwargs={})

    def _shape(self, node: Node) -> list[int | str]:
        info = self.tensors.get(node.outputs[0]) if node.outputs else None
        return list(info.shape) if info else []

    def _emit(self, node: Node, **changes: Any) -> Node:
        if changes.get("target") and changes["target"] != node.target:
            changes.setdefault("origin", node.target)
        if any(getattr(node, key) is not value for key, value in changes.items()):
            node = node.replaced(**changes)
        self.nodes.append(node)  # nodes are never edited in place, so one may be shared
        return node

    def _identity(self, node: Node) -> None:
        inputs = node.tensor_inputs()
        if inputs and node.outputs:
            self.rename[node.outputs[0]] = inputs[0]

    def _cast(self, node: Node) -> None:
        src = node.tensor_inputs()[0]
        out = node.outputs[0]
        src_info, out_info = self.tensors.get(src), self.tensors.get(out)
        # ``to(memory_format=...)`` copies when the layout changes, even at the same dtype.
        layout = node.kwargs.get("memory_format") or next(
            (a for a in node.args if isinstance(a, Opaque) and a.kind == "as_memory_format"), None
        )
        relayout = (  # channels_last or channels_last_3d (preserve_format aliases)
            isinstance(layout, Opaque)
            and layout.value in (CHANNELS_LAST, CHANNELS_LAST + 1)
            and (src_info is None or out_info is None or src_info.strides != out_info.strides)
        )
        if src_info and out_info and src_info.dtype == out_info.dtype and not relayout:
            self._identity(node)  # torch drops a cast to the same dtype
            return
        dtype = out_info.dtype if out_info else "unknown"
        kwargs: dict[str, Any] = {"dtype": DType(dtype)}
        if relayout:
            kwargs["memory_format"] = layout
        self._emit(node, target="aten._to_copy.default", args=[TensorRef(src)], kwargs=kwargs)

    def _functionalize(self, node: Node) -> None:
        base_name = node.op_base[:-1]
        overload = node.target.split(".")[2]
        target = f"aten.{base_name}.{overload}"
        mutated = node.tensor_inputs()[0] if node.tensor_inputs() else None
        new = self._emit(node, target=target)
        if mutated is None or not new.outputs:
            return
        if mutated in self.reshaped and mutated not in self.view_of:
            self._regenerate_views(new, mutated)
            return
        result = new.outputs[0]
        if mutated in self.view_of:
            # what the in-place op returns is that view too: ``a.mul_(2).add_(b)`` writes twice
            self.view_of[result] = self.view_of[mutated]
            base, result = self._scatter_into_base(new, mutated)
        else:
            base = self.alias_of.get(mutated, mutated)
        self.current[base] = result
        self.mutated[base] = result
        self.alias_of[result] = base

    def _scatter_into_base(self, new: Node, mutated: str) -> tuple[str, str]:
        """A write into a view (``z[1:, 1:] = a``: ``copy_`` into a slice of a slice), as
        functionalization makes it for slices, selects, diagonals and strided views: the
        outer views taken again of the base's latest value, then each level's scatter
        (``slice_scatter``, ``select_scatter``) from the innermost out. A level of another
        view (``view``, ``t``) becomes a ``copy`` into its source, where torch writes the
        inverse view: the ops it counts differ there. Returns the base and its new value."""
        chain: list[Node] = []  # the view nodes from the written view out to the base
        value = mutated
        while value in self.view_of:
            value, view = self.view_of[value]
            chain.append(view)
        base = value
        sources = [self.resolve(base)]  # what each level's view is taken of, outermost first
        for level, view in enumerate(reversed(chain[1:])):
            name = f"{new.name}_view{level}"
            self.tensors[name] = self.tensors.get(view.outputs[0], TensorInfo("unknown", ()))
            regenerated = view.replaced(
                name=name, args=[TensorRef(sources[-1]), *view.args[1:]], outputs=[name]
            )
            self.nodes.append(regenerated)
            sources.append(name)
        written = new.outputs[0]
        for level, (view, source) in enumerate(zip(chain, reversed(sources), strict=True)):
            outermost = level == len(chain) - 1
            name = f"{new.name}_scatter" if outermost else f"{new.name}_scatter{level}"
            self.tensors[name] = self.tensors.get(source, TensorInfo("unknown", ()))
            scatter = _SCATTERS.get(view.op_base)
            where = view.args[1:] if scatter else []  # dim, start, end... (select: dim, index)
            self.nodes.append(
                Node(
                    name=name,
                    target=scatter or "aten.copy.default",
                    args=[TensorRef(source), TensorRef(written), *where],
                    kwargs=dict(view.kwargs) if scatter else {},
                    outputs=[name],
                    stack_trace=new.stack_trace,
                    origin=new.target,
                )
            )
            written = name
        return base, written

    def _regenerate_views(self, new: Node, mutated: str) -> None:
        """An in-place op on a reshaped intermediate (torchao's ``mm(...).reshape(...).add_(b)``):
        functionalization remakes the base as a view of the result, and the mutated view as a
        view of that base; later reads see those."""
        base, result = self.reshaped[mutated], new.outputs[0]
        made = []
        for suffix, src, of in (("base", result, base), ("view", None, mutated)):
            name = f"{new.name}_{suffix}"
            shape = list(self.tensors[of].shape) if of in self.tensors else []
            self.tensors[name] = self.tensors.get(of, TensorInfo("unknown", ()))
            read = src if src is not None else made[-1]
            self.nodes.append(
                Node(
                    name=name,
                    target="aten.view.default",
                    args=[TensorRef(read), shape],
                    kwargs={},
                    outputs=[name],
                    stack_trace=new.stack_trace,
                    origin=new.target,
                )
            )
            made.append(name)
        self.current[base], self.current[mutated] = made
        self.alias_of[result] = mutated

    def _remove_unnecessary_copies(
        self, mutation_outputs: list[OutputSpec], kept: list[OutputSpec]
    ) -> tuple[list[OutputSpec], list[OutputSpec]]:
        """torch's ``_remove_unnecessary_copy_op_pass``: a buffer or parameter whose new value
        is ``copy(buffer, src)`` gets ``src`` itself, and every use of the copy reads ``src``.
        The buffer is then no longer read by the graph, so the partitioner never makes it
        Core ML state (``buf.copy_(pos[0])`` alone is written by ExecuTorch)."""
        producers = {out: node for node in self.nodes for out in node.outputs}
        swap: dict[str, str] = {}
        for spec in mutation_outputs:
            node = producers.get(spec.name or "")
            if spec.kind not in ("buffer_mutation", "parameter_mutation") or node is None:
                continue
            source = node.args[1] if len(node.args) > 1 else None
            if node.target == "aten.copy.default" and isinstance(source, TensorRef):
                swap[node.outputs[0]] = swap.get(source.name, source.name)
        if not swap:
            return mutation_outputs, kept
        self.nodes = [
            node.replaced(
                args=_swap_refs(node.args, swap),
                kwargs={k: _swap_refs(v, swap) for k, v in node.kwargs.items()},
            )
            for node in self.nodes
            if not (node.outputs and node.outputs[0] in swap)
        ]

        def renamed(specs: list[OutputSpec]) -> list[OutputSpec]:
            return [replace(o, name=swap.get(o.name, o.name)) if o.name else o for o in specs]

        return renamed(mutation_outputs), renamed(kept)

    def _eliminate_dead_code(self, keep: set[str]) -> None:
        """Drop nodes nothing reads, as torch's functionalization does."""
        live = set(keep)
        kept: list[Node] = []
        for node in reversed(self.nodes):
            if node.outputs and not any(out in live for out in node.outputs):
                continue
            live.update(node.tensor_inputs())
            kept.append(node)
        self.nodes = kept[::-1]

    def _finish(self) -> Graph:
        kinds = {spec.name: spec for spec in self.graph.inputs}
        mutation_outputs = []
        for base, latest in self.mutated.items():
            spec = kinds.get(base)
            if spec is None or spec.kind not in ("buffer", "user_input", "parameter"):
                continue
            kind = {
                "buffer": "buffer_mutation",
                "user_input": "user_input_mutation",
                "parameter": "parameter_mutation",
            }[spec.kind]
            mutation_outputs.append(OutputSpec(name=latest, kind=kind, target=spec.target or base))
        kept = [
            OutputSpec(self.resolve(o.name) if o.name else None, o.kind, o.target)
            for o in self.graph.outputs
        ]
        already = {(o.kind, o.target) for o in kept}
        mutation_outputs = [o for o in mutation_outputs if (o.kind, o.target) not in already]
        mutation_outputs, kept = self._remove_unnecessary_copies(mutation_outputs, kept)
        self._eliminate_dead_code({o.name for o in [*mutation_outputs, *kept] if o.name})
        return Graph(
            inputs=self._inputs(),
            nodes=self.nodes,
            outputs=mutation_outputs + kept,
            tensors=self.tensors,
            source=self.graph.source,
            method=self.graph.method,
            meta={**self.graph.meta, "canonical": True},
        )


def _swap_refs(value: Any, swap: dict[str, str]) -> Any:
    if isinstance(value, TensorRef) and value.name in swap:
        return TensorRef(swap[value.name])
    if isinstance(value, list):
        return [_swap_refs(v, swap) for v in value]
    return value


def _viewable(info: TensorInfo, shape: list[int | str]) -> bool:
    """ATen's ``computeStride``: can ``shape`` be a view of a tensor with these strides?"""
    old_shape, old_stride = info.shape, info.strides or ()
    values = [*old_shape, *old_stride, *shape]
    if not all(isinstance(v, int) for v in values) or len(old_shape) != len(old_stride):
        return True  # symbolic sizes: assume the common, viewable case
    if not old_shape or 0 in old_shape:
        return True
    view_d = len(shape) - 1
    chunk_base_stride = old_stride[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1
            and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = view_numel = 1
    return view_d == -1


def _is_contiguous(info: TensorInfo) -> bool:
    """Whether the recorded strides are contiguous; a symbolic size or stride is read as a
    large one (``nonzero``'s ``(u0, 2)`` indices at strides ``(1, u0)`` are not), and one
    whose expression cannot be read is taken as contiguous."""
    if info.strides is None:
        return True
    symbols: dict[str, int] = {}
    shape, strides = concrete(info.shape, symbols), concrete(info.strides, symbols)
    if shape is None or strides is None or len(shape) != len(strides):
        return True
    return dense_in(shape, strides, list(range(len(shape))))

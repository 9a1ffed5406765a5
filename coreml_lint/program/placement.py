"""Predict what the stock ``CoreMLPartitioner`` (executorch 1.5.1) does with a graph.

The partitioner decides twice, by op *name* only (docs/background.md#skip-list-names,
#the-support-test-reads-op-names):

1. ``ops_to_not_decompose`` looks at the functional ATen graph, where a name has no
   namespace (``matmul.default``): ops it calls supported are kept whole, every other op
   is decomposed to the Core ATen set by ``to_edge``.
2. ``partition`` looks at the edge graph, where a name carries its namespace
   (``aten.matmul.default``, ``dim_order_ops._to_dim_order_copy.default``) and tags the
   supported nodes; torch's ``CapabilityBasedPartitioner`` then groups them into as few
   partitions as it can without making a cycle through a CPU node.

A node is supported when coremltools has a converter for the sanitized name, the name is
not in ``skip_ops_for_coreml_delegation`` (compared exactly, lower case), and executorch's
refusal list does not override it. We reproduce all of it from the checked-in op table.
A node whose ATen op torch decomposes into one core op (``DECOMPOSES_TO``: ``layer_norm``
into ``native_layer_norm``) is placed as that op, by its name; a node decomposed into several
pieces is placed on Core ML (its pieces are, in practice): the one place where the prediction
is an approximation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.gcpause import gc_paused
from coreml_lint.program.graph import Graph, Node
from coreml_lint.program.optable import OpTable, load_optable
from coreml_lint.program.partitioning import propose_partitions

COREML = "coreml"
CPU = "cpu"

# executorch/backends/apple/coreml/partition/coreml_partitioner.py (1.5.1).
REFUSED_OPS = frozenset(
    {"diagonal.default", "diagonal_copy.default", "acosh.default", "asinh.default", "rand.default"}
)
NOT_KEPT_WHOLE = frozenset(
    {
        "triu.default",
        "tril.default",
        "repeat_interleave.self_int",
        "repeat_interleave.self_Tensor",
    }
)
# Ops torch's default decomposition turns into one core op with the same leading arguments
# (torch 2.13.0; tests/test_skip_entry_placement.py checks it with torch). When an ATen-spelled
# skip entry stops the partitioner keeping one whole, the edge graph holds that core op, and
# the partitioner decides on its name: ``layer_norm`` skipped this way is still delegated.
DECOMPOSES_TO = {
    "layer_norm.default": "native_layer_norm.default",
    "group_norm.default": "native_group_norm.default",
    "softmax.int": "_softmax.default",
    "log_softmax.int": "_log_softmax.default",
    "conv1d.default": "convolution.default",
    "conv2d.default": "convolution.default",
    "conv_transpose2d.input": "convolution.default",
    "relu6.default": "hardtanh.default",
    "selu.default": "elu.default",
    "square.default": "pow.Tensor_Scalar",
    "clamp_min.default": "clamp.default",
    "true_divide.Tensor": "div.Tensor",
    "floor_divide.default": "div.Tensor_mode",
    "sum.default": "sum.dim_IntList",
    "adaptive_avg_pool2d.default": "_adaptive_avg_pool2d.default",
    "adaptive_avg_pool3d.default": "_adaptive_avg_pool3d.default",
    # Python's operators on tensors: ``a | b`` is bitwise_or, which coremltools has no
    # converter for (bitwise_and it has), so a bool ``|`` stays on the CPU. (A Scalar
    # overload's edge spelling varies with its operand; those are left as they were.)
    "__and__.Tensor": "bitwise_and.Tensor",
    "__or__.Tensor": "bitwise_or.Tensor",
    "__xor__.Tensor": "bitwise_xor.Tensor",
}
# Renames ExecuTorch applies when it builds the edge graph.
EDGE_RENAMES = {
    "_to_copy.default": "dim_order_ops._to_dim_order_copy.default",
    "clone.default": "dim_order_ops._clone_dim_order.default",
    "empty.memory_format": "dim_order_ops._empty_dim_order.default",
}


@dataclass
class NodePlacement:
    node: Node
    where: str
    reason: str
    aten_name: str
    edge_name: str
    kept_whole: bool = False
    decomposed: bool = False
    partition: int | None = None
    decomposed_into: str | None = None  # the one core op torch made of it (DECOMPOSES_TO)


@dataclass
class Partition:
    id: int
    nodes: list[Node]
    inputs: list[str] = field(default_factory=list)  # values the delegate receives
    constants: list[str] = field(default_factory=list)  # params/buffers it owns
    states: list[str] = field(default_factory=list)  # mutable buffers it owns as state
    outputs: list[str] = field(default_factory=list)  # values it returns


@dataclass
class Placement:
    graph: Graph
    settings: PartitionerSettings
    nodes: dict[str, NodePlacement]
    partitions: list[Partition]
    skip_matches: dict[str, dict[str, list[str]]]

    def on_coreml(self, node: Node) -> bool:
        return self.nodes[node.name].where == COREML

    def partition_of(self, node: Node) -> Partition | None:
        pid = self.nodes[node.name].partition
        return None if pid is None else self.partitions[pid]

    def summary(self) -> dict[str, Any]:
        coreml = Counter(p.edge_name for p in self.nodes.values() if p.where == COREML)
        cpu: dict[str, dict[str, Any]] = {}
        for p in self.nodes.values():
            if p.where == CPU:
                entry = cpu.setdefault(p.edge_name, {"count": 0, "reason": p.reason})
                entry["count"] += 1
        return {
            "method": self.graph.method,
            "settings": self.settings.to_code(),
            "coreml_ops": dict(sorted(coreml.items())),
            "cpu_ops": dict(sorted(cpu.items())),
            "coreml_node_count": sum(coreml.values()),
            "cpu_node_count": sum(v["count"] for v in cpu.values()),
            "partitions": [
                {
                    "id": part.id,
                    "nodes": len(part.nodes),
                    "inputs": part.inputs,
                    "outputs": part.outputs,
                    "states": part.states,
                }
                for part in self.partitions
            ],
        }

    def describe(self, source: str = "") -> str:
        """The placement as text: partitions with their boundaries, then every CPU op with
        the reason it is there, then the delegated ops."""
        summary = self.summary()
        lines = [
            f"{source or self.graph.source} [{summary['method']}] with {summary['settings']}:",
            f"  Core ML: {summary['coreml_node_count']} nodes in "
            f"{len(summary['partitions'])} partition(s); CPU: {summary['cpu_node_count']} nodes",
        ]
        for part in summary["partitions"]:
            lines.append(
                f"  partition {part['id']}: {part['nodes']} nodes, inputs "
                f"{part['inputs'] or '[]'}, outputs {len(part['outputs'])}, "
                f"states {part['states'] or '[]'}"
            )
        for op, entry in summary["cpu_ops"].items():
            lines.append(f"  cpu  {entry['count']:4d} x {op}: {entry['reason']}")
        for op, count in summary["coreml_ops"].items():
            lines.append(f"  coreml {count:4d} x {op}")
        return "\n".join(lines)


def _override_reason(node: Node, name: str) -> str | None:
    """executorch 1.5.1 ``should_override_support``: refusals regardless of coremltools.
    ExecuTorch's partitioner cites the coremltools issue behind each: add/sub with alpha != 1
    (https://github.com/apple/coremltools/issues/2573), diagonal
    (https://github.com/apple/coremltools/issues/2565), acosh/asinh
    (https://github.com/apple/coremltools/issues/2569)."""
    if node.namespace != "aten":
        return None
    if name in REFUSED_OPS:
        return f"executorch 1.5.1 refuses {name.split('.')[0]} for Core ML"
    if node.op_base in ("argmax", "argmin") and node.arg(1, "dim") is None:
        return f"executorch 1.5.1 refuses {node.op_base} with dim=None"
    if name in ("add.Tensor", "sub.Tensor") and node.kwargs.get("alpha", 1) != 1:
        return f"executorch 1.5.1 refuses {node.op_base} with alpha != 1"
    return None


def edge_name_of(aten_name: str, table: OpTable, kept_whole: bool) -> str:
    if aten_name in EDGE_RENAMES:
        return EDGE_RENAMES[aten_name]
    if "." not in aten_name or "::" in aten_name:
        return aten_name
    if not kept_whole and aten_name in table.view_copy:
        return "aten." + table.view_copy[aten_name]
    return "aten." + aten_name


def predict_placement(
    graph: Graph, settings: PartitionerSettings | None = None, table: OpTable | None = None
) -> Placement:
    """Place every node of a canonical graph on Core ML or the CPU, then partition."""
    settings = settings or PartitionerSettings()
    table = table or load_optable()
    with gc_paused():
        return _predict(graph, settings, table)


def _converter_name(edge: str) -> str:
    """The name coremltools looks a converter up by: a Python operator on sizes
    (``_operator.ge`` of ``nonzero``'s size) by its function's name, ``ge``, as
    ``is_torch_fx_node_supported`` reads ``node.target.__name__``."""
    return edge.removeprefix("_operator.")


def _predict(graph: Graph, settings: PartitionerSettings, table: OpTable) -> Placement:
    converters: dict[str, bool] = {}

    def has_converter(name: str) -> bool:
        known = converters.get(name)
        if known is None:
            known = converters[name] = table.coreml_has_converter(name)
        return known

    skip = set(settings.skip_ops_for_coreml_delegation)
    skip_matches: dict[str, dict[str, list[str]]] = {
        entry: {"aten": [], "edge": []} for entry in settings.skip_ops_for_coreml_delegation
    }
    placements: dict[str, NodePlacement] = {}

    for node in graph.nodes:
        aten_name = node.aten_name
        # 1. ATen stage: ops_to_not_decompose.
        aten_key = aten_name.lower()
        aten_skipped = aten_key in skip
        if aten_skipped:
            skip_matches[aten_key]["aten"].append(node.name)
        aten_supported = (
            not aten_skipped
            and has_converter(aten_name)
            and _override_reason(node, aten_name) is None
        )
        kept_whole = (
            aten_supported and aten_name not in NOT_KEPT_WHOLE and aten_name not in table.view
        )
        decomposed = (
            not kept_whole
            and node.namespace == "aten"
            and (aten_name in table.decomposed_by_default or node.opaque_decomposition)
        )
        edge = (
            node.target if node.namespace != "aten" else edge_name_of(aten_name, table, kept_whole)
        )
        renamed = DECOMPOSES_TO.get(aten_name) if decomposed else None
        if renamed is not None:  # one core op: the partitioner decides on it by its name
            edge, decomposed = edge_name_of(renamed, table, kept_whole=False), False
        if decomposed:
            placements[node.name] = NodePlacement(
                node,
                COREML,
                "decomposed by to_edge; its pieces are delegated",
                aten_name,
                edge,
                decomposed=True,
            )
            continue
        # 2. Edge stage: partition.
        edge_key = edge.lower()
        if edge_key in skip:
            skip_matches[edge_key]["edge"].append(node.name)
            where, reason = CPU, f"skip_ops_for_coreml_delegation has {edge_key!r}"
        elif not has_converter(_converter_name(edge)):
            where, reason = CPU, "coremltools 9.0 has no converter for it"
        elif (why := _override_reason(node, aten_name)) is not None:
            where, reason = CPU, why
        else:
            where, reason = COREML, "supported by coremltools"
        if renamed is not None:
            reason = f"decomposed by to_edge into {renamed.split('.')[0]}; {reason}"
        placements[node.name] = NodePlacement(
            node, where, reason, aten_name, edge, kept_whole, decomposed_into=renamed
        )

    partitions = _partition(graph, placements)
    placement = Placement(graph, settings, placements, partitions, skip_matches)
    _describe_boundaries(placement)
    return placement


def _partition(graph: Graph, placements: dict[str, NodePlacement]) -> list[Partition]:
    """Group Core ML nodes the way torch's CapabilityBasedPartitioner does
    (``partitioning.propose_partitions``); partitions are numbered by their first node."""
    nodes = graph.nodes
    producer = {out: i for i, n in enumerate(nodes) for out in n.outputs}
    users: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        for j in {producer[name] for name in node.tensor_inputs() if name in producer}:
            users[j].append(i)
    supported = [placements[n.name].where == COREML for n in nodes]
    partitions = []
    for pid, members in enumerate(propose_partitions(users, supported, len(graph.inputs))):
        part_nodes = [nodes[i] for i in members]
        for node in part_nodes:
            placements[node.name].partition = pid
        partitions.append(Partition(pid, part_nodes))
    return partitions


def _describe_boundaries(placement: Placement) -> None:
    """Fill each partition's inputs, owned constants, states and outputs (each in node
    order, then argument order), in one pass over the nodes."""
    graph, settings = placement.graph, placement.settings
    kinds = {spec.name: spec.kind for spec in graph.inputs}
    mutated_buffers = _mutated_buffer_inputs(graph)
    owner: dict[str, int | None] = {}  # value -> partition of the node that makes it
    leaves: set[str] = set()  # values read outside the partition that makes them
    seen: set[tuple[int, str]] = set()
    for node in graph.nodes:
        pid = placement.nodes[node.name].partition
        for name in node.tensor_inputs():
            made_in = owner.get(name, -1)
            if made_in == pid:
                continue
            if made_in is not None and made_in >= 0:
                leaves.add(name)
            if pid is None or (pid, name) in seen:
                continue
            seen.add((pid, name))
            part = placement.partitions[pid]
            if name in mutated_buffers and settings.take_over_mutable_buffer:
                part.states.append(name)
            elif kinds.get(name) in ("parameter", "buffer", "constant") and (
                name not in mutated_buffers
            ):
                (part.constants if settings.take_over_constant_data else part.inputs).append(name)
            else:
                part.inputs.append(name)
        for out in node.outputs:
            owner[out] = pid
    leaves.update(o.name for o in graph.outputs if o.name)
    for part in placement.partitions:
        part.outputs.extend(out for node in part.nodes for out in node.outputs if out in leaves)


def _mutated_buffer_inputs(graph: Graph) -> set[str]:
    """Buffer placeholders that the program writes back (BUFFER_MUTATION outputs)."""
    targets = {o.target for o in graph.outputs if o.kind == "buffer_mutation"}
    return {s.name for s in graph.inputs if s.kind == "buffer" and s.target in targets}


def mutated_buffers(graph: Graph) -> dict[str, str]:
    """Mutated buffer placeholder -> the value written back to it."""
    by_target = {o.target: o.name for o in graph.outputs if o.kind == "buffer_mutation"}
    return {
        s.name: by_target[s.target]
        for s in graph.inputs
        if s.kind == "buffer" and s.target in by_target and by_target[s.target]
    }

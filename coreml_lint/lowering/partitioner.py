"""A thin subclass of the stock ``CoreMLPartitioner`` that refuses what would break.

The stock partitioner decides by op name only (pitfalls.md G4). This one adds node-level
refusals, decided from each node's tensor metadata so the same test works on the ATen graph
(``ops_to_not_decompose``) and on the edge graph (``partition``) — a refusal must hold in
both, or an op is kept whole and then left on the CPU without a kernel (G1). It also hands
back to ExecuTorch the mutable buffers Core ML state cannot hold correctly.
Everything else is the stock partitioner's own code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.backends.apple.coreml.partition.coreml_partitioner import (
    CoreMLPartitioner,
    _OperatorsSupportedForCoreMLBackend,
)
from executorch.exir.backend.partitioner import PartitionResult
from executorch.exir.backend.utils import tag_constant_data, tag_mutated_buffer
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner


@dataclass
class Refusals:
    """Why nodes must stay on the CPU; each predicate reads a node's tensor metadata."""

    predicates: dict[str, Callable[[torch.fx.Node], bool]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # node name -> reason (edge graph)
    recording: bool = False  # only partition() records: the edge graph is the final one

    def reason(self, node: torch.fx.Node) -> str | None:
        for why, predicate in self.predicates.items():
            try:
                if predicate(node):
                    return why
            except Exception:  # a node without metadata is not ours to refuse
                continue
        return None


def tensors_of(node: torch.fx.Node) -> list[torch.Tensor]:
    """The fake tensors a node reads and makes."""
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.all_input_nodes]
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, (list, tuple)) else [value])
    return [v for v in flat if isinstance(v, torch.Tensor)]


class _Support(_OperatorsSupportedForCoreMLBackend):
    def __init__(self, refusals: Refusals, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusals = refusals

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if not super().is_node_supported(submodules, node):
            return False
        if node.op != "call_function":
            return True
        why = self.refusals.reason(node)
        if why is not None:
            if self.refusals.recording:
                self.refusals.refused[node.name] = why
            return False
        return True


class SafeCoreMLPartitioner(CoreMLPartitioner):
    """``CoreMLPartitioner`` plus node refusals and per-buffer state hand-back."""

    def __init__(
        self,
        *,
        refusals: Refusals | None = None,
        return_buffers: Callable[[torch.fx.Node, Any], str | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.refusals = refusals or Refusals()
        self.return_buffers = return_buffers
        self.returned_buffers: dict[str, str] = {}

    def _support(self) -> _Support:
        return _Support(
            self.refusals, self.skip_ops_for_coreml_delegation, self.lower_full_graph, log=False
        )

    def partition(self, exported_program: Any) -> PartitionResult:
        """The stock ``partition`` with our support test, then buffer hand-back."""
        partition_tags = {}
        proposer = CapabilityBasedPartitioner(
            exported_program.graph_module, self._support(), allows_single_node_partition=True
        )
        self.refusals.recording = True
        try:
            proposed = proposer.propose_partitions()
        finally:
            self.refusals.recording = False
        for partition in proposed:
            for node in partition.nodes:
                tag = f"tag{partition.id}"
                node.meta["delegation_tag"] = tag
                partition_tags[tag] = self.delegation_spec
        if self.take_over_constant_data:
            tag_constant_data(exported_program)
        if self.take_over_mutable_buffer:
            tag_mutated_buffer(exported_program)
            self._return_buffers(exported_program)
        return PartitionResult(
            tagged_exported_program=exported_program, partition_tags=partition_tags
        )

    def _return_buffers(self, program: Any) -> None:
        """Untag the mutable buffers Core ML state must not own (CPU readers, integers)."""
        if self.return_buffers is None:
            return
        for node in program.graph.nodes:
            if node.op != "placeholder" or "delegation_tag" not in node.meta:
                continue
            why = self.return_buffers(node, program)
            if why is not None:
                del node.meta["delegation_tag"]
                self.returned_buffers[node.name] = why

    def ops_to_not_decompose(self, ep: Any) -> tuple[list[Any], Any]:
        """The stock list, less every op type a refused node or an edge-spelled skip entry
        would leave on the CPU: those must be decomposed, not kept whole (G1)."""
        keep, check = super().ops_to_not_decompose(ep)
        dropped = set()
        skip = {s.lower() for s in self.skip_ops_for_coreml_delegation}
        for node in ep.graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", "").lower()
            edge_name = ("aten." + name) if "::" not in name else name
            if self.refusals.reason(node) is not None or edge_name in skip:
                dropped.add(node.target)
        return [op for op in keep if op not in dropped], check

"""A thin subclass of the stock ``CoreMLPartitioner`` that applies the rules' answers.

The stock partitioner decides by op name only. This one asks the rules that fired, through
their lowering hooks (``rulekit/rule.py``): a node a rule refuses stays on the CPU, in the
ATen graph (``ops_to_not_decompose``: the op is decomposed rather than kept whole and then
stranded without a kernel) and in the edge graph (``partition``); a mutable buffer a rule
hands back stays with ExecuTorch instead of becoming Core ML state. Everything else is the
stock partitioner's own code path.
"""

from __future__ import annotations

from collections import defaultdict
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
from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules


class RuleHookError(Exception):
    """A rule's lowering hook raised: named, with the node, so ``lower`` fails here (a bug in
    the rule) rather than later and elsewhere with the node wrongly placed."""

    def __init__(self, code: str, hook: str, node: str, error: BaseException) -> None:
        detail = " ".join(f"{type(error).__name__}: {error}".split())[:200]
        super().__init__(f"internal error in {code}'s {hook} hook on node {node}: {detail}")


@dataclass
class LoweringPlan:
    """The answers of the rules that fired on the program to lower, and what each did."""

    rules: list[Rule]
    settings: PartitionerSettings  # the user's, as the rules adjusted them
    refused: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> (code, why)
    decomposed: dict[str, str] = field(default_factory=dict)  # node -> code that decomposed it
    returned_buffers: dict[str, tuple[str, str]] = field(default_factory=dict)
    acted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    recording: bool = False  # only partition() records: the edge graph is the final one
    dequantize_on_cpu: bool = False  # the user chose to dequantize weights on the CPU

    @property
    def kept_off_coreml(self) -> set[str]:
        """Codes whose answer moved work off Core ML (a node refused, a buffer returned)."""
        return {code for code, _ in [*self.refused.values(), *self.returned_buffers.values()]}

    @classmethod
    def for_rules(
        cls, rules: list[Rule], settings: PartitionerSettings, *, dequantize_on_cpu: bool = False
    ) -> LoweringPlan:
        plan = cls(rules, settings, dequantize_on_cpu=dequantize_on_cpu)
        for rule in rules:
            adjusted = rule.adjust_settings(plan.settings)
            if adjusted != plan.settings:
                for key, value in adjusted.differences(plan.settings).items():
                    plan.act(rule.code, f"setting {key}={value}")
                plan.settings = adjusted
        return plan

    def act(self, code: str, what: str) -> None:
        """Record that ``code``'s hook did ``what`` (once: the partitioner asks again)."""
        if what not in self.acted[code]:
            self.acted[code].append(what)

    def refusal(self, node: torch.fx.Node) -> str | None:
        """Why ``node`` stays on the CPU (``CODE: reason`` of the first rule that refuses it,
        or dequantizes it there when the user chose that); every rule that would refuse it is
        recorded as having acted."""
        reasons = []
        for rule in self.rules:
            try:
                why = rule.refuse(node, self.settings)
                if why is None and self.dequantize_on_cpu:
                    why = rule.dequantize_on_cpu(node, self.settings)
            except Exception as exc:  # a silent skip would strand the node far from here
                raise RuleHookError(rule.code, "refuse", node.name, exc) from exc
            if why is not None:
                reasons.append((rule.code, why))
        if not reasons and (origin := self._decomposed_into_itself(node)) is not None:
            code = self.decomposed[origin]
            reasons.append((code, f"{origin}, which {code} had decomposed, as another overload"))
        if not reasons:
            return None
        if self.recording:
            self.refused.setdefault(node.name, reasons[0])
            for code, why in reasons:
                self.act(code, f"{node.name} kept on the CPU ({why})")
        return "{}: {}".format(*reasons[0])

    def _decomposed_into_itself(self, node: torch.fx.Node) -> str | None:
        """The node a rule had decomposed that this one was made from, where the
        decomposition is another overload of the same op (``_upsample_bilinear2d_aa.vec``
        becomes ``.default``): Core ML converts it as it did the node, so it stays on the
        CPU, the answer the rule wanted. None otherwise."""
        if not self.decomposed or node.op != "call_function":
            return None
        mine = _op_base(getattr(node.target, "__name__", str(node.target)))
        sources = list(node.meta.get("from_node") or [])
        while sources:
            source = sources.pop()
            if source.name in self.decomposed and _op_base(str(source.target)) == mine:
                return source.name
            sources.extend(source.from_node or [])
        return None

    def buffer_to_return(self, node: torch.fx.Node, program: Any) -> str | None:
        for rule in self.rules:
            why = rule.return_buffer(node, program, self.settings)
            if why is not None:
                self.returned_buffers[node.name] = (rule.code, why)
                self.act(rule.code, f"buffer {node.name} kept by ExecuTorch ({why})")
                return why
        return None

    def must_decompose(self, node: torch.fx.Node) -> bool:
        for rule in self.rules:
            if rule.must_decompose(node, self.settings):
                self.act(rule.code, f"{node.target} decomposed instead of kept whole")
                self.decomposed.setdefault(node.name, rule.code)
                return True
        return False


def _op_base(name: str) -> str:
    """``aten._upsample_bilinear2d_aa.vec`` -> ``aten._upsample_bilinear2d_aa``."""
    return name.rsplit(".", 1)[0] if name.count(".") >= 2 else name


class _Support(_OperatorsSupportedForCoreMLBackend):
    def __init__(self, plan: LoweringPlan, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan = plan

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if not super().is_node_supported(submodules, node):
            return False
        return node.op != "call_function" or self.plan.refusal(node) is None


class SafeCoreMLPartitioner(CoreMLPartitioner):
    """``CoreMLPartitioner`` plus the rules' node refusals and per-buffer state hand-back."""

    def __init__(self, plan: LoweringPlan, **kwargs: Any) -> None:
        super().__init__(**plan.settings.partitioner_kwargs(), **kwargs)
        self.plan = plan

    def partition(self, exported_program: Any) -> PartitionResult:
        """The stock ``partition`` with our support test, then buffer hand-back."""
        partition_tags = {}
        support = _Support(
            self.plan, self.skip_ops_for_coreml_delegation, self.lower_full_graph, log=False
        )
        proposer = CapabilityBasedPartitioner(
            exported_program.graph_module, support, allows_single_node_partition=True
        )
        self.plan.recording = True
        try:
            proposed = proposer.propose_partitions()
        finally:
            self.plan.recording = False
        for partition in proposed:
            if self._refused_whole(partition, exported_program):
                continue
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

    def _refused_whole(self, partition: Any, program: Any) -> bool:
        """Whether a rule keeps a proposed partition on the CPU as a whole
        (``Rule.refuse_partition``, asked of every rule: another rule's refusal can leave
        such a partition behind); its nodes are recorded as that rule's answer."""
        nodes = [n for n in partition.nodes if n.op == "call_function"]
        for rule in all_rules():
            try:
                why = rule().refuse_partition(nodes, program, self.plan.settings)
            except Exception as exc:  # a silent skip would strand the partition
                raise RuleHookError(rule.code, "refuse_partition", nodes[0].name, exc) from exc
            if why is not None:
                for node in nodes:
                    self.plan.refused.setdefault(node.name, (rule.code, why))
                    self.plan.act(rule.code, f"{node.name} kept on the CPU ({why})")
                return True
        return False

    def _return_buffers(self, program: Any) -> None:
        """Untag the mutable buffers Core ML state must not own. ExecuTorch then writes
        them with an in-place copy, which a value that requires grad refuses, so the
        returned buffer's recorded value stops requiring grad (nothing it computes
        changes)."""
        for node in program.graph.nodes:
            if node.op != "placeholder" or "delegation_tag" not in node.meta:
                continue
            if self.plan.buffer_to_return(node, program) is not None:
                del node.meta["delegation_tag"]
                value = node.meta.get("val")
                if isinstance(value, torch.Tensor) and value.requires_grad:
                    node.meta["val"] = value.detach()

    def bridge_pass(self) -> BridgePass:
        """The pass ``to_edge_transform_and_lower`` runs on the edge program before this
        partitioner sees it: the rules' ``bridge_partitions`` edits, judged by this
        partitioner's own support test."""
        return BridgePass(self)

    def ops_to_not_decompose(self, ep: Any) -> tuple[list[Any], Any]:
        """The stock list, less every op type a refused node, or a node a rule wants
        decomposed, would otherwise leave kept whole on the CPU."""
        keep, check = super().ops_to_not_decompose(ep)
        dropped = set()
        for node in ep.graph.nodes:
            if node.op != "call_function":
                continue
            if self.plan.refusal(node) is not None or self.plan.must_decompose(node):
                dropped.add(node.target)
        return [op for op in keep if op not in dropped], check


class BridgePass(ExportedProgramPassBase):
    """Asks every rule's ``bridge_partitions`` to edit the edge program where values cross
    into what ``partitioner`` will delegate. A partitioner may not change the graph
    (``to_backend`` checks it), so this runs as a transform pass just before it."""

    def __init__(self, partitioner: SafeCoreMLPartitioner) -> None:
        self.partitioner = partitioner

    def call(self, exported_program: Any) -> ExportedProgramPassResult:
        plan = self.partitioner.plan
        modified = False
        partition_of = self._partitions(exported_program)
        for rule in all_rules():
            answer = next((r for r in plan.rules if r.code == rule.code), None) or rule()
            try:
                done = answer.bridge_partitions(exported_program, partition_of, plan.settings)
            except Exception as exc:  # a half-edited graph would fail far from here
                raise RuleHookError(rule.code, "bridge_partitions", "(all)", exc) from exc
            for what in done:
                plan.act(rule.code, what)
            if done:
                if answer not in plan.rules:
                    plan.rules.append(answer)  # its other hooks (refuse) finish the answer
                partition_of = self._partitions(exported_program)  # the graph changed
            modified = modified or bool(done)
        if modified:
            exported_program.graph_module.recompile()
        return ExportedProgramPassResult(exported_program, modified)

    def _partitions(self, program: Any) -> Callable[[torch.fx.Node], int | None]:
        """The partition the partitioner will put each node in (None: the CPU), proposed
        exactly as :meth:`SafeCoreMLPartitioner.partition` proposes them."""
        support = _Support(
            self.partitioner.plan,
            self.partitioner.skip_ops_for_coreml_delegation,
            self.partitioner.lower_full_graph,
            log=False,
        )
        proposer = CapabilityBasedPartitioner(
            program.graph_module, support, allows_single_node_partition=True
        )
        where = {n: p.id for p in proposer.propose_partitions() for n in p.nodes}
        return where.get

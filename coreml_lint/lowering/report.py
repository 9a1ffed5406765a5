"""What ``coreml-lint lower`` did, in words a user can check: per rule, what its answer did
to the model, what moved to the CPU and why, and what the delegates hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings


@dataclass
class Delegation:
    """The lowered program's placement: delegates, the edge ops inside them, CPU ops."""

    delegates: int = 0
    coreml_ops: int = 0
    cpu_ops: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, edge_program: Any) -> Delegation:
        placed = cls()
        for node in edge_program.graph.nodes:
            if node.op != "call_function" or "getitem" in str(node.target):
                continue
            if "executorch_call_delegate" in str(node.target):
                placed.delegates += 1
                lowered = getattr(edge_program.graph_module, node.args[0].target)
                placed.coreml_ops += sum(
                    1 for n in lowered.original_module.graph.nodes if n.op == "call_function"
                )
            else:
                placed.cpu_ops.append(getattr(node.target, "__name__", str(node.target)))
        return placed


class RewriteLog:
    """What ``_rewrite_until_stable`` records on a lowering report, Core ML's or Core AI's:
    each rule's rewrites (and whether eager checked them), those eager rejected, and the
    codes in the order applied. The reports declare the four fields themselves."""

    rewrites: list[str]
    rejected_rewrites: list[str]
    rewritten_codes: list[str]
    acted: dict[str, list[str]]

    def rewritten(self, code: str, changes: list[str], *, checked: bool) -> None:
        note = "" if checked else " (not checked in eager: no concrete inputs)"
        self.rewrites.extend(f"{code}: {change}{note}" for change in changes)
        if code not in self.rewritten_codes:
            self.rewritten_codes.append(code)
        self.acted.setdefault(code, []).extend(changes)

    def reject(self, code: str, why: str) -> None:
        self.rejected_rewrites.append(f"{code}: rewrite {why}")


@dataclass
class LowerReport(RewriteLog):
    findings_before: list[Finding]
    settings: PartitionerSettings  # what the user asked for
    findings_after: list[Finding] = field(default_factory=list)  # errors lower did not answer
    rewrites: list[str] = field(default_factory=list)  # "CODE: node: what was done"
    rejected_rewrites: list[str] = field(default_factory=list)
    rewritten_codes: list[str] = field(default_factory=list)  # in the order applied
    # Rewrites undone because the result with them did not verify: which, and why.
    dropped_rewrites: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # node -> "CODE: reason" (CPU)
    returned_buffers: dict[str, str] = field(default_factory=dict)
    settings_used: dict[str, Any] = field(default_factory=dict)  # what the rules changed
    acted: dict[str, list[str]] = field(default_factory=dict)  # rule code -> what its hooks did
    partitions_before: int = 0  # the stock partitioner's, as the linter predicts them
    placement: Delegation = field(default_factory=Delegation)
    mil_problems: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    verify: Any = None  # a VerifyReport when lower ran with verify=True
    # Nodes the lowering itself showed must stay on the CPU (``relower.py``'s ``Move``s):
    # the converter crashed on them, or verify located a divergence at them.
    moved: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls, first: Any, settings: PartitionerSettings) -> LowerReport:
        return cls(first.findings, settings, partitions_before=len(first.placement.partitions))

    def record_moves(self, moves: list[Any]) -> None:
        """The nodes the lowering itself kept on the CPU: a crash or wrong values found on
        them is answered (they do not reach Core ML), though the rule's hook did not act (a
        crash of the pieces torch decomposed the node into, which the rule could not key).
        A finding standing for several nodes of one line is answered only when all moved."""
        self.moved = moves
        gone = {move.node for move in moves}

        def answered(finding: Finding) -> bool:
            nodes = {f.node for f in (finding, *finding.merged)}
            return finding.outcome in (Outcome.CRASH, Outcome.SILENT) and nodes <= gone

        self.findings_after = [f for f in self.findings_after if not answered(f)]

    def finish(self, second: Any, plan: Any, placement: Delegation, problems: list[str]) -> None:
        self.refused = {node: f"{code}: {why}" for node, (code, why) in plan.refused.items()}
        self.returned_buffers = {
            name: f"{code}: {why}" for name, (code, why) in plan.returned_buffers.items()
        }
        self.settings_used = plan.settings.differences(self.settings)
        for code, actions in plan.acted.items():
            self.acted.setdefault(code, []).extend(actions)
        self.placement = placement
        self.mil_problems = problems
        errors = [f for f in second.findings if f.severity is Severity.ERROR]
        self.findings_after = [f for f in errors if f.code not in plan.acted]
        # Where lower kept work off Core ML, the source change that would keep it there.
        kept_off = plan.kept_off_coreml
        self.suggestions = sorted({f"{f.code}: {f.fix}" for f in errors if f.code in kept_off})

    @property
    def partitions_after(self) -> int:
        return self.placement.delegates

    @property
    def coreml_ops_after(self) -> int:
        return self.placement.coreml_ops

    @property
    def cpu_ops_after(self) -> list[str]:
        return self.placement.cpu_ops

    def to_json(self) -> dict[str, Any]:
        return {
            "findings_before": [f.to_json() for f in self.findings_before],
            "findings_after": [f.to_json() for f in self.findings_after],
            "settings": self.settings.to_json(),
            "settings_changed": self.settings_used,
            "rewrites": self.rewrites,
            "rejected_rewrites": self.rejected_rewrites,
            "dropped_rewrites": self.dropped_rewrites,
            "refused": self.refused,
            "returned_buffers": self.returned_buffers,
            "acted": self.acted,
            "partitions_predicted_for_stock": self.partitions_before,
            "delegates": self.placement.delegates,
            "coreml_edge_ops": self.placement.coreml_ops,
            "cpu_ops": self.placement.cpu_ops,
            "mil_problems": self.mil_problems,
            "suggestions": self.suggestions,
            "moved_to_cpu": [move.to_json() for move in self.moved],
            "verify": self.verify.to_json() if self.verify is not None else None,
        }

    def render(self, output: str) -> str:
        lines = [f"wrote {output}"]
        cpu = len(self.placement.cpu_ops)
        lines.append(
            f"  Core ML: {self.placement.delegates} delegate(s) holding "
            f"{self.placement.coreml_ops} edge op(s); CPU: {cpu} op(s)"
        )
        if not self.acted:
            lines.append(
                "  no rule needed an answer: the stock partitioner's placement "
                f"({self.partitions_before} partition(s) predicted)"
            )
        for code, actions in sorted(self.acted.items()):
            lines.extend(f"  {code}  {action}" for action in actions)
        lines.extend(f"  rejected   {change}" for change in self.rejected_rewrites)
        lines.extend(f"  dropped    {change}" for change in self.dropped_rewrites)
        lines.extend(f"  moved      {move.describe()}" for move in self.moved)
        if self.placement.cpu_ops:
            lines.append(f"  CPU ops: {', '.join(sorted(set(self.placement.cpu_ops)))}")
        lines.extend(f"  MIL PROBLEM {problem}" for problem in self.mil_problems)
        for finding in self.findings_after:
            lines.append(f"  unresolved {finding.code}: {finding.message}")
        for finding in self.findings_before:  # e.g. weights that lower but lose quantization
            if finding.severity is Severity.WARNING and finding.code not in self.acted:
                lines.append(f"  warning {finding.code}: {finding.message}")
        if self.suggestions:
            lines.append("  to keep these on Core ML instead, change the model source:")
            lines.extend(f"    {s}" for s in self.suggestions)
        if self.verify is not None:
            lines.extend("  " + line for line in self.verify.summary().splitlines())
        return "\n".join(lines)

"""What ``verify`` found: per-partition results of both passes, the divergences, the ops
that could not be verified, and where the time went. Plain data (no torch), JSON-ready.

Exit semantics (for the CLI): 0 every partition agrees in both passes; 1 a divergence or a
lowering crash; 2 could not run (an op the interpreter does not know, an execution error,
inputs that could not be built), when nothing diverged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

AGREE = "agree"
DIVERGE = "diverge"
NOT_VERIFIED = "not_verified"
ERROR = "error"
SKIPPED = "skipped"


@dataclass
class Divergence:
    """One value (a partition output or state) that Core ML computes differently from eager."""

    partition: int
    check: str  # "semantic" | "float16"
    kind: str  # values | nan | inf | integer | shape | dtype | output-is-input | duplicate-output
    output: str  # which output / state, e.g. "output 0 (aten_add_tensor)" or "state count"
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)
    mil_op: str | None = None  # first MIL op whose value departs from eager (type)
    mil_var: str | None = None
    node: str | None = None  # the edge graph node it maps to
    target: str | None = None  # that node's op
    source: str | None = None  # model source "file:line" from the node's stack trace
    code: str | None = None  # the source line
    rule: str | None = None  # a lint rule that explains the node (the ``explain`` hook)

    def summary(self) -> str:
        where = f" at {self.node}" if self.node else ""
        src = f" ({self.source})" if self.source else ""
        rule = f"; explained by {self.rule}" if self.rule else "; no rule explains it"
        return (
            f"partition {self.partition} [{self.check}] {self.output}: {self.message}"
            f"{where}{src}{rule}"
        )


@dataclass
class PassResult:
    status: str = SKIPPED  # agree | diverge | not_verified | error | skipped
    message: str = ""
    not_verified_ops: list[str] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> numbers
    mil_ops: int = 0
    op_types: list[str] = field(default_factory=list)  # the MIL op types executed
    seconds: float = 0.0


@dataclass
class PartitionResult:
    index: int
    name: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    interface: PassResult = field(default_factory=PassResult)  # what ExecuTorch gets back
    semantic: PassResult = field(default_factory=PassResult)
    float16: PassResult = field(default_factory=PassResult)

    @property
    def status(self) -> str:
        statuses = {self.interface.status, self.semantic.status, self.float16.status}
        for status in (DIVERGE, ERROR, NOT_VERIFIED, SKIPPED):
            if status in statuses:
                return status
        return AGREE


@dataclass
class VerifyReport:
    status: str = AGREE  # agree | diverge | lowering_crash | could_not_run
    partitions: list[PartitionResult] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    not_verified: list[str] = field(default_factory=list)  # "op X" / reasons
    lowering_error: str | None = None
    lowering_stage: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)  # how each input was made
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.status in ("diverge", "lowering_crash"):
            return 1
        return 0 if self.status == AGREE else 2

    def finish(self) -> VerifyReport:
        """Set ``status`` from the parts."""
        if self.lowering_error is not None:
            self.status = "lowering_crash"
        elif self.divergences or any(p.status == DIVERGE for p in self.partitions):
            self.status = DIVERGE
        elif self.not_verified or any(p.status != AGREE for p in self.partitions):
            self.status = "could_not_run"
        else:
            self.status = AGREE
        return self

    def summary(self) -> str:
        lines = [f"verify: {self.status} ({len(self.partitions)} Core ML partition(s))"]
        if self.inputs:
            lines.append(f"  inputs: {', '.join(self.inputs)}")
        lines += [f"  {d.summary()}" for d in self.divergences]
        lines += [f"  not verified: {item}" for item in self.not_verified]
        lines += [f"  note: {note}" for note in self.notes]
        if self.lowering_error:
            lines.append(f"  lowering crashed in {self.lowering_stage}: {self.lowering_error}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        for part, result in zip(data["partitions"], self.partitions, strict=True):
            part["status"] = result.status
        return data

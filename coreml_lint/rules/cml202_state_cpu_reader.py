"""CML202 state-cpu-reader: Core ML state that a CPU op also reads.

What it does
    At iOS18+ with ``take_over_mutable_buffer=True``, flags a mutable buffer that becomes
    Core ML state while a CPU op reads the buffer, or reads the value written into it.

Why it breaks
    ``tag_mutated_buffer`` gives the buffer to the delegate even though a node outside the
    partition reads it. ExecuTorch then erases the node that carried the update
    (``RuntimeError: Tried to erase Node getitem but it still had 1 users in the graph``),
    or the partition is left with the state update as its only output
    (``ValueError: Cannot lower a model with no outputs in CoreML.``).

Example
    ``self.count.add_(1); return torch.sin(x) * self.count`` with the ``mul`` kept on the CPU.

Fix
    (a) ``take_over_mutable_buffer=False``; (b) have the CPU op read a copy made inside Core
    ML (``self.count + 0.0``); (c) a partitioner that leaves only such buffers to ExecuTorch.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules._state import mutable_buffers


class StateCpuReader(Rule):
    code = "CML202"
    name = "state-cpu-reader"
    outcome = Outcome.CRASH
    summary = "Core ML state buffer also read on the CPU: lowering fails"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        settings = ctx.settings
        if not settings.take_over_mutable_buffer or settings.minimum_deployment_target < 18:
            return
        for buf in mutable_buffers(ctx):
            if not buf.becomes_state or not buf.cpu_readers:
                continue
            reader = buf.cpu_readers[0]
            yield ctx.finding(
                reader,
                f"buffer '{buf.target}' becomes Core ML state but {ctx.edge_name(reader)} "
                "reads it on the CPU: lowering fails with `RuntimeError: Tried to erase Node "
                "getitem but it still had 1 users` or `ValueError: Cannot lower a model with "
                "no outputs in CoreML.`",
                fix=f"let the CPU op read a copy made in Core ML (`self.{buf.target} + 0`), "
                "or set take_over_mutable_buffer=False",
                partitioner={"take_over_mutable_buffer": False},
                buffer=buf.target,
            )

    def return_buffer(self, node: Any, program: Any, settings: PartitionerSettings) -> str | None:
        from coreml_lint.rulekit.fx import mutable_buffer_readers

        readers = mutable_buffer_readers(node, program)
        tag = node.meta.get("delegation_tag")
        if readers is not None and any(
            u.op != "output" and u.meta.get("delegation_tag") != tag for u in readers
        ):
            return "read outside its Core ML partition"
        return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case(
    "state-cpu-reader-ios18",
    expect={"CML202"},
    settings={"ios": 18, "skip": ["aten.mul.tensor"]},
    crash=r"Tried to erase Node|no outputs",
)
def _():
    def forward(s, x):
        s.count.add_(1)
        return torch.sin(x) * s.count

    return module(forward, count=torch.zeros(1, 4)), (torch.randn(1, 4),)


@case(
    "state-cpu-reader-copy-ios18",
    expect=set(),
    settings={"ios": 18, "skip": ["aten.mul.tensor"]},
)
def _():
    def forward(s, x):
        s.count.add_(1)
        return torch.sin(x) * (s.count + 0.0)

    return module(forward, count=torch.zeros(1, 4)), (torch.randn(1, 4),)

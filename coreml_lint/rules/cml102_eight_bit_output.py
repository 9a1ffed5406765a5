"""CML102 eight-bit-partition-output: a Core ML partition returns an int8 tensor.

What it does
    Flags an int8 tensor made inside a Core ML partition that leaves it (a program output
    or a value read on the CPU).

Why it breaks
    It lowers: coremltools ends the Core ML model with a cast to int32 (at iOS17+ it casts
    to int8 first and logs ``A dtype of int8 will only work with a minimum_deployment_target
    iOS26``). At run time ExecuTorch's Core ML runtime copies each delegate output into the
    program's tensor, converting the dtype element by element, but its table of tensor
    types has no int8 (``coreml_backend_delegate.mm``, ``get_data_type``): running the
    delegate fails with ``Failed to create multiarray from output``. A uint8 output is in
    that table and comes back converted (values 0-255 exact), so it is not flagged.

Example
    ``return (x * 10).to(torch.int8)``

Fix
    (a) return float32/int32 and cast after the program; (b) keep the final cast on the CPU:
    ``skip_ops_for_coreml_delegation=["dim_order_ops._to_dim_order_copy.default"]``;
    (c) ``coreml-lint lower`` keeps the nodes that touch it on the CPU.

References
    - https://github.com/pytorch/executorch/issues/11686
      CoreML partitioner errors out with 8-bit integer types (open)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule


class EightBitPartitionOutput(Rule):
    code = "CML102"
    name = "eight-bit-partition-output"
    outcome = Outcome.LOAD_FAILURE
    summary = "Core ML partition returns int8: the Core ML runtime has no int8 tensor type"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for part in ctx.placement.partitions:
            for value in part.outputs:
                dtype = ctx.dtype(value)
                producer = ctx.producers.get(value)
                if dtype != "int8" or producer is None:
                    continue
                yield ctx.finding(
                    producer,
                    f"Core ML partition {part.id} returns int8 tensor '{value}': it lowers, "
                    "but ExecuTorch's Core ML runtime has no int8 tensor type, so running the "
                    "delegate fails with `Failed to create multiarray from output`",
                    fix="return float32/int32 from the model and convert to int8 after it",
                    partitioner=ctx.skip_advice(producer),
                    value=value,
                    dtype=dtype,
                )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        import torch

        from coreml_lint.rulekit.fx import touches

        return "touches an int8 tensor" if touches(node, {torch.int8}) else None

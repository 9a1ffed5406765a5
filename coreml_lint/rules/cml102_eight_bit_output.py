"""CML102 eight-bit-partition-output: a Core ML partition returns a uint8/int8 tensor.

What it does
    Flags an 8-bit tensor made inside a Core ML partition that leaves it (a program output
    or a value read on the CPU).

Why it breaks
    It lowers, but coremltools' output handling ends the Core ML model with a cast to
    int32, so the delegate returns int32 where the ExecuTorch program declares int8/uint8
   . At iOS17+ the MIL even casts to int8 first and logs
    ``A dtype of int8 will only work with a minimum_deployment_target iOS26``.

Example
    ``return (x * 10).to(torch.int8)``

Fix
    (a) return float32/int32 and cast after the program; (b) keep the final cast on the CPU:
    ``skip_ops_for_coreml_delegation=["dim_order_ops._to_dim_order_copy.default"]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.program.graph import EIGHT_BIT_DTYPES
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule


class EightBitPartitionOutput(Rule):
    code = "CML102"
    name = "eight-bit-partition-output"
    outcome = Outcome.SILENT
    summary = "Core ML partition returns uint8/int8: the delegate gives int32 instead"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for part in ctx.placement.partitions:
            for value in part.outputs:
                dtype = ctx.dtype(value)
                producer = ctx.producers.get(value)
                if dtype not in EIGHT_BIT_DTYPES or producer is None:
                    continue
                yield ctx.finding(
                    producer,
                    f"Core ML partition {part.id} returns {dtype} tensor '{value}': the "
                    f"Core ML model ends with a cast to int32, so the program gets int32 "
                    f"where it declares {dtype}",
                    fix="return float32/int32 from the model and convert to 8 bits after it",
                    partitioner=ctx.skip_advice(producer),
                    value=value,
                    dtype=dtype,
                )

    def refuse(self, node: Any) -> str | None:
        from coreml_lint.rulekit.fx import EIGHT_BIT, touches

        return "touches a uint8/int8 tensor" if touches(node, EIGHT_BIT) else None

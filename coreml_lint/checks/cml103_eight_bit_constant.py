"""CML103 eight-bit-constant: a uint8/int8 buffer or parameter is a Core ML constant below iOS17.

What it does
    Flags an 8-bit parameter, buffer or lifted constant that a Core ML partition owns
    (``take_over_constant_data=True``, the default) when the deployment target is below
    iOS17.

Why it breaks
    The constant reaches MIL as a uint8 numpy array; the ``cast`` and ``slice_by_index`` ops
    of the iOS15/iOS16 opsets accept only fp16, fp32, int32 and bool, so lowering stops with
    ``ValueError: Op ... Input x="b_mask" expects tensor or scalar of dtype from type domain
    ['fp16', 'fp32', 'int32', 'bool'] but got tensor[1,8,uint8]`` (pitfalls.md §2). With
    ``take_over_constant_data=False`` it becomes a partition input instead (CML101).

    Weight-only int8 quantization (``dequantize_per_channel`` of an int8 weight) fails the
    same way below iOS17: ``NotImplementedError: Parameter dtype of the cast operation can
    be one of the ['fp16', 'fp32', 'int32', 'bool']. Provided int8``.

Example
    ``self.register_buffer("mask", torch.tensor([...], dtype=torch.uint8))`` then
    ``x * self.mask.float()``.

Fix
    (a) store the buffer as int32 or float32 (float16 too with the default options);
    (b) minimum deployment target iOS17 or later; (c) widen the buffer in ``ep.state_dict``
    and drop the ``_assert_tensor_metadata`` guards.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome
from coreml_lint.program.graph import EIGHT_BIT_DTYPES


class EightBitConstant(Rule):
    code = "CML103"
    name = "eight-bit-constant"
    outcome = Outcome.CRASH
    summary = "uint8/int8 buffer owned by a Core ML partition below iOS17: MIL type error"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 17:
            return
        for part in ctx.placement.partitions:
            for value in part.constants:
                dtype = ctx.dtype(value)
                if dtype not in EIGHT_BIT_DTYPES:
                    continue
                readers = [u for u in ctx.users.get(value, []) if u in part.nodes]
                if not readers:
                    continue
                spec = next(s for s in ctx.graph.inputs if s.name == value)
                yield ctx.finding(
                    readers[0],
                    f"{dtype} {spec.kind} '{spec.target or value}' becomes a constant of Core ML "
                    f"partition {part.id}; below iOS17 MIL has no 8-bit type for it, so "
                    f"{ctx.edge_name(readers[0])} fails with `ValueError: Op ... expects tensor or "
                    "scalar of dtype from type domain ['fp16', 'fp32', 'int32', 'bool'] but got "
                    f"tensor[...,{dtype}]` (or, for a dequantize, `NotImplementedError: Parameter "
                    "dtype of the cast operation can be one of ['fp16', 'fp32', 'int32', "
                    f"'bool']. Provided {dtype}`)",
                    fix=f"store '{spec.target or value}' as int32 or float32 (or float16)",
                    partitioner={"minimum_deployment_target": 17},
                    value=value,
                    dtype=dtype,
                )

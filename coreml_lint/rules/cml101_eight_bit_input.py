"""CML101 eight-bit-partition-input: a uint8/int8 tensor enters a Core ML partition.

What it does
    Flags every uint8 or int8 tensor that a Core ML partition receives as an input: a
    program input read by a delegated op, an 8-bit tensor made by a CPU op and read by a
    delegated one, or an 8-bit buffer when ``take_over_constant_data=False``.

Why it breaks
    coremltools builds the partition's input types from a dtype table that has no uint8 or
    int8 entry (``TORCH_DTYPE_TO_MIL_DTYPE``), so lowering stops with
    ``KeyError: torch.uint8`` for every deployment target. The partitioner claims the op
    anyway because its support test looks only at op names. An 8-bit
    tensor that is made and used inside one partition is fine.

Example
    ``return frame.float() / 255`` with a uint8 ``frame`` program input.

On model source
    Without an export it flags an example input the source states is uint8/int8
    (``dtype=torch.uint8``, ``.byte()``) in the arguments of ``torch.export.export`` or in
    a ``{name: (module, example_inputs)}`` dict a function returns
    (``coreml_lint/source/inputs.py``).

Fix
    (a) pass the frame as int32 or float32; (a+b) cast first and keep the cast on the CPU
    with ``skip_ops_for_coreml_delegation=["dim_order_ops._to_dim_order_copy.default"]``;
    (b) a partitioner that refuses the nodes touching 8-bit tensors.

References
    - https://github.com/pytorch/executorch/issues/11686
      CoreML partitioner errors out with 8-bit integer types (KeyError; open)
    - https://github.com/pytorch/executorch/pull/19245
      reject Core ML delegation for unsupported input dtypes (closed unmerged)
    - https://github.com/pytorch/executorch/pull/19394
      patch coremltools' dtype map for int8/uint8 subgraph inputs (closed unmerged)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import EIGHT_BIT_DTYPES
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, frame, module, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext
from coreml_lint.source.inputs import example_inputs, input_dtype


class EightBitPartitionInput(Rule):
    code = "CML101"
    name = "eight-bit-partition-input"
    outcome = Outcome.CRASH
    summary = "uint8/int8 tensor is an input of a Core ML partition: KeyError at lowering"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for part in ctx.placement.partitions:
            for value in part.inputs:
                dtype = ctx.dtype(value)
                if dtype not in EIGHT_BIT_DTYPES:
                    continue
                readers = ctx.readers_in(value, part)
                if not readers:
                    continue
                origin = self._origin(ctx, value)
                casts_first = all(r.target == "aten._to_copy.default" for r in readers)
                yield ctx.finding(
                    readers[0],
                    f"{dtype} tensor '{value}' ({origin}) is an input of Core ML partition "
                    f"{part.id}: lowering fails with `KeyError: torch.{dtype}` (coremltools "
                    "has no 8-bit input type, for any deployment target)",
                    fix=(
                        f"pass '{value}' as int32 or float32"
                        if origin == "program input"
                        else f"keep '{value}' as int32/float32, or cast it before any other op"
                    )
                    + (
                        ""
                        if casts_first
                        else "; or cast it first (`x.float()`) so the cast is the only reader"
                    ),
                    partitioner=ctx.skip_advice(*readers),
                    value=value,
                    dtype=dtype,
                )

    source_triggers = ("uint8", "int8", ".byte()", ".char()")
    source_pattern = (
        "an example input given to `torch.export.export` (or a `programs` factory) as "
        "`dtype=torch.uint8`/`int8` (`.byte()`)"
    )
    source_fix = "pass the input as int32 or float32"
    examples = (
        Invalid(
            "frame = torch.randint(0, 256, (1, 3, 8, 8), dtype=torch.uint8)\n"
            "ep = torch.export.export(model, (frame,))\n",
            at=(2, 34),
        ),
        Invalid(
            'def make_programs():\n    return {"m": (Model(), (torch.zeros(4, 32).byte(),))}\n',
            at=(2, 29),
        ),
        Valid(
            "frame = torch.randint(0, 256, (1, 3, 8, 8), dtype=torch.int32)\n"
            "ep = torch.export.export(model, (frame,))\n"
        ),
        Valid("weights = torch.zeros(4, dtype=torch.uint8)\ny = model(weights)\n"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        settings = ctx.config.partitioner if ctx.config is not None else None
        skipped = settings.skip_ops_for_coreml_delegation if settings is not None else ()
        if any("to_dim_order_copy" in op or "_to_copy" in op for op in skipped):
            return  # the documented fix: the casts that read it stay on the CPU
        for expr in example_inputs(ctx):
            dtype = input_dtype(ctx, expr)
            if dtype not in EIGHT_BIT_DTYPES:
                continue
            yield ctx.finding(
                expr,
                f"example input is {dtype}: the program gets a {dtype} input, which the first "
                "delegated op that reads it makes an input of a Core ML partition, and "
                f"lowering fails with `KeyError: torch.{dtype}` (coremltools has no 8-bit "
                "input type, for any deployment target)",
                fix="pass it as int32 or float32 (and cast inside the model if needed)",
            )

    @staticmethod
    def _origin(ctx: ProgramContext, value: str) -> str:
        kind = ctx.input_kinds.get(value)
        if kind == "user_input":
            return "program input"
        if kind in ("buffer", "parameter", "constant"):
            return f"{kind} handed over with take_over_constant_data=False"
        producer = ctx.producers.get(value)
        return f"made on the CPU by {ctx.edge_name(producer)}" if producer else "made on the CPU"

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        from coreml_lint.rulekit.fx import EIGHT_BIT, touches

        return "touches a uint8/int8 tensor" if touches(node, EIGHT_BIT) else None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("uint8-input", expect={"CML101"}, crash=r"KeyError: torch\.uint8")
def _():
    return module(lambda s, f: f.float() / 255), (frame(),)


@case("int8-input-permute", expect={"CML101"}, crash=r"KeyError: torch\.int8")
def _():
    return module(lambda s, f: f.permute(0, 2, 3, 1).float() * 0.05), (frame(torch.int8),)


@case("int32-input", expect=set())
def _():
    return module(lambda s, f: f.float() / 255), (frame(torch.int32),)


@case(
    "uint8-made-on-cpu",
    expect={"CML101"},
    settings={"skip": ["dim_order_ops._to_dim_order_copy.default"]},
    crash=r"KeyError: torch\.uint8",
)
def _():
    def forward(s, x):
        q = torch.clamp(x * 255, 0, 255).to(torch.uint8)
        return q.permute(0, 2, 3, 1).float()

    return module(forward), (torch.rand(1, 3, 4, 4),)


@case("uint8-inside-one-partition", expect=set())
def _():
    def forward(s, x):
        q = torch.clamp(x * 255, 0, 255).to(torch.uint8)
        return q.permute(0, 2, 3, 1).float()

    return module(forward), (torch.rand(1, 3, 4, 4),)


@case(
    "int8-output",
    expect={"CML102"},
    silent=lambda lowered: any(
        dtype == "INT32" for d in lowered.delegates for _, dtype in d.outputs
    ),
)
def _():
    return module(lambda s, x: (x * 10).to(torch.int8)), (torch.randn(2, 4),)


@case(
    "int8-output-cast-on-cpu",
    expect=set(),
    settings={"skip": ["dim_order_ops._to_dim_order_copy.default"]},
)
def _():
    return module(lambda s, x: (x * 10).to(torch.int8)), (torch.randn(2, 4),)

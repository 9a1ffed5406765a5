"""CML106 fp16-input-below-ios16: a float16 tensor enters a Core ML partition below iOS16.

What it does
    Flags a float16 tensor that a Core ML partition receives as an input (a program input, a
    value made on the CPU, or a buffer with ``take_over_constant_data=False``) when the
    deployment target is below iOS16.

Why it breaks
    The iOS15 Core ML model format has no fp16 inputs, and coremltools refuses:
    ``ValueError: To use fp16 input, please set minimum deployment target to iOS16+``
   .
    A float16 model whose inputs are float32 (cast inside) is fine, as is a float16 constant
    the partition owns.

Example
    ``model.half()`` exported with float16 example inputs, lowered with the default target.

Fix
    (a) feed float32 and cast inside the model (``x.half()`` as the first op);
    (b) ``minimum_deployment_target`` iOS16 or later.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, nn, torch
from coreml_lint.rulekit.rule import Rule


class Fp16InputBelowIOS16(Rule):
    code = "CML106"
    name = "fp16-input-below-ios16"
    outcome = Outcome.CRASH
    summary = "float16 input of a Core ML partition below iOS16: To use fp16 input ... iOS16+"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 16:
            return
        for part in ctx.placement.partitions:
            for value in part.inputs:
                if ctx.dtype(value) != "float16":
                    continue
                readers = ctx.readers_in(value, part)
                if not readers:
                    continue
                yield ctx.finding(
                    readers[0],
                    f"float16 tensor '{value}' is an input of Core ML partition {part.id} below "
                    "iOS16: lowering fails with `ValueError: To use fp16 input, please set "
                    "minimum deployment target to iOS16+`",
                    fix=f"feed '{value}' as float32 and cast it inside the model",
                    partitioner={"minimum_deployment_target": 16},
                )

    cannot_lower = (
        "the program's float16 inputs are the user's signature; lower them at iOS16 or later"
    )


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("fp16-input", expect={"CML106"}, crash=r"To use fp16 input, please set minimum deployment")
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case("fp16-input-ios16", expect=set(), settings={"ios": 16})
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case("fp16-model-fp32-input", expect=set())
def _():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8).half()

        def forward(self, x):
            return self.lin(x.half()).float()

    return M(), (torch.randn(2, 8),)


@case("unfold-on-cpu", expect=set())
def _():
    return module(lambda s, x: x.unfold(1, 2, 2) * 2), (torch.randn(2, 8),)

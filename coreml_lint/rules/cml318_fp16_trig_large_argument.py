"""CML318 fp16-trig-large-argument: the angle of a timestep or position rounded to float16.

What it does
    Warns on a delegated ``aten.sin`` or ``aten.cos`` whose argument is whole numbers a
    program input holds (a timestep, a position id, a cache position), or an ``arange`` whose
    end the program only knows at run time, scaled by frequencies: the angles of a diffusion
    model's sinusoidal timestep embedding, or of rotary and sinusoidal position encodings
    computed in ``forward``. Only the arithmetic between the numbers and the sine is followed
    (products, sums, casts, reshapes), not activations. A warning: what it costs depends on
    how large the numbers get, which the program does not say. Angles made of constants
    alone (an ``arange`` of a fixed length times fixed frequencies) are not flagged:
    coremltools folds them in float32.

Why it breaks
    Core ML computes in float16 by default (ExecuTorch's ``CoreMLPartitioner`` converts at
    float16 compute precision), so the angle ``t * freq`` is rounded to float16 before the
    sine is taken. float16's spacing is 0.25 between 512 and 1024 and 2 past 2048, and the
    sine of an angle off by up to half of that is off by as much: ``coreml-lint verify``
    measured the cosine of timestep 999 at one frequency as 0.338 in Core ML, 0.536 in
    eager. It lowers without a word.

Example
    ``args = t[:, None].float() * freqs[None]; emb = torch.cat([args.cos(), args.sin()], -1)``

Fix
    Compute the table in float32 outside Core ML and index it: precompute ``cos`` and
    ``sin`` for every timestep or position as a buffer (``self.register_buffer("table",
    ...)``) and take ``self.table[t]``. The values Core ML then holds are in [-1, 1], where
    float16 rounds by 5e-4 at most (``coreml-lint verify`` agrees). Or keep ``sin``, ``cos``
    and the ops that compute their argument on the CPU.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports this for the PyTorch path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.program.graph import INTEGER_DTYPES, SymRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

TRIG = {"aten.sin.default", "aten.cos.default"}
# What an angle is made with between the numbers and the sine: arithmetic, casts, reshapes.
ANGLE_OPS = frozenset(
    {
        "mul",
        "div",
        "add",
        "sub",
        "rsub",
        "neg",
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "_unsafe_view",
        "expand",
        "slice",
        "select",
        "permute",
        "transpose",
        "clone",
        "cat",
        "repeat",
        "alias",
        "_to_copy",
        "to",
        "_to_dim_order_copy",
        "type_as",
    }
)
ARANGES = {"arange"}


class Fp16TrigLargeArgument(Rule):
    code = "CML318"
    severity = Severity.WARNING
    name = "fp16-trig-large-argument"
    outcome = Outcome.SILENT
    summary = "sin/cos of timesteps or positions: the angle is rounded to float16 first"
    cannot_lower = (
        "no rewrite keeps float32 angles inside a float16 Core ML model: precompute the "
        "table as a buffer and index it, or keep sin, cos and their argument on the CPU"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in TRIG or not node.tensor_inputs():
                continue
            source = _whole_numbers(ctx, node.tensor_inputs()[0])
            if source is None:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} of an angle made from {source}: Core ML computes in float16 "
                "by default and rounds the angle first (by up to 0.125 past 256, 1 past "
                "2048), so the result is off by as much; how much that costs depends on how "
                "large your numbers get",
                fix="precompute the cos/sin table in float32 as a buffer and index it "
                "(table[t]), or keep sin, cos and their argument on the CPU",
            )


def _whole_numbers(ctx: ProgramContext, value: str) -> str | None:
    """What the angle ``value`` is made from, when it is whole numbers of a program input (or
    of an ``arange`` sized at run time) followed only by arithmetic: a few words naming it.
    None when the angle is made of other values (activations) or of constants alone."""
    seen, frontier = {value}, [value]
    found: str | None = None
    while frontier:
        current = frontier.pop()
        kind = ctx.input_kinds.get(current)
        if kind == "user_input" and ctx.dtype(current) in INTEGER_DTYPES:
            found = found or f"the integer input `{current}`"
            continue
        producer = ctx.producers.get(current)
        if producer is None:
            continue  # a float program input, a parameter, a buffer or a constant
        if producer.op_base in ARANGES:
            if any(isinstance(a, SymRef) for a in producer.args):
                found = found or "an arange sized at run time"
            continue  # a fixed arange is a constant: folded in float32
        if producer.op_base not in ANGLE_OPS:
            if ctx.dtype(current) in INTEGER_DTYPES and ctx.computed_from_input([current], 64):
                found = found or f"the integers `{current}` ({producer.op_base})"
            continue  # an activation, a frequency table: not whole numbers we can name
        for operand in producer.tensor_inputs():
            if operand not in seen:
                seen.add(operand)
                frontier.append(operand)
    return found


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def timestep_embedding(t: Any) -> tuple[Any, tuple[Any, ...]]:
    """A diffusion model's sinusoidal timestep embedding, computed in ``forward``."""

    def forward(s: Any, t: Any) -> Any:
        half = 16
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    return module(forward), (t,)


@case(
    "timestep-embedding",
    expect=set(),
    warnings={"CML318"},
    # the angle is a float16 product, and cos runs on it in float16
    silent=returns(r"fp16\)\(Tensor\) = cos\(x=%\w*mul\w*_cast_fp16"),
)
def _() -> Any:
    return timestep_embedding(torch.tensor([1, 250, 999]))


@case("timestep-table-buffer", expect=set(), warnings=set())
def _() -> Any:
    """The fix: the table computed once in float32, indexed by the timestep."""
    steps = torch.arange(1000, dtype=torch.float64)[:, None]
    freqs = torch.exp(-math.log(10000.0) * torch.arange(16, dtype=torch.float64) / 16)
    angles = steps * freqs[None]
    table = torch.cat([angles.cos(), angles.sin()], dim=-1).float()

    class Table(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", table)

        def forward(self, t: Any) -> Any:
            return self.table[t] * 1.0

    return Table(), (torch.tensor([1, 250, 999]),)


@case("fixed-positions-folded", expect=set(), warnings=set())
def _() -> Any:
    """Positions of a fixed length times fixed frequencies: constants, folded in float32."""

    def forward(s: Any, x: Any) -> Any:
        pos = torch.arange(512, dtype=torch.float32)
        inv = torch.exp(-math.log(10000.0) * torch.arange(0, 16, 2).float() / 16)
        angles = pos[:, None] * inv[None]
        return x * angles.cos() + x * angles.sin()

    return module(forward), (torch.randn(512, 8),)


@case("sine-of-activations", expect=set(), warnings=set())
def _() -> Any:
    """A sine of activations (a SIREN layer): no whole numbers to name."""
    return module(lambda s, x: torch.sin(30.0 * x)), (torch.randn(4, 8),)

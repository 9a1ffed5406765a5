"""CML108 eight-bit-arithmetic: uint8/int8 arithmetic or comparison inside Core ML at iOS17+.

What it does
    Flags a delegated ``add``, ``sub``, ``mul``, ``abs``, ``bitwise_not``, ``where``,
    ``maximum``/``minimum``, ``amax``/``amin`` or tensor-tensor comparison (``eq``, ``ne``,
    ``gt``, ``ge``, ``lt``, ``le``) whose operands are all uint8/int8 tensors made inside the
    partition (a cast, an index into an 8-bit table, an 8-bit buffer), at iOS17 or later.
    An 8-bit program input, output or constant below iOS17 is CML101's, CML102's or
    CML103's.

Why it breaks
    From iOS17 the MIL ``cast`` keeps uint8/int8 (below iOS17 coremltools casts to int32
    instead), but the arithmetic ops' type domain is ``['fp16', 'fp32', 'int32']``, so
    lowering stops with ``ValueError: Op "aten_add_tensor" (op_type: add) Input x=... expects
    tensor or scalar of dtype from type domain ['fp16', 'fp32', 'int32'] but got
    tensor[1,8,uint8]`` (``select`` for ``where``; ``bitwise_not`` fails with ``add ...
    y has dtype int32 whereas x has dtype uint8``). Measured at iOS15-18 with uint8 and
    int8: the same models lower at iOS15/16; at iOS17/18 casts, indexing, ``cat``,
    views, ``neg``, ``clamp``, ``sum``, ``remainder`` by a scalar and comparisons with a
    scalar lower, and so does an 8-bit tensor added to an int32 one.

Example
    ``(self.salt[codes] + self.salt[codes]).float()`` with a uint8 ``salt`` buffer;
    ``((x > 0).to(torch.uint8) * 3).float()``.

Fix
    (a) compute in int32: ``.to(torch.int32)`` on the 8-bit operands before the op (uint8
    and int8 arithmetic wraps around, 200 + 100 == 44 in uint8, int32 does not: take the
    int32 result ``% 256`` where a uint8 wrap is meant); (b) ``coreml-lint lower`` keeps
    the nodes that touch 8-bit tensors on the CPU, where the portable runtime computes them
    in 8 bits.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import EIGHT_BIT_DTYPES, Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule

_DOMAIN = "['fp16', 'fp32', 'int32']"
# ATen op (as the partitioner names it) -> the MIL op it becomes, measured to reject an
# 8-bit operand at iOS17 and iOS18.
CRASHING = {
    "add.Tensor": "add",
    "sub.Tensor": "sub",
    "mul.Tensor": "mul",
    "abs.default": "abs",
    "eq.Tensor": "equal",
    "ne.Tensor": "not_equal",
    "gt.Tensor": "greater",
    "ge.Tensor": "greater_equal",
    "lt.Tensor": "less",
    "le.Tensor": "less_equal",
    "maximum.default": "maximum",
    "minimum.default": "minimum",
    "amax.default": "reduce_max",
    "amin.default": "reduce_min",
    "where.self": "select",
    "bitwise_not.default": "add",
}


def error_of(aten_name: str, dtype: str) -> str:
    """The measured lowering error of ``aten_name`` on a ``dtype`` operand."""
    mil = CRASHING[aten_name]
    if aten_name == "bitwise_not.default":
        return f"ValueError: In op, of type add, ... y has dtype int32 whereas x has dtype {dtype}"
    domain = "['fp16', 'fp32', 'bool', 'int32']" if mil == "select" else _DOMAIN
    return (
        f'ValueError: Op "aten_{aten_name.replace(".", "_").lower()}" (op_type: {mil}) ... '
        f"expects tensor or scalar of dtype from type domain {domain} but got "
        f"tensor[...,{dtype}]"
    )


def eight_bit_operands(ctx: ProgramContext, node: Node) -> list[str]:
    """The node's 8-bit operands when every non-bool tensor it reads is 8-bit (an 8-bit
    tensor next to an int32 or float one is promoted by coremltools and lowers)."""
    values = [v for v in node.tensor_inputs() if ctx.dtype(v) != "bool"]
    if not values or any(ctx.dtype(v) not in EIGHT_BIT_DTYPES for v in values):
        return []
    return values


class EightBitArithmetic(Rule):
    code = "CML108"
    name = "eight-bit-arithmetic"
    outcome = Outcome.CRASH
    summary = "uint8/int8 add/mul/compare/where inside Core ML at iOS17+: MIL type domain error"
    # An 8-bit partition input (CML101) or constant below iOS17 (CML103) fails first.
    defers = True

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target < 17:
            return
        for node in ctx.coreml_nodes():
            if node.aten_name not in CRASHING:
                continue
            values = eight_bit_operands(ctx, node)
            part = ctx.placement.partition_of(node)
            if not values or part is None or set(values) & set(part.inputs):
                continue
            dtype = ctx.dtype(values[0]) or "uint8"
            base = node.op_base
            yield ctx.finding(
                node,
                f"{base} of {dtype} tensors inside Core ML partition {part.id}: from iOS17 "
                f"the 8-bit values stay 8-bit in MIL and {CRASHING[node.aten_name]} does not "
                f"take them, so lowering fails with `{error_of(node.aten_name, dtype)}`",
                fix=(
                    f"cast the operands to int32 before {base} (`.to(torch.int32)`); {dtype} "
                    "arithmetic wraps around and int32 does not"
                    + (
                        ", so take the int32 result % 256 where the wrap is meant"
                        if dtype == "uint8"
                        else ""
                    )
                ),
                value=values[0],
                dtype=dtype,
            )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """Every node that reads or makes an 8-bit tensor stays on the CPU (the portable
        runtime has 8-bit kernels): refusing only the failing op would make the 8-bit value
        before it a Core ML output, which coremltools returns as int32 (CML102)."""
        from coreml_lint.rulekit.fx import EIGHT_BIT, touches

        return "touches a uint8/int8 tensor" if touches(node, EIGHT_BIT) else None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
_ADD = r'Op "aten_add_tensor" \(op_type: add\).* type domain \[.fp16., .fp32., .int32.\] but got'


def _salted(dtype: Any) -> Any:
    def forward(s, codes):
        return (s.salt[codes] + s.salt[codes]).float()

    salt = torch.tensor([100, 50, 120, 7], dtype=dtype)
    return module(forward, salt=salt), (torch.randint(0, 4, (1, 8)),)


@case("uint8-table-add-ios17", expect={"CML108"}, settings={"ios": 17}, crash=_ADD + r" .*uint8")
def _():
    return _salted(torch.uint8)


@case("int8-table-add-ios18", expect={"CML108"}, settings={"ios": 18}, crash=_ADD + r" .*int8")
def _():
    return _salted(torch.int8)


@case("int32-table-add-ios18", settings={"ios": 18})
def _():
    return _salted(torch.int32)


@case(
    "uint8-cast-mul-ios18",
    expect={"CML108"},
    settings={"ios": 18},
    crash=r'"aten_mul_tensor.*" \(op_type: mul\).* but got tensor\[1,8,uint8\]',
)
def _():
    return module(lambda s, x: ((x > 0).to(torch.uint8) * 3).float()), (torch.randn(1, 8),)


@case("uint8-cast-mul-ios16", settings={"ios": 16})
def _():
    # Below iOS17 the cast makes int32 in MIL: it lowers.
    return module(lambda s, x: ((x > 0).to(torch.uint8) * 3).float()), (torch.randn(1, 8),)


@case(
    "int8-where-ios17",
    expect={"CML108"},
    settings={"ios": 17},
    crash=r"\(op_type: select\).* \['fp16', 'fp32', 'bool', 'int32'\] but got tensor\[1,8,int8\]",
)
def _():
    def forward(s, x):
        return torch.where(x > 0, (x * 10).to(torch.int8), (x * 20).to(torch.int8)).float()

    return module(forward), (torch.randn(1, 8),)


@case(
    "uint8-compare-ios18",
    expect={"CML108"},
    settings={"ios": 18},
    crash=r"\(op_type: greater\).* but got tensor\[1,8,uint8\]",
)
def _():
    def forward(s, x):
        q = (x * 10).to(torch.uint8)
        return (q > (x * 20).to(torch.uint8)).float()

    return module(forward), (torch.randn(1, 8),)


@case("uint8-view-cast-ios18", settings={"ios": 18})
def _():
    # Casts, views, cat and comparisons with a scalar lower with 8-bit values at iOS18.
    def forward(s, x):
        q = (x * 10).to(torch.uint8)
        both = torch.cat([q, q], 1).view(2, 8).permute(1, 0)
        return both.float() + (q > 3).float().sum()

    return module(forward), (torch.randn(1, 8),)


@case("uint8-plus-int32-ios18", settings={"ios": 18})
def _():
    # An 8-bit tensor added to an int32 one is promoted and lowers.
    def forward(s, x, i):
        return ((x * 10).to(torch.uint8) + i.int()).float()

    return module(forward), (torch.randn(1, 8), torch.randint(0, 8, (1, 8)))

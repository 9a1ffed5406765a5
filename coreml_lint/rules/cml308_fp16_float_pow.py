"""CML308 fp16-float-pow: a float16 ``pow`` with a float exponent that feeds a matmul with weights.

What it does
    Flags a delegated ``aten.pow.Tensor_Scalar`` on a float16 tensor whose exponent is a
    Python float (``x.pow(3.0)``, ``x ** 2.5``) when its result reaches, through other
    ops, an ``addmm`` (any target) or, below iOS18, a ``matmul``/``mm`` with a weight
    (parameter, buffer or constant) operand.

Why it breaks
    coremltools pairs the float exponent with the fp16 tensor in fp32, and the fp32 result then
    meets the fp16 weight: ``ValueError: In op, of type linear, named aten_matmul_default, the named
    input `weight` must have the same data type as the named input `x``` below iOS18, and ``In op,
    of type add, named aten_addmm_default, ... y has dtype fp32 whereas x has dtype fp16`` for addmm
    at every target. Found by probing: GPT-2 in ``.half()`` hits it through its tanh-GELU formula
    (``torch.pow(x, 3.0)``) feeding ``Conv1D``'s ``addmm``. An integer exponent (``x.pow(3)``),
    ``nn.Linear`` and a matmul of two activations all lower.

Example
    ``torch.addmm(b, 0.5 * x * (1 + torch.tanh(0.79788 * (x + 0.044715 * torch.pow(x,
    3.0)))), w)`` with ``x`` float16.

Fix
    (a) write the exponent as an int when it is whole (``x.pow(3)``, ``x * x * x``), or
    compute the power in float32 and cast it back; (b) ``coreml-lint lower`` does both: a
    whole exponent becomes an int (the same values), a fractional one runs in float32.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, nn, torch
from coreml_lint.rulekit.rule import Rule

_WEIGHT_KINDS = {"parameter", "buffer", "constant"}
_WEIGHT_VIEWS = {"t", "permute", "transpose", "view", "reshape", "expand", "_to_copy"}


class Fp16FloatPow(Rule):
    code = "CML308"
    name = "fp16-float-pow"
    outcome = Outcome.CRASH
    summary = "float16 pow with a float exponent feeding a matmul/addmm with weights"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target != "aten.pow.Tensor_Scalar" or not node.outputs:
                continue
            base, exponent = node.arg(0, "self"), node.arg(1, "exponent")
            if not isinstance(exponent, float) or not isinstance(base, TensorRef):
                continue
            if ctx.dtype(base.name) != "float16":
                continue
            consumer = self._weighted_matmul(ctx, node)
            if consumer is None:
                continue
            whole = exponent.is_integer()
            yield ctx.finding(
                node,
                f"float16 pow with the float exponent {exponent!r} feeds "
                f"{ctx.edge_name(consumer)}: coremltools computes the power in fp32, and "
                "lowering fails with `ValueError: In op ... must have the same data type` "
                "(fp32 against the fp16 weights)",
                fix=f"write the exponent as an int: pow(x, {int(exponent)})"
                if whole
                else "compute the power in float32 and cast the result back",
                exponent=exponent,
            )

    @staticmethod
    def _weighted_matmul(ctx: ProgramContext, start: Node) -> Node | None:
        """The first Core ML addmm, or matmul/mm below iOS18, that the pow's value reaches
        and that has a weight operand."""
        below_ios18 = ctx.settings.minimum_deployment_target < 18
        for _, user in ctx.coreml_users_downstream(start.outputs):
            matmul = user.op_base == "addmm" or (below_ios18 and user.op_base in ("matmul", "mm"))
            if matmul and any(_is_weight(ctx, t) for t in user.tensor_inputs()):
                return user
        return None

    # A fractional exponent computed in float32 rounds once instead of in fp16 steps.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """A whole exponent becomes an int (``pow(x, 3)``: the same values, kept in fp16); a
        fractional one is computed in float32 and cast back, so the MIL holds an explicit
        cast instead of an fp32 value flowing on."""
        import torch

        from coreml_lint.rulekit.fx import aten, finish, in_float32, val

        done = []
        for node in list(ep.graph.nodes):
            if node.target != aten.pow.Tensor_Scalar or len(node.args) < 2:
                continue
            base, exponent = node.args[0], node.args[1]
            fp16 = getattr(val(node), "dtype", None) == torch.float16
            if not isinstance(exponent, float) or not fp16:
                continue
            if exponent.is_integer():
                node.args = (base, int(exponent))
                done.append(f"{node.name}: exponent {exponent!r} written as {int(exponent)}")
                continue
            in_float32(ep, node)
            done.append(f"{node.name}: pow(x, {exponent!r}) computed in float32, cast back")
        return finish(ep), done


def _is_weight(ctx: ProgramContext, value: str, depth: int = 3) -> bool:
    """A parameter, buffer or constant, or a transposed/reshaped view of one (``x @ w.t()``)."""
    if ctx.input_kinds.get(value) in _WEIGHT_KINDS:
        return True
    producer = ctx.producers.get(value)
    if depth == 0 or producer is None or producer.op_base not in _WEIGHT_VIEWS:
        return False
    inputs = producer.tensor_inputs()
    return bool(inputs) and _is_weight(ctx, inputs[0], depth - 1)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def powered(exponent: float | int, consumer: str) -> nn.Module:
    """float16 ``pow`` feeding a product with weights, as GPT-2's tanh GELU feeds Conv1D."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 8) * 0.1)
            self.b = nn.Parameter(torch.zeros(8))
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            h = x.half()
            p = torch.tanh(torch.pow(h, exponent) * 0.5 + h)
            if consumer == "addmm":
                out = torch.addmm(self.b, p, self.w)
            elif consumer == "matmul":
                out = p @ self.w.t()
            else:
                out = self.linear(p)
            return out.float()

    return M().half()


def rows() -> tuple[Any, ...]:
    return (torch.randn(4, 8),)


SAME_DTYPE = r"must have the same data type as the named input"
case("fp16-pow-float-addmm", expect={"CML308"}, crash=SAME_DTYPE)(
    lambda: (powered(3.0, "addmm"), rows())
)
case("fp16-pow-float-addmm-ios18", expect={"CML308"}, settings={"ios": 18}, crash=SAME_DTYPE)(
    lambda: (powered(3.0, "addmm"), rows())
)
case("fp16-pow-fractional-matmul", expect={"CML308"}, crash=SAME_DTYPE)(
    lambda: (powered(2.5, "matmul"), rows())
)
case("fp16-pow-float-matmul-ios18", expect=set(), settings={"ios": 18})(
    lambda: (powered(3.0, "matmul"), rows())
)
case("fp16-pow-int-addmm", expect=set())(lambda: (powered(3, "addmm"), rows()))
case("fp16-pow-float-linear", expect=set())(lambda: (powered(3.0, "linear"), rows()))

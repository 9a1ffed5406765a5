"""CML313 fp16-activation-alpha: a float16 activation whose bound coremltools makes fp32.

What it does
    Flags a delegated float16 ``hardtanh`` (what ``nn.ReLU6`` and ``F.hardtanh`` export to)
    or ``threshold`` at every target, and a float16 ``leaky_relu``, ``elu``, ``hardswish``
    or ``hardsigmoid`` below iOS17.

Why it breaks
    The converters build the activation's scalar (``clip``'s ``alpha``/``beta``,
    ``threshold``'s ``alpha``, the slope of ``leaky_relu``/``elu``/``sigmoid_hard``) as an
    fp32 constant and pair it with the fp16 tensor: ``ValueError: In op, of type clip, named
    aten_hardtanh_default, the named input `alpha` must have the same data type as the named
    input `x`. However, alpha has dtype fp32 whereas x has dtype fp16.``, with the default
    bounds too. ``threshold`` fails alike at every target (``In op, of type threshold``;
    with integer arguments its ``alpha`` is int32, and float32 fails too: CML801);
    ``leaky_relu``, ``elu``, ``hardswish`` (``thresholded_relu``) and ``hardsigmoid``
    (``sigmoid_hard``) fail below iOS17 and lower from iOS17 on. All measured with iOS16, 17
    and 18. ``torch.clamp`` with float bounds, ``F.relu6`` (its own ``relu6`` op),
    ``softplus`` and ``relu`` lower in float16 at all three.

Example
    ``nn.ReLU6()`` in a ``.half()`` model (MobileNet), at any target.

Fix
    (a) ``torch.clamp(x, 0.0, 6.0)`` (or ``F.relu6``) instead of ``nn.ReLU6``/``F.hardtanh``:
    the same values, and it lowers in float16; or compute the activation in float32 and cast
    back; (b) a deployment target of iOS17+ for ``leaky_relu``, ``elu``, ``hardswish`` and
    ``hardsigmoid``; (c) ``coreml-lint lower`` runs every float16 activation of these kinds
    in float32 and casts it back, inside Core ML (checked in eager at 1e-2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule

# The MIL op each activation becomes, for the messages.
_EVERY_TARGET = {"hardtanh": "clip", "threshold": "threshold"}
_BELOW_IOS17 = {
    "leaky_relu": "leaky_relu",
    "elu": "elu",
    "hardswish": "thresholded_relu",
    "hardsigmoid": "sigmoid_hard",
}


def failing_ops(ios: int) -> dict[str, str]:
    """The activations (ATen op base -> MIL op) whose float16 lowering fails at ``ios``."""
    return {**_EVERY_TARGET, **(_BELOW_IOS17 if ios < 17 else {})}


class Fp16ActivationAlpha(Rule):
    code = "CML313"
    name = "fp16-activation-alpha"
    outcome = Outcome.CRASH
    summary = "float16 hardtanh/ReLU6/threshold (and more below iOS17): fp32 bound, fp16 x"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        failing = failing_ops(ctx.settings.minimum_deployment_target)
        for node in ctx.coreml_nodes():
            default = node.target == f"aten.{node.op_base}.default"
            mil = failing.get(node.op_base) if default else None
            if mil is None or ctx.dtype(node.tensor_inputs()[0]) != "float16":
                continue
            kind = "int32" if any(isinstance(a, int) for a in node.args[1:]) else "fp32"
            yield ctx.finding(
                node,
                f"float16 {node.op_base} is delegated: lowering fails with `ValueError: In op, "
                f"of type {mil} ... alpha has dtype {kind} whereas x has dtype fp16` "
                f"(coremltools makes the constant {kind})",
                fix="torch.clamp(x, lo, hi) instead of hardtanh/ReLU6, or compute the "
                "activation in float32 and cast back"
                + ("" if node.op_base in _EVERY_TARGET else ", or target iOS17+"),
                partitioner=ctx.skip_advice(node),
            )

    # float32 arithmetic instead of float16: closer to exact, not equal.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        """Every float16 activation of the kinds that fail at the target computed in float32
        and cast back: the converter's fp32 constant then meets an fp32 tensor, and the node
        stays on Core ML (a ``leaky_relu`` at iOS17+, which lowers there, is left as it is).
        A ``threshold``'s integer arguments are written as floats first (the same values)."""
        from coreml_lint.rulekit.fx import aten, finish, float16_in_float32, is_fp16

        for node in ep.graph.nodes:  # integer bounds would stay an int32 alpha (measured)
            if node.target == aten.threshold.default and is_fp16(node):
                node.args = (node.args[0], *(float(a) for a in node.args[1:]))
        ios = self.settings.minimum_deployment_target if self.settings else 15
        ops = [getattr(aten, name).default for name in failing_ops(ios)]
        done = float16_in_float32(ep, ops)
        return finish(ep), done

    def refuse(self, node: Any) -> str | None:
        """When the rewrite was not applied: the activation runs on the CPU (the portable
        runtime has a kernel for each)."""
        import torch

        from coreml_lint.rulekit.fx import op_base, touches

        ios = self.settings.minimum_deployment_target if self.settings else 15
        if op_base(node) in failing_ops(ios) and touches(node, {torch.float16}):
            return "float16 activation with an fp32 constant in Core ML"
        return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case(
    "relu6-fp16-ios18",
    expect={"CML313"},
    settings={"ios": 18},
    crash=r"type clip, .* alpha has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.ReLU6(), torch.float16)


@case("relu6-fp32-ios18", settings={"ios": 18})
def _():
    return wrapped(nn.ReLU6())


@case("clamp-fp16-ios18", settings={"ios": 18})
def _():
    # The fix: clamp with float bounds lowers in float16.
    return module(lambda s, x: torch.clamp(x, 0.0, 6.0)), (torch.randn(2, 8).half(),)


@case("relu6-functional-fp16-ios18", settings={"ios": 18})
def _():
    # F.relu6 exports as aten.relu6, not hardtanh, and lowers in float16.
    return module(lambda s, x: F.relu6(x)), (torch.randn(2, 8).half(),)


@case(
    "threshold-fp16-ios17",
    expect={"CML313"},
    settings={"ios": 17},
    crash=r"type threshold, .* alpha has dtype fp32 whereas x has dtype fp16",
)
def _():
    return module(lambda s, x: F.threshold(x, 0.1, 20.0)), (torch.randn(2, 8).half(),)


@case(
    "threshold-int-fp16-ios18",
    expect={"CML313"},
    settings={"ios": 18},
    crash=r"type threshold, .* alpha has dtype int32 whereas x has dtype fp16",
)
def _():
    # Integer arguments: the rewrite also writes them as floats.
    return module(lambda s, x: F.threshold(x, 0, 0)), (torch.randn(2, 8).half(),)


@case(
    "leakyrelu-fp16-ios16",
    expect={"CML313"},
    settings={"ios": 16},
    crash=r"type leaky_relu, .* alpha has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.LeakyReLU(0.1), torch.float16)


@case("leakyrelu-fp16-ios17", settings={"ios": 17})
def _():
    return wrapped(nn.LeakyReLU(0.1), torch.float16)


@case(
    "hardswish-fp16-ios16",
    expect={"CML313"},
    settings={"ios": 16},
    crash=r"type thresholded_relu, .* alpha has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.Hardswish(), torch.float16)

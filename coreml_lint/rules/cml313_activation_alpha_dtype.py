"""CML313 activation-alpha-dtype: an activation whose bound coremltools makes in another
dtype than its input.

What it does
    Flags a delegated ``hardtanh`` (what ``nn.ReLU6`` and ``F.hardtanh`` export to),
    ``threshold``, ``leaky_relu`` or ``elu`` given an integer bound or slope
    (``F.hardtanh(x, 0, 6)``, ``nn.Threshold(0, 0)``), in any dtype at any target; a
    float16 ``hardtanh`` or ``threshold`` at every target; and a float16 ``leaky_relu``,
    ``elu``, ``hardswish`` or ``hardsigmoid`` below iOS17.

Why it breaks
    The converters build the activation's scalar (``clip``'s ``alpha``/``beta``,
    ``threshold``'s ``alpha``, the slope of ``leaky_relu``/``elu``/``sigmoid_hard``) as a
    constant of the Python number's type (int32 for an int, fp32 for a float) and pair it
    with the tensor: ``ValueError: In op, of type clip, named aten_hardtanh_default, the
    named input `alpha` must have the same data type as the named input `x`. However, alpha
    has dtype fp32 whereas x has dtype fp16.``; for an integer bound ``alpha has dtype
    int32 whereas x has dtype fp32`` (or ``expects tensor or scalar of dtype from type
    domain ['fp16', 'fp32']``). Float16 ``leaky_relu``, ``elu``, ``hardswish``
    (``thresholded_relu``) and ``hardsigmoid`` (``sigmoid_hard``) fail below iOS17 and lower
    from iOS17 on. All measured with iOS15-18. ``torch.clamp`` (float or int bounds),
    ``F.relu6`` (its own ``relu6`` op), ``softplus`` and ``relu`` lower in float16.

Example
    ``nn.ReLU6()`` in a ``.half()`` model (MobileNet), at any target; ``F.hardtanh(x, 0, 6)``
    in float32.

Fix
    (a) float bounds (``F.hardtanh(x, 0.0, 6.0)``); in float16, ``torch.clamp(x, 0.0, 6.0)``
    or ``F.relu6`` instead of ``nn.ReLU6``/``F.hardtanh``, ``torch.where(x > t, x, v)``
    instead of ``threshold``, or the activation computed in float32 and cast back; (b) a
    deployment target of iOS17+ for float16 ``leaky_relu``, ``elu``, ``hardswish`` and
    ``hardsigmoid``; (c) ``coreml-lint lower`` writes integer bounds as floats (the same
    values) and runs each float16 activation that fails at the target in float32, cast
    back, inside Core ML (checked in eager at 1e-2).

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
# Activations whose scalar arguments become a constant of the Python number's type.
_SCALAR_ARGS = ("hardtanh", "threshold", "leaky_relu", "elu")
_FIXES = {
    "hardtanh": "torch.clamp(x, lo, hi) (or F.relu6) instead of hardtanh/ReLU6",
    "threshold": "torch.where(x > threshold, x, value) instead of threshold",
}


def failing_ops(ios: int) -> dict[str, str]:
    """The activations (ATen op base -> MIL op) whose float16 lowering fails at ``ios``."""
    return {**_EVERY_TARGET, **(_BELOW_IOS17 if ios < 17 else {})}


def integer_scalars(args: Any) -> list[int]:
    """The arguments after the input that are Python ints (a bool is no bound)."""
    return [a for a in args[1:] if isinstance(a, int) and not isinstance(a, bool)]


class ActivationAlphaDtype(Rule):
    code = "CML313"
    name = "activation-alpha-dtype"
    outcome = Outcome.CRASH
    summary = "hardtanh/threshold/leaky_relu/elu with an int bound, or in float16: alpha dtype"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        failing = failing_ops(ctx.settings.minimum_deployment_target)
        for node in ctx.coreml_nodes():
            base = node.op_base
            if node.target != f"aten.{base}.default":
                continue
            dtype = ctx.dtype(node.tensor_inputs()[0]) if node.tensor_inputs() else None
            if base in _SCALAR_ARGS and integer_scalars(node.args):
                kind, x = "int32", {"float16": "fp16"}.get(dtype or "", "fp32")
                fix = "pass the bounds as floats (0.0, 6.0: the same values)"
            elif base in failing and dtype == "float16":
                kind, x = "fp32", "fp16"
                fix = _FIXES.get(base, f"compute {base} in float32 and cast back")
                fix += "" if base in _EVERY_TARGET else ", or target iOS17+"
            else:
                continue
            yield ctx.finding(
                node,
                f"{dtype} {base} is delegated: lowering fails with `ValueError: In op, of type "
                f"{failing.get(base) or _BELOW_IOS17.get(base, base)} ... alpha has dtype "
                f"{kind} whereas x has dtype {x}` (coremltools makes the constant {kind})",
                fix=fix,
                partitioner=ctx.skip_advice(node),
            )

    # float32 arithmetic instead of float16: closer to exact, not equal.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Integer bounds written as floats (the same values), then every float16 activation
        of the kinds that fail at the target computed in float32 and cast back: the
        converter's constant then has the tensor's dtype, and the node stays on Core ML (a
        float16 ``leaky_relu`` at iOS17+, which lowers there, is left as it is)."""
        from coreml_lint.rulekit.fx import aten, finish, float16_in_float32

        done = []
        scalar_ops = {getattr(aten, name).default for name in _SCALAR_ARGS}
        for node in ep.graph.nodes:
            if node.target in scalar_ops and integer_scalars(node.args):
                node.args = (node.args[0], *(_as_float(a) for a in node.args[1:]))
                done.append(f"{node.name}: integer bounds written as floats")
        ios = settings.minimum_deployment_target
        ops = [getattr(aten, name).default for name in failing_ops(ios)]
        done += float16_in_float32(ep, ops)
        return finish(ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """When the rewrite was not applied: the activation stays off Core ML (on the CPU
        where the portable runtime has a kernel, else torch decomposes it into ops that
        lower)."""
        import torch

        from coreml_lint.rulekit.fx import op_base, touches

        base = op_base(node)
        if base in _SCALAR_ARGS and integer_scalars(getattr(node, "args", ())):
            return "activation with an integer bound in Core ML"
        ios = settings.minimum_deployment_target
        if base in failing_ops(ios) and touches(node, {torch.float16}):
            return "float16 activation with an fp32 constant in Core ML"
        return None


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


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
    # Integer arguments: an int32 alpha (the rewrite writes them as floats).
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


@case(
    "hardtanh-int-bounds",
    expect={"CML313"},
    crash=r"type clip, .* alpha has dtype int32 whereas x has dtype fp32",
)
def _():
    return module(lambda s, x: F.hardtanh(x, 0, 6) * 2), (torch.randn(2, 8),)


@case("hardtanh-float-bounds")
def _():
    return module(lambda s, x: F.hardtanh(x, 0.0, 6.0) * 2), (torch.randn(2, 8),)


@case(
    "leakyrelu-int-slope-ios18",
    expect={"CML313"},
    settings={"ios": 18},
    crash=r"leaky_relu.* expects tensor or scalar of dtype from type domain",
)
def _():
    return module(lambda s, x: F.leaky_relu(x, 1) * 2), (torch.randn(2, 8),)

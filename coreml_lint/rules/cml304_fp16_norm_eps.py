"""CML304 fp16-norm-eps: a float16 norm in Core ML whose eps coremltools makes fp32.

What it does
    Flags a delegated float16 norm that the stock lowering fails on: ``rms_norm`` with an
    eps and ``group_norm`` at every target; ``layer_norm`` and ``instance_norm`` below
    iOS17, and from iOS17 on when they have a weight (``elementwise_affine``/``affine``).

Why it breaks
    coremltools builds the eps constant as fp32 and pairs it with the fp16 tensor:
    ``ValueError: In op, of type add, named aten_rms_norm_default_add_eps, the named input y
    must have the same data type as the named input x. However, y has dtype fp32 whereas x
    has dtype fp16.``. ``group_norm`` fails alike on its own eps ``add`` (``In op, of type
    add, named add_0 ... y has dtype fp32 whereas x has dtype fp16``), with or without
    weight and bias. ``layer_norm`` and ``instance_norm`` are one MIL op: below iOS17 it
    fails with ``epsilon has dtype fp32 whereas x has dtype fp16``; from iOS17 on only a
    weight trips it (``epsilon has dtype fp32 whereas gamma has dtype fp16``), and a norm
    without weight lowers. All measured with iOS16, 17 and 18. Without eps rms_norm fails on
    the input count first (CML303); an fp16 program input also needs iOS16+ (CML106).

Example
    ``nn.RMSNorm(16, eps=1e-6).half()`` or ``nn.GroupNorm(2, 8).half()`` on an fp16 input.

Fix
    (a) keep the norm in float32, or hand-write it:
    ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``;
    (b) ``skip_ops_for_coreml_delegation=["rms_norm.default"]`` (ATen spelling: decomposed,
    and the pieces are delegated); (c) ``coreml-lint lower`` runs every float16 norm of
    these kinds in float32 and casts it back, inside Core ML (checked in eager at 1e-2).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule

# Where each norm keeps its weight (gamma) among the positional arguments.
_WEIGHT_AT = {"aten.layer_norm.default": 2, "aten.instance_norm.default": 1}
# The first target at which a norm without weight lowers (the MIL op takes an fp32 eps).
_WEIGHTLESS_FROM = 17


def crashes(node: Node, ios: int) -> bool:
    """Whether the stock lowering of this norm, given a float16 input, fails at ``ios``."""
    if node.target == "aten.rms_norm.default":
        return len(node.args) >= 4  # eps given (without it CML303 applies)
    if node.target == "aten.group_norm.default":
        return True
    at = _WEIGHT_AT.get(node.target)
    if at is None:
        return False
    weighted = len(node.args) > at and node.args[at] is not None
    return weighted or ios < _WEIGHTLESS_FROM


class RmsNormFp16(Rule):
    code = "CML304"
    name = "fp16-norm-eps"
    outcome = Outcome.CRASH
    summary = "float16 rms/layer/group/instance norm in Core ML: fp32 eps paired with fp16"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        ios = ctx.settings.minimum_deployment_target
        for node in ctx.coreml_nodes():
            if not crashes(node, ios) or ctx.dtype(node.tensor_inputs()[0]) != "float16":
                continue
            rms = node.target == "aten.rms_norm.default"
            yield ctx.finding(
                node,
                f"float16 {node.op_base} is delegated: lowering fails with `ValueError: In op "
                "... has dtype fp32 whereas x has dtype fp16` (or `gamma`: coremltools makes "
                "eps fp32)",
                fix="keep the norm in float32 (or hand-write RMSNorm: x * torch.rsqrt("
                "x.pow(2).mean(-1, keepdim=True) + eps) * weight)",
                partitioner=ctx.with_skip("rms_norm.default") if rms else ctx.skip_advice(node),
            )

    # float32 arithmetic inside the norm instead of float16: closer to exact, not equal.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Every float16 norm of these kinds computed in float32 and cast back: coremltools
        then pairs its fp32 eps with fp32 tensors, and the norm stays on Core ML (refusing it
        would split the partition around every norm). The hook does not know the target, so
        a weightless layer/instance norm at iOS17+ is widened too when another node fired:
        harmless, as float32 is closer to exact."""
        from coreml_lint.rulekit.fx import aten, finish, float16_in_float32

        norms = (
            aten.layer_norm.default,
            aten.rms_norm.default,
            aten.group_norm.default,
            aten.instance_norm.default,
        )
        done = float16_in_float32(ep, norms)
        return finish(ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """When the rewrite was not applied: rms_norm refused in the ATen graph is decomposed
        by torch; layer_norm, group_norm and instance_norm decompose to native_layer_norm,
        native_group_norm and _native_batch_norm_legit.no_stats, which the converter builds
        alike (measured for the last: the same fp32 ``add``)."""
        import torch

        from coreml_lint.rulekit.fx import op_base, touches

        norms = (
            "rms_norm",
            "layer_norm",
            "native_layer_norm",
            "group_norm",
            "native_group_norm",
            "instance_norm",
            "_native_batch_norm_legit",
        )
        if op_base(node) in norms and touches(node, {torch.float16}):
            return "float16 norm with an fp32 eps in Core ML"
        return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case(
    "rmsnorm-fp16-ios16",
    expect={"CML304"},
    settings={"ios": 16},
    crash=r"y has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.RMSNorm(16, eps=1e-6), torch.float16)


@case(
    "layernorm-fp16-ios16",
    expect={"CML304"},
    settings={"ios": 16},
    crash=r"epsilon has dtype fp32 whereas x has dtype fp16",
)
def _():
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8).half(),)


@case(
    "layernorm-affine-fp16-ios18",
    expect={"CML304"},
    settings={"ios": 18},
    crash=r"epsilon has dtype fp32 whereas gamma has dtype fp16",
)
def _():
    return wrapped(nn.LayerNorm(16), torch.float16)


@case("layernorm-fp16-ios18", settings={"ios": 18})
def _():
    # Without a weight the layer_norm op takes the fp32 eps from iOS17 on: lowers.
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8).half(),)


@case(
    "groupnorm-fp16-ios18",
    expect={"CML304"},
    settings={"ios": 18},
    crash=r"type add, .* y has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.GroupNorm(5, 5), torch.float16)


@case("groupnorm-fp32-ios18", settings={"ios": 18})
def _():
    return wrapped(nn.GroupNorm(5, 5))


@case(
    "instancenorm-affine-fp16-ios17",
    expect={"CML304"},
    settings={"ios": 17},
    crash=r"epsilon has dtype fp32 whereas gamma has dtype fp16",
)
def _():
    return wrapped(nn.InstanceNorm1d(5, affine=True), torch.float16)


@case("instancenorm-fp16-ios17", settings={"ios": 17})
def _():
    # Without a weight the instance_norm op takes the fp32 eps from iOS17 on: lowers.
    return wrapped(nn.InstanceNorm1d(5), torch.float16)


@case(
    "layernorm-fp16-aten-skip-ios16",
    expect={"CML304"},
    settings={"ios": 16, "skip": ["layer_norm.default"]},
    warnings=frozenset({"CML605"}),
    # The ATen-spelled entry decomposes layer_norm into native_layer_norm, still delegated.
    crash=r"aten_native_layer_norm_default.*epsilon has dtype fp32 whereas x has dtype fp16",
)
def _():
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8).half(),)


@case(
    "groupnorm-fp16-aten-skip-ios18",
    expect={"CML304"},
    settings={"ios": 18, "skip": ["group_norm.default"]},
    warnings=frozenset({"CML605"}),
    crash=r"y has dtype fp32 whereas x has dtype fp16",
)
def _():
    return wrapped(nn.GroupNorm(5, 5), torch.float16)

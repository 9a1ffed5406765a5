"""CML304 fp16-norm-eps: a float16 ``rms_norm`` or ``layer_norm`` in Core ML.

What it does
    Flags a delegated ``aten.rms_norm`` or ``aten.layer_norm`` whose input is float16.

Why it breaks
    coremltools builds the eps constant as fp32 and pairs it with the fp16 tensor:
    ``ValueError: In op, of type add, named aten_rms_norm_default_add_eps, the named input y
    must have the same data type as the named input x. However, y has dtype fp32 whereas x
    has dtype fp16.``. ``layer_norm`` fails the same way, measured here
    with iOS16: ``In op, of type layer_norm ... epsilon has dtype fp32 whereas x has dtype
    fp16``. Without eps rms_norm fails on the input count first (CML303); an fp16 program
    input also needs iOS16+ (CML106).

Example
    ``nn.RMSNorm(16, eps=1e-6).half()`` on an fp16 input.

Fix
    (a) keep the norm in float32, or hand-write it:
    ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``;
    (b) ``skip_ops_for_coreml_delegation=["rms_norm.default"]`` (ATen spelling: decomposed,
    and the pieces are delegated); (c) ``coreml-lint lower`` runs the norm in float32 and
    casts it back, inside Core ML (checked in eager at 1e-2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule


class RmsNormFp16(Rule):
    code = "CML304"
    name = "fp16-norm-eps"
    outcome = Outcome.CRASH
    summary = "float16 rms_norm/layer_norm in Core ML: fp32 eps paired with an fp16 tensor"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            rms = node.target == "aten.rms_norm.default" and len(node.args) >= 4
            if not rms and node.target != "aten.layer_norm.default":
                continue
            source = node.tensor_inputs()[0]
            if ctx.dtype(source) != "float16":
                continue
            yield ctx.finding(
                node,
                f"float16 {node.op_base} is delegated: lowering fails with `ValueError: In op "
                "... has dtype fp32 whereas x has dtype fp16` (coremltools makes eps fp32)",
                fix="hand-write RMSNorm: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)"
                " * weight, or keep the norm in float32",
                partitioner=ctx.with_skip("rms_norm.default") if rms else ctx.skip_advice(node),
            )

    # float32 arithmetic inside the norm instead of float16: closer to exact, not equal.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        """A float16 layer_norm/rms_norm computed in float32 and cast back: coremltools then
        pairs its fp32 eps with an fp32 tensor, and the norm stays on Core ML (refusing it
        would split the partition around every norm)."""
        import torch

        from coreml_lint.rulekit.fx import aten, finish, in_float32, val

        done = []
        for node in list(ep.graph.nodes):
            norms = (aten.layer_norm.default, aten.rms_norm.default)
            if node.target not in norms or getattr(val(node), "dtype", None) != torch.float16:
                continue
            norm = in_float32(ep, node)
            kind = norm.target.__name__.split(".")[0]
            done.append(f"{node.name}: float16 {kind} run in float32 and cast back")
        return finish(ep), done

    def refuse(self, node: Any) -> str | None:
        """When the rewrite was not applied: rms_norm refused in the ATen graph is decomposed
        by torch; layer_norm decomposes to native_layer_norm, which fails alike."""
        import torch

        from coreml_lint.rulekit.fx import op_base, touches

        norms = ("rms_norm", "layer_norm", "native_layer_norm")
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

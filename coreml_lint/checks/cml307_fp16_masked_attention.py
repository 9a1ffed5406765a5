"""CML307 fp16-masked-attention: float16 ``scaled_dot_product_attention`` with a mask below iOS18.

What it does
    Below iOS18, flags a delegated ``aten.scaled_dot_product_attention`` whose query is
    float16 and that is masked: an ``attn_mask`` (bool or float) or ``is_causal=True``.

Why it breaks
    Core ML has its own attention op only from iOS18. Below that, coremltools writes the
    attention out and builds the mask arithmetic with fp32 constants, which it then pairs
    with the fp16 scores: ``ValueError: In op, of type sub, named sub_0, the named input `y`
    must have the same data type as the named input `x`. However, y has dtype fp16 whereas x
    has dtype fp32.`` (``add_0`` for a float mask). Found by probing (not in pitfalls.md):
    every fp16 decoder that transformers builds with ``.half()`` (Llama, Qwen, ...) fails
    this way at the default target; the same attention in float32, unmasked, or at iOS18
    lowers.

Example
    ``F.scaled_dot_product_attention(q.half(), k.half(), v.half(), is_causal=True)``.

Fix
    (b) ``minimum_deployment_target=iOS18`` (Core ML's fused attention op); (a) run the
    attention in float32, or write it out:
    ``(q @ k.transpose(-2, -1) * scale).masked_fill(~mask, -inf).softmax(-1) @ v``;
    (c) ``coreml-lint lower`` writes it out in the program (unfused, checked in eager).
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome
from coreml_lint.program.graph import TensorRef


class Fp16MaskedAttention(Rule):
    code = "CML307"
    name = "fp16-masked-attention"
    outcome = Outcome.CRASH
    summary = "float16 masked or causal SDPA below iOS18: fp32 mask constants meet fp16 scores"
    lower_fixes = True  # `coreml-lint lower` writes the attention out

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 18:
            return
        for node in ctx.coreml_nodes():
            if node.target != "aten.scaled_dot_product_attention.default":
                continue
            query = node.arg(0, "query")
            if not isinstance(query, TensorRef) or ctx.dtype(query.name) != "float16":
                continue
            mask = node.arg(3, "attn_mask")
            causal = node.arg(5, "is_causal", False) is True
            if mask is None and not causal:
                continue
            what = "is_causal=True" if causal else "an attn_mask"
            yield ctx.finding(
                node,
                f"float16 scaled_dot_product_attention with {what} below iOS18: coremltools "
                "writes the mask arithmetic with fp32 constants and lowering fails with "
                "`ValueError: In op, of type sub, named sub_0, the named input `y` must have "
                "the same data type as the named input `x`` (fp16 against fp32)",
                fix="target iOS18, run the attention in float32, or write it out: "
                "softmax(q @ k.transpose(-2, -1) * scale + mask) @ v",
                partitioner={"minimum_deployment_target": 18},
            )

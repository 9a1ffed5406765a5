"""CML307 fp16-attention: float16 ``scaled_dot_product_attention`` that coremltools writes out
with fp32 constants.

What it does
    Flags a delegated ``aten.scaled_dot_product_attention`` whose query is float16 and that
    has an explicit ``scale=`` (any target), or, below iOS18, a mask: an ``attn_mask`` (bool
    or float) or ``is_causal=True``.

Why it breaks
    Core ML has its own attention op only from iOS18, and coremltools uses it only when no
    ``scale`` is given. Otherwise it writes the attention out, and builds the scale and the
    mask arithmetic as fp32 constants, which it then pairs with the fp16 scores:
    ``ValueError: In op, of type mul, named mul_0, the named input `y` must have the same
    data type as the named input `x`. However, y has dtype fp32 whereas x has dtype fp16.``
    (``sub_0`` / ``add_0`` for the masks). Found by probing: every fp16
    decoder transformers builds with ``.half()`` (Llama, Qwen2, GPT-2, BERT, ...) passes
    ``scale=`` and fails this way at every target. The same attention in float32, or in
    fp16 without ``scale`` (unmasked, or masked at iOS18), lowers.

Example
    ``F.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=0.125)``.

Fix
    (a) drop ``scale=`` when it is the default ``1/sqrt(head_dim)`` (or scale ``q``
    first), and target iOS18 for masked attention; run the attention in float32; or write
    it out: ``(q @ k.transpose(-2, -1) * scale).masked_fill(~mask, -inf).softmax(-1) @ v``;
    (b) ``coreml-lint lower`` writes it out in the program (unfused, checked in eager).

References
    - https://github.com/apple/coremltools/pull/2864
      an explicit `scale` sends SDPA to the matmul/softmax decomposition instead of the iOS18
      fused op (open)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch
from coreml_lint.rulekit.rule import Rule


class Fp16Attention(Rule):
    code = "CML307"
    name = "fp16-attention"
    outcome = Outcome.CRASH
    summary = "float16 SDPA with scale=, or masked below iOS18: fp32 constants meet fp16"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        below_ios18 = ctx.settings.minimum_deployment_target < 18
        for node in ctx.coreml_nodes():
            if node.target != "aten.scaled_dot_product_attention.default":
                continue
            query = node.arg(0, "query")
            if not isinstance(query, TensorRef) or ctx.dtype(query.name) != "float16":
                continue
            scaled = node.arg(6, "scale") is not None
            masked = node.arg(3, "attn_mask") is not None or node.arg(5, "is_causal") is True
            if scaled:
                what, op = "an explicit scale=", "mul, named mul_0"
            elif masked and below_ios18:
                what, op = "a mask (attn_mask or is_causal) below iOS18", "sub, named sub_0"
            else:
                continue
            yield ctx.finding(
                node,
                f"float16 scaled_dot_product_attention with {what}: coremltools writes the "
                f"attention out with fp32 constants and lowering fails with `ValueError: In "
                f"op, of type {op}, the named input `y` must have the same data type as the "
                "named input `x`` (fp32 against fp16)",
                fix="drop scale= when it is 1/sqrt(head_dim), run the attention in float32, "
                "or write it out: softmax(q @ k.transpose(-2, -1) * scale + mask) @ v",
                partitioner=None if scaled else {"minimum_deployment_target": 18},
            )

    # Unfused fp16 attention rounds differently from torch's fused kernel: about 2e-3 seen.
    rewrite_tolerance = 1e-2

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        from coreml_lint.rulekit.fx import aten, decompose

        sdpa = aten.scaled_dot_product_attention.default
        nodes = [n for n in ep.graph.nodes if n.target == sdpa]
        return decompose(ep, nodes, {sdpa: attention_written_out}, "attention written out")


def attention_written_out(
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """``scaled_dot_product_attention`` as the math torch documents for it (inference: no
    dropout). coremltools converts these ops in fp16 without fp32 mask constants."""
    import torch

    scale = q.size(-1) ** -0.5 if scale is None else scale
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    out = scores.softmax(-1) @ v
    if out.dim() == 4:  # the fused kernel's layout, (B, L, H, E) in memory, which later
        # views of the exported graph rely on (attn.transpose(1, 2).view(B, L, -1))
        out = out.transpose(1, 2).contiguous().transpose(1, 2)
    return out


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def attention(dtype: torch.dtype, mask: str, scale: float | None = None) -> nn.Module:
    """Self-attention on ``x`` cast to ``dtype``, masked the way decoders mask it, with the
    explicit ``scale=`` transformers passes when ``scale`` is given."""

    def forward(s, x):
        q = x.to(dtype)
        n = q.shape[-2]
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
        kw: dict[str, Any] = {} if scale is None else {"scale": scale}
        if mask == "causal":
            kw["is_causal"] = True
        elif mask == "bool":
            kw["attn_mask"] = causal
        elif mask == "float":
            kw["attn_mask"] = torch.zeros(n, n, dtype=dtype).masked_fill(~causal, float("-inf"))
        return F.scaled_dot_product_attention(q, q, q, **kw).float()

    return module(forward)


def heads() -> tuple[Any, ...]:
    return (torch.randn(1, 2, 6, 8),)


SDPA_FP16_CRASH = r"In op, of type (sub|add|mul), named (sub|add|mul)_\d+.*dtype fp\d+ whereas"
for _mask in ("causal", "bool", "float"):
    case(f"fp16-sdpa-{_mask}-mask", expect={"CML307"}, crash=SDPA_FP16_CRASH)(
        lambda m=_mask: (attention(torch.float16, m), heads())
    )
case("fp16-sdpa-causal-ios18", expect=set(), settings={"ios": 18})(
    lambda: (attention(torch.float16, "causal"), heads())
)
case("fp16-sdpa-unmasked", expect=set())(lambda: (attention(torch.float16, "none"), heads()))
case("fp32-sdpa-causal", expect=set())(lambda: (attention(torch.float32, "causal"), heads()))
case("fp16-sdpa-scale", expect={"CML307"}, crash=r"In op, of type mul, named mul_\d+.*dtype fp")(
    lambda: (attention(torch.float16, "none", scale=0.25), heads())
)
case(
    "fp16-sdpa-scale-causal-ios18",
    expect={"CML307"},
    settings={"ios": 18},
    crash=SDPA_FP16_CRASH,
)(lambda: (attention(torch.float16, "causal", scale=0.25), heads()))
case("fp32-sdpa-scale", expect=set())(lambda: (attention(torch.float32, "bool", 0.25), heads()))

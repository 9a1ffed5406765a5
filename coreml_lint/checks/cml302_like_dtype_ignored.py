"""CML302 like-dtype-ignored: ``zeros_like``/``ones_like``/``empty_like`` with another dtype.

What it does
    Flags a delegated ``zeros_like(x, dtype=...)``, ``ones_like(x, dtype=...)`` or
    ``empty_like(x, dtype=...)`` whose dtype differs from ``x``'s. ``nn.MultiheadAttention``
    makes exactly this from a bool ``attn_mask``: ``zeros_like(mask, dtype=float32)``.

Why it breaks
    Export passes ``dtype=`` as a keyword and coremltools' handlers read only positional
    inputs (pitfalls.md G2), so the result keeps ``x``'s dtype. For MHA's bool mask the
    "float" mask stays bool, is then read as a bool SDPA mask where True means *attend*, and
    the mask ends up **inverted** (row 0 ``[-30000, 0, 0, 0, 0]`` instead of
    ``[0, -inf, -inf, -inf, -inf]``). With ``need_weights=True`` lowering crashes instead:
    ``y has dtype fp32 whereas x has dtype bool`` (pitfalls.md §11).

Example
    ``self.mha(q, q, q, attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))``

Fix
    (a) build the float mask yourself:
    ``torch.zeros(mask.shape, dtype=q.dtype).masked_fill(mask, float("-inf"))`` or
    ``torch.where(mask, float("-inf"), 0.0)``, or pass a float additive mask; (c) rewrite
    ``*_like(dtype=...)`` into ``aten.full(shape, value, dtype=...)``.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome
from coreml_lint.program.graph import DType

LIKE_OPS = {"zeros_like", "ones_like", "empty_like"}


class LikeDtypeIgnored(Rule):
    code = "CML302"
    name = "like-dtype-ignored"
    outcome = Outcome.SILENT
    summary = "*_like(x, dtype=other) keeps x's dtype in Core ML (MHA bool mask inverted)"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.op_base not in LIKE_OPS or node.namespace != "aten":
                continue
            wanted = node.kwargs.get("dtype")
            source = node.tensor_inputs()[0] if node.tensor_inputs() else None
            have = ctx.dtype(source)
            if not isinstance(wanted, DType) or have is None or wanted.name == have:
                continue
            from_mha = "multi_head_attention" in (node.stack_trace or "") or (
                "activation.py" in (node.stack_trace or "")
            )
            mask_note = (
                " nn.MultiheadAttention built this from a bool attn_mask, so the additive mask "
                "ends up inverted (blocked positions attend, allowed ones are masked)"
                if from_mha or (have == "bool" and wanted.name.startswith("float"))
                else ""
            )
            yield ctx.finding(
                node,
                f"{node.op_base}('{source}', dtype={wanted.name}) stays {have} in Core ML: "
                f"coremltools ignores the keyword dtype.{mask_note}",
                fix=(
                    "pass a float additive mask, or build it as "
                    "`torch.zeros(mask.shape, dtype=q.dtype).masked_fill(mask, float('-inf'))`"
                    if have == "bool"
                    else f"use torch.full({source}.shape, value, dtype=torch.{wanted.name})"
                ),
                partitioner=ctx.skip_advice(node),
                dtype=wanted.name,
            )

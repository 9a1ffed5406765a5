"""CML302 like-dtype-ignored: ``zeros_like``/``empty_like``/``full_like`` with another dtype.

What it does
    Flags a delegated ``zeros_like(x, dtype=...)``, ``empty_like(x, dtype=...)`` or
    ``full_like(x, <int>, dtype=<float>)`` whose dtype differs from ``x``'s, when values are then
    written into the result (``masked_fill``, ``fill_``, ``index_put``, ``where``, a copy).
    ``nn.MultiheadAttention`` does exactly this with a bool ``attn_mask``:
    ``zeros_like(mask, dtype=float32).masked_fill_(mask, -inf)``. Plain arithmetic on the
    result is not flagged: coremltools folds ``zeros_like(xi, dtype=float) + 0.5`` to the
    right constant, so the lost dtype changes nothing there. ``ones_like`` honours its dtype
    (checked), and ``full_like`` takes the type of its fill value.

Why it breaks
    Export passes ``dtype=`` as a keyword and coremltools' ``zeros_like``/``empty_like`` handlers
    read only positional inputs (docs/background.md#keyword-arguments), so the result keeps ``x``'s
    dtype; ``full_like`` makes its fill with the fill value's type. A float written into the result
    is then truncated to bool or int. For MHA's bool mask the "float" mask stays bool, is then read
    as a bool SDPA mask where True means *attend*, and the mask ends up **inverted** (row 0
    ``[-30000, 0, 0, 0, 0]`` instead of ``[0, -inf, -inf, -inf, -inf]``). With ``need_weights=True``
    lowering crashes instead: ``y has dtype fp32 whereas x has dtype bool``.

Example
    ``self.mha(q, q, q, attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))``

Fix
    (a) build the float mask yourself:
    ``torch.zeros(mask.shape, dtype=q.dtype).masked_fill(mask, float("-inf"))`` or
    ``torch.where(mask, float("-inf"), 0.0)``, or pass a float additive mask; (b) rewrite
    ``*_like(dtype=...)`` into ``aten.full(shape, value, dtype=...)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix
from coreml_lint.program.graph import FLOAT_DTYPES, DType
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, nn, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, keyword
from coreml_lint.source.patterns import enclosing_class, enclosing_function, is_bool, is_simple

LIKE_OPS = {"zeros_like", "empty_like", "full_like"}
# Ops that write values into their first argument: their result keeps its dtype, so a bool
# or integer tensor silently truncates the float values written into it.
WRITERS = {"masked_fill", "fill", "index_put", "copy", "slice_scatter", "select_scatter", "where"}


MHA_BOOL_MASK = """
class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, q):
        mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
        return self.mha(q, q, q, attn_mask=mask, need_weights=False)[0]
"""
MHA_BOOL_MASK_FIXED = MHA_BOOL_MASK.replace(
    "attn_mask=mask,",
    'attn_mask=torch.zeros(mask.shape, device=mask.device).masked_fill(mask, float("-inf")),',
)


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
            if node.op_base == "full_like":
                value = node.arg(1, "fill_value")
                made = "float" if isinstance(value, float) else "int"
                if made == ("float" if wanted.name in FLOAT_DTYPES else "int"):
                    continue
                have = "int32" if made == "int" else "float16"
            written = [
                u
                for u in ctx.users.get(node.outputs[0], [])
                if u.op_base in WRITERS and ctx.on_coreml(u)
            ]
            if not written:
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

    source_triggers = ("MultiheadAttention",)
    source_pattern = "`nn.MultiheadAttention(...)(..., attn_mask=<bool>)`"
    source_fix = "a float additive mask built in the model"
    examples = (
        Invalid(MHA_BOOL_MASK, MHA_BOOL_MASK_FIXED),
        Valid(MHA_BOOL_MASK.replace("attn_mask=mask", "attn_mask=None")),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            func = call.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                continue
            cls = enclosing_class(ctx, call)
            if cls is None or func.attr not in _mha_attributes(ctx, cls):
                continue
            scope = enclosing_function(ctx, call)
            for name in ("attn_mask", "key_padding_mask"):
                mask = keyword(call, name)
                if mask is None or not is_bool(ctx, mask, scope):
                    continue
                yield ctx.finding(
                    mask,
                    f"nn.MultiheadAttention gets a bool {name}: it becomes "
                    "zeros_like(mask, dtype=float).masked_fill(mask, -inf), coremltools keeps "
                    "the zeros bool, and the Core ML mask ends up inverted",
                    fix="pass a float additive mask: torch.zeros(mask.shape).masked_fill(mask, "
                    "float('-inf'))",
                    edit=ctx.edit_expression(
                        mask, safe=True, description="float additive mask built in the model"
                    )
                    if is_simple(mask)
                    else None,
                )

    def transform(self, fix: SourceFix, node: Any, edits: Any) -> Any:
        import libcst as cst

        from coreml_lint.rulekit.cst import code

        torch = edits.torch()
        mask = code(node)
        return cst.parse_expression(
            f'{torch}.zeros({mask}.shape, device={mask}.device).masked_fill({mask}, float("-inf"))'
        )

    def rewrite(self, ep: Any) -> tuple[Any, list[str]]:
        from coreml_lint.rules.cml301_fill_dtype_ignored import integer_fills

        return integer_fills(ep, likes=True)

    def refuse(self, node: Any) -> str | None:
        """A like-op the rewrite could not replace runs on the CPU."""
        from coreml_lint.rulekit.fx import op_base

        if op_base(node) in LIKE_OPS and "dtype" in node.kwargs:
            return "*_like with a dtype coremltools ignores"
        return None


def _mha_attributes(ctx: SourceContext, cls: ast.ClassDef) -> set[str]:
    """``self.<name>`` attributes the class assigns an ``nn.MultiheadAttention`` to."""
    cache = ctx.memo.setdefault("mha_attributes", {})
    if cls not in cache:
        cache[cls] = {
            target.attr
            for node in ast.walk(cls)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ctx.qualname(node.value.func) == "torch.nn.MultiheadAttention"
            for target in node.targets
            if isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        }
    return cache[cls]


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def mha(mask: torch.Tensor, need_weights: bool = False) -> nn.Module:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
            self.register_buffer("mask", mask)

        def forward(self, q):
            return self.mha(q, q, q, attn_mask=self.mask, need_weights=need_weights)[0]

    return M().eval()


def causal() -> Any:
    return torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)


def causal_mask_row0(lowered: Any) -> list[float] | None:
    """Row 0 of the additive attention mask folded into a MIL constant, if any."""
    for delegate in lowered.delegates:
        for value in delegate.consts.values():
            shape = getattr(value, "shape", ())
            if len(shape) >= 2 and shape[-2:] == (5, 5):
                return [float(v) for v in value.reshape(-1, 5, 5)[0, 0]]
    return None


def inverted_mask(lowered: Any) -> bool:
    row = causal_mask_row0(lowered)
    return row is not None and row[0] < -1000 and all(v == 0 for v in row[1:])


def causal_row0(lowered: Any) -> bool:
    row = causal_mask_row0(lowered)
    return row is not None and row[0] == 0 and all(v < -1000 for v in row[1:])


@case("mha-bool-mask", expect={"CML302"}, silent=inverted_mask)
def _():
    return mha(causal()), (torch.randn(1, 5, 16),)


@case("mha-bool-mask-need-weights", expect={"CML302"}, crash=r"whereas x has dtype bool")
def _():
    return mha(causal(), need_weights=True), (torch.randn(1, 5, 16),)


@case(
    "mha-bool-key-padding-mask",
    expect={"CML302"},
    silent=returns(r"\(1, 5, bool\)\(Tensor\) = select"),
)
def _():
    attention = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    forward = lambda s, q, pad: attention(q, q, q, key_padding_mask=pad, need_weights=False)[0]  # noqa: E731
    return module(forward), (
        torch.randn(1, 5, 16),
        torch.tensor([[False, False, False, True, True]]),
    )


@case("mha-float-mask", expect=set(), clean=causal_row0)
def _():
    return mha(torch.zeros(5, 5).masked_fill(causal(), float("-inf"))), (torch.randn(1, 5, 16),)


def like_masked_fill(like: Callable[..., torch.Tensor]) -> tuple[nn.Module, tuple[Any, ...]]:
    def forward(s, x):
        m = x > 0
        return like(m, dtype=torch.float32).masked_fill(m, 0.25) * x

    return module(forward), (torch.randn(2, 4),)


@case("zeros-like-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, bool\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.zeros_like)


@case("empty-like-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, bool\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.empty_like)


@case(
    "full-like-int-masked-fill", expect={"CML302"}, silent=returns(r"\(2, 4, int32\)[^\n]*= select")
)
def _():
    return like_masked_fill(lambda m, dtype: torch.full_like(m, 0, dtype=dtype))


@case("full-like-float-masked-fill", expect=set(), clean=returns(r"\(2, 4, fp16\)[^\n]*= select"))
def _():
    return like_masked_fill(lambda m, dtype: torch.full_like(m, 0.0, dtype=dtype))


@case("ones-like-masked-fill", expect=set(), clean=returns(r"\(2, 4, fp16\)[^\n]*= select"))
def _():
    return like_masked_fill(torch.ones_like)


@case("ones-like-other-dtype-arithmetic", expect=set())
def _():
    # The kept int32 dtype does not change this result: coremltools folds 1 * 0.5 to 0.5.
    return module(lambda s, xi, x: torch.ones_like(xi, dtype=torch.float32) * 0.5 + x), (
        torch.ones(2, 4, dtype=torch.int32),
        torch.randn(2, 4),
    )

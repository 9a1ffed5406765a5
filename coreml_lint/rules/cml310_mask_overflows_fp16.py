"""CML310 mask-overflows-fp16: an attention mask value beyond float16's range, on rows that can be
fully masked.

What it does
    Flags a delegated fill of an attention mask with a value float16 cannot hold (below
    -65504, typically ``torch.finfo(torch.float32).min``: ``masked_fill``, ``where``,
    ``full``) that reaches a softmax or the ``attn_mask`` of an attention op in Core ML,
    when which positions are masked depends on a program input (a padding mask), so that a
    row can have every position masked; and a padding mask *scaled* by such a value
    (transformers' older extended mask, ``(1.0 - mask) * torch.finfo(torch.float32).min``)
    on its way to a softmax. A mask filled with ``float("-inf")`` itself gets a warning where
    it reaches ``scaled_dot_product_attention`` (whether a row is ever fully masked depends
    on the masks a model is given): a plain softmax of a fully masked row is NaN in eager
    too, but torch's attention gives that row zeros.

    Which rows a fill's condition can mask whole is evaluated where it can be
    (``coreml_lint/program/maskrows.py``: the mask computed in pure Python with its inputs
    set to right- and left-padding patterns and to lengths): a causal mask with a length
    mask (``arange(t) < lengths``) or a key-padding mask alone masks whole rows only for an
    empty sequence, a warning; left padding under a causal mask, or padding applied to the
    query rows too, masks rows of a sequence with tokens, an error; a mask that keeps a
    position in every row, nothing. The inputs are probed with right- and left-padding
    patterns, an empty first or last row, seeded random patterns and, for integers, the pad
    ids the mask compares with and lengths. A mask it cannot judge keeps the error: another
    op, a float input or three inputs, a long sequence, a softmax over another axis, or
    another mask on the same scores (a second such fill, or a float mask the model holds,
    such as a causal ``triu`` of -inf in a buffer).

Why it breaks
    Core ML computes in float16 by default, where -3.4e38 becomes -inf. A row whose every
    position is masked (a left-padded batch) then holds only -inf, and its softmax is
    0/0 = NaN; in eager the same row holds the same finite value everywhere and comes out
    uniform. Found by ``coreml-lint verify`` (32 NaNs on a two-sequence padded batch). A
    scaled mask is worse: every kept position holds 0 * -inf = NaN, so every row is NaN.
    With ``-inf`` itself, torch's ``scaled_dot_product_attention`` (its ``_safe_softmax``)
    returns zeros for a fully masked row, and Core ML's softmax still computes 0/0 = NaN
    (``coreml-lint verify``: 16 NaNs on the same batch). NaN in a padded row is not
    harmless: the next attention layer multiplies it by a weight of 0, and 0 * NaN is NaN.

Example
    ``scores.masked_fill(~attention_mask.bool(), torch.finfo(torch.float32).min)``

On model source
    Without an export it flags ``masked_fill``/``torch.where`` with
    ``torch.finfo(torch.float32).min`` (or a literal below -65504) whose mask comes from a
    parameter of the function and whose result reaches a softmax or an SDPA ``attn_mask``
    in the same function (``coreml_lint/source/masks.py``). ``torch.finfo(x.dtype).min``
    and masks built from sizes or buffers only (causal masks) are not flagged.

Fix
    (a) mask with a value float16 holds, e.g. ``-30000.0`` (what coremltools itself uses for
    bool masks; exp() of it is exactly 0 in float32 as well), or pass a bool mask to
    ``scaled_dot_product_attention``; (b) ``coreml-lint lower`` rewrites the fill value to
    -30000 (checked: the eager outputs are equal). For ``-inf`` into attention, mask with
    -30000 too (a fully masked row then averages its values: finite, as padding may be) or
    zero those rows of the output; ``lower`` does not rewrite it, since eager's zeros would
    change.

References
    - https://github.com/apple/coremltools/pull/2669
      fix fp16 NaN from out-of-range fp32 sentinels such as finfo(float32).min masks (merged
      after 9.0)
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.program.maskrows import NEVER, WHOLE, masked_rows
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, Invalid, Valid, case, module, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext
from coreml_lint.source.masks import overflowing_mask_fills

FP16_MAX = 65504.0
SAFE_MASK_VALUE = -30000.0
# fill op -> position of its scalar value
FILLS = {
    "aten.masked_fill.Scalar": 2,
    "aten.full.default": 1,
    "aten.full_like.default": 1,
    "aten.fill.Scalar": 1,
    "aten.where.ScalarOther": 2,
    "aten.where.ScalarSelf": 1,
}
# ``torch.where(cond, finfo.min, 0.0)`` takes both branches as numbers: the mask value is
# whichever of them float16 cannot hold
BOTH = {"aten.where.Scalar": (1, 2)}
# fill op -> position of the condition that says which positions are masked
CONDITIONS = {
    "aten.masked_fill.Scalar": 1,
    "aten.where.ScalarOther": 0,
    "aten.where.ScalarSelf": 0,
    "aten.where.Scalar": 0,
}
SOFTMAXES = {"softmax", "_softmax", "_safe_softmax", "scaled_dot_product_attention"}
# A mask *scaled* by the value (transformers' older extended mask, ``(1.0 - mask) *
# finfo.min``): op -> position of its number. Where the mask is 0 (every kept position),
# float16's -inf makes 0 * -inf = NaN.
SCALES = {"aten.mul.Tensor": 1, "aten.mul.Scalar": 1}
# coremltools takes a constant this large for an infinity (``FP16ComputePrecision``): the op
# still runs in float16, with the constant -inf; a smaller one past 65504 keeps the op in
# float32, whose result then passes float16 only where the mask is set (a fill's effect).
INFINITE = 1e38


# Attention that gives a fully masked row zeros in eager (torch's SDPA runs ``_safe_softmax``);
# Core ML's softmax of it is 0/0 = NaN.
SAFE_SOFTMAXES = {"scaled_dot_product_attention", "_safe_softmax"}


def _value_position(target: str, args: Any) -> int | None:
    """Where a fill or scale op holds its mask value (of ``BOTH``'s two numbers, the one
    past float16's range or -inf), or None for another op."""
    if target in BOTH:
        return next(
            (
                p
                for p in BOTH[target]
                if len(args) > p and (_past_float16(args[p]) or _minus_infinity(args[p]))
            ),
            None,
        )
    return FILLS.get(target, SCALES.get(target))


def _minus_infinity(value: object) -> bool:
    return isinstance(value, float) and math.isinf(value) and value < 0


def _past_float16(value: object) -> bool:
    """A finite number float16 cannot hold. An infinity (``float("-inf")``, the usual mask)
    is the same value in float16 as in eager: a fully masked row is NaN in both."""
    return isinstance(value, (int, float)) and math.isfinite(value) and abs(value) > FP16_MAX


class MaskOverflowsFp16(Rule):
    code = "CML310"
    name = "mask-overflows-fp16"
    other_severities = (Severity.WARNING,)  # -inf into attention: see ``_infinite_fill``
    outcome = Outcome.SILENT
    summary = (
        "attention mask value beyond float16 (finfo.min), or -inf into SDPA: fully masked "
        "rows become NaN"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        # a fill torch decomposes (where.ScalarOther becomes where.self with the number a
        # tensor) puts the same value in Core ML's select
        for node in ctx.coreml_nodes(include_decomposed=True):
            position = _value_position(node.target, node.args)
            value = node.arg(position, "value") if position is not None else None
            # -inf from a fill with a condition (masked_fill, where): a ``full_like(s, -inf)``
            # holds -inf everywhere, and which positions stay masked is decided after it
            infinite = node.target in CONDITIONS and _minus_infinity(value)
            if not (_past_float16(value) or infinite):
                continue
            softmax = next(
                (u for _, u in ctx.coreml_users_downstream(node.outputs) if u.op_base in SOFTMAXES),
                None,
            )
            if softmax is None or not _masks_depend_on_inputs(ctx, node):
                continue
            if infinite:
                if softmax.op_base in SAFE_SOFTMAXES:
                    yield self._infinite_fill(ctx, node, softmax)
                continue  # a plain softmax of a fully masked row is NaN in eager as well
            if node.target in SCALES and not _scales_a_mask(ctx, node):
                continue
            if node.target in SCALES and abs(value) >= INFINITE:
                inf, safe = ("-inf", SAFE_MASK_VALUE) if value < 0 else ("inf", -SAFE_MASK_VALUE)
                yield ctx.finding(
                    node,
                    f"mul scales an attention mask by {value:g}, beyond float16's range: Core "
                    f"ML makes it {inf}, and a kept position (mask 0) becomes 0 * {inf} = NaN, "
                    f"so every row comes out NaN from {ctx.edge_name(softmax)} (finite in eager)",
                    fix=f"scale by {safe:g} (float16 holds it; exp() of -30000 is 0), or pass a "
                    "bool mask to scaled_dot_product_attention",
                    value=value,
                    shows_at=softmax,
                )
                continue
            rows = _rows_masked(ctx, node, position, softmax)
            if rows == NEVER:
                continue  # every row keeps a position, whatever the inputs say
            if rows == WHOLE:
                yield ctx.finding(
                    node,
                    f"{node.op_base} fills an attention mask with {value:g}, beyond float16's "
                    "range: Core ML makes it -inf, and where a sequence is empty (every "
                    f"position masked) its rows come out NaN from {ctx.edge_name(softmax)} "
                    "(finite in eager); a sequence with a token keeps a position in every "
                    "row (its mask, evaluated on padding patterns and lengths)",
                    fix=f"mask with {SAFE_MASK_VALUE:g} (float16 holds it; exp() of it is 0), "
                    "or never pass an empty sequence",
                    severity=Severity.WARNING,
                    value=value,
                    shows_at=softmax,
                )
                continue
            verb = (
                "scales an attention mask by"
                if node.target in SCALES
                else "fills an attention mask with"
            )
            yield ctx.finding(
                node,
                f"{node.op_base} {verb} {value:g}, beyond float16's range: "
                f"Core ML makes it -inf, so a row whose every position is masked (a padded "
                f"batch) comes out NaN from {ctx.edge_name(softmax)} (finite in eager)",
                fix=f"mask with {SAFE_MASK_VALUE:g} (float16 holds it; exp() of it is 0), or pass "
                "a bool mask to scaled_dot_product_attention",
                value=value,
                shows_at=softmax,
            )

    def _infinite_fill(self, ctx: ProgramContext, node: Any, attention: Any) -> Finding:
        return ctx.finding(
            node,
            f"{node.op_base} fills an attention mask with -inf: where a row has every position "
            "masked (left padding under a causal mask, a sequence of padding only) it comes "
            f"out NaN from Core ML's {ctx.edge_name(attention)}, where torch's "
            "scaled_dot_product_attention gives it zeros (its safe softmax), and the NaN "
            "can reach every row through a later attention layer; whether a row is ever "
            "fully masked depends on your masks",
            fix=f"mask with {SAFE_MASK_VALUE:g} (a fully masked row then averages its values, "
            "finite, as padding may), or zero the fully masked rows of the output yourself",
            severity=Severity.WARNING,
            value=float("-inf"),
            shows_at=attention,
        )

    source_triggers = ("finfo", "e9", "e10", "e38")
    source_pattern = (
        "`scores.masked_fill(~pad_mask, torch.finfo(torch.float32).min)` (a mask from an "
        "argument) reaching a softmax"
    )
    source_fix = "mask with `-30000.0`, or pass a bool mask to SDPA"
    examples = (
        Invalid(
            "def attend(q, k, pad):\n"
            "    s = q @ k.transpose(-1, -2)\n"
            "    s = s.masked_fill(pad == 0, torch.finfo(torch.float32).min)\n"
            "    return s.softmax(-1)\n",
            at=(3, 9),
        ),
        Invalid(
            "def attend(q, k, v, keep):\n"
            "    bias = torch.where(keep.bool(), 0.0, -1e9)\n"
            "    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)\n",
            at=(2, 12),
        ),
        Valid(
            "def attend(q, k, pad):\n"
            "    s = q @ k.transpose(-1, -2)\n"
            "    s = s.masked_fill(pad == 0, -30000.0)\n"
            "    return s.softmax(-1)\n"
        ),
        Valid(
            "def attend(q, k):\n"
            "    t = q.shape[-2]\n"
            "    causal = torch.ones(t, t, dtype=torch.bool).triu(1)\n"
            "    s = q @ k.transpose(-1, -2)\n"
            "    s = s.masked_fill(causal, torch.finfo(torch.float32).min)\n"
            "    return s.softmax(-1)\n"
        ),
        Valid(
            "def attend(q, k, pad):\n"
            "    s = q @ k.transpose(-1, -2)\n"
            "    return s.masked_fill(pad == 0, torch.finfo(s.dtype).min)\n"
        ),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call, value in overflowing_mask_fills(ctx):
            yield ctx.finding(
                call,
                f"fills an attention mask with {ast.unparse(value)}, beyond float16's range, and "
                "the mask comes from an argument: Core ML computes in float16 and makes it "
                "-inf, so a row whose every position is masked (a padded batch) comes out NaN "
                "from the softmax (finite in eager)",
                fix=f"mask with {SAFE_MASK_VALUE:g} (float16 holds it; exp() of it is 0), or "
                "pass a bool mask to scaled_dot_product_attention",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Fill and scale values beyond float16 that reach a softmax become 30000 of the same
        sign (a mask subtracted with ``+1e9`` stays subtracted). exp() of -30000 and of the
        value's -inf are both exactly 0 in float32, so every row with a position left
        unmasked computes the same in eager; a fully masked row (padding) gives the softmax
        of its scores instead of a uniform one, where Core ML gave NaN. A scale is rewritten
        only where it scales a 0/1 mask (:func:`_fx_scales_a_mask`), as the check says."""
        from coreml_lint.rulekit.fx import finish, op_base, reaches

        done = []
        for node in ep.graph.nodes:
            name = f"aten.{getattr(node.target, '__name__', '')}"
            position = _value_position(name, node.args)
            if position is None or len(node.args) <= position:
                continue
            value = node.args[position]
            if not _past_float16(value):
                continue
            if not reaches(node, lambda user: op_base(user) in SOFTMAXES):
                continue
            if name in SCALES and not _fx_scales_a_mask(node):
                continue
            safe = math.copysign(-SAFE_MASK_VALUE, value)
            node.args = (*node.args[:position], safe, *node.args[position + 1 :])
            done.append(
                f"{node.name}: mask value {value:g} written as {safe:g} (checked equal on "
                "inputs without a fully masked row; such a row is no longer NaN)"
            )
        return finish(ep), done

    def check_inputs(self, inputs: Any) -> Any:
        """The rewrite's promise is about rows with an unmasked position: check it with no
        padding (every 0/1 mask input all ones)."""
        import torch

        args, kwargs = inputs

        def unpadded(value: Any) -> Any:
            mask_like = (
                isinstance(value, torch.Tensor)
                and not value.is_floating_point()
                and bool(((value == 0) | (value == 1)).all())
            )
            return torch.ones_like(value) if mask_like else value

        return tuple(map(unpadded, args)), {k: unpadded(v) for k, v in kwargs.items()}


# What a mask passes through on its way into the scores (views, casts, arithmetic with a
# number or another mask): walked upstream from the softmax, stopping at the scores' product.
MASK_PATH = {
    "add", "sub", "mul", "div", "masked_fill", "where", "view", "reshape", "_unsafe_view",
    "expand", "unsqueeze", "squeeze", "_to_copy", "to", "clone", "contiguous", "alias",
    "slice", "select", "permute", "transpose", "repeat", "cat",
}  # fmt: skip


def _rows_masked(ctx: ProgramContext, fill: Node, position: int, softmax: Node) -> str | None:
    """Which rows the fill's condition can mask whole (``program/maskrows.py``), where it is
    the only mask of ``softmax``'s rows over its last axis; None where that cannot be told:
    the softmax runs over another axis, or another mask reaches the same scores (another
    fill past float16 or of -inf, or a float mask held in a buffer or constant, such as a
    causal ``triu`` of -inf: it masks more positions of the same rows)."""
    condition = CONDITIONS.get(fill.target)
    if condition is None or len(fill.args) <= condition:
        return None
    operand = fill.args[condition]
    if not isinstance(operand, TensorRef) or not _over_last_axis(ctx, softmax):
        return None
    for node in _mask_path(ctx, softmax):
        if node is fill:
            continue
        spot = _value_position(node.target, node.args)
        value = node.arg(spot, "value") if spot is not None else None
        if _past_float16(value) or _minus_infinity(value):
            return None
        for name in node.tensor_inputs():
            kind = ctx.input_kinds.get(name)
            if kind not in (None, "user_input") and ctx.dtype(name) in FLOAT_DTYPES:
                return None  # a mask held in the model
    # masked_fill and where(cond, value, x) mask where the condition holds, where(cond, x,
    # value) where it does not
    where_not = fill.op_base == "where" and position == 2
    return masked_rows(ctx.graph, operand.name, masked_when=not where_not)


FLOAT_DTYPES = {"float16", "float32", "float64", "bfloat16"}


def _over_last_axis(ctx: ProgramContext, softmax: Node) -> bool:
    if softmax.op_base in SAFE_SOFTMAXES:
        return True  # attention's softmax is over the keys, the last axis
    dim = softmax.arg(1, "dim")
    source = softmax.tensor_inputs()[0] if softmax.tensor_inputs() else None
    shape = ctx.shape(source) if source else None
    return isinstance(dim, int) and shape is not None and dim in (-1, len(shape) - 1)


def _mask_path(ctx: ProgramContext, softmax: Node, limit: int = 256) -> list[Node]:
    """The nodes upstream of the softmax's scores (an attention's mask) through
    :data:`MASK_PATH` ops, stopping at anything else (the scores' product)."""
    found: list[Node] = []
    seen: set[str] = set()
    frontier = list(softmax.tensor_inputs())
    if softmax.op_base == "scaled_dot_product_attention":
        mask = softmax.arg(3, "attn_mask")
        frontier = [mask.name] if isinstance(mask, TensorRef) else []
    while frontier and len(found) < limit:
        node = ctx.producers.get(frontier.pop())
        if node is None or node.name in seen or node.op_base not in MASK_PATH:
            continue
        seen.add(node.name)
        found.append(node)
        frontier.extend(node.tensor_inputs())
    return found


def _masks_depend_on_inputs(ctx: ProgramContext, fill: Node) -> bool:
    """Whether which positions the fill masks depends on a program input: its condition
    (``masked_fill``'s mask, ``where``'s condition), else its tensor operands, followed up
    to the inputs. The scores a causal mask is filled into depend on the inputs, but which
    positions it masks does not: no row of a causal mask is fully masked."""
    condition = CONDITIONS.get(fill.target)
    operands = fill.args if condition is None else fill.args[condition : condition + 1]
    return ctx.computed_from_input([a.name for a in operands if isinstance(a, TensorRef)])


# Ops a 0/1 mask passes through on its way to being scaled (``1.0 - mask[:, None].float()``).
MASK_STEPS = {
    "_to_copy", "to", "rsub", "sub", "unsqueeze", "view", "reshape", "expand", "squeeze",
    "slice", "clone", "bitwise_not", "logical_not", "eq", "ne", "_unsafe_view",
}  # fmt: skip


def _scales_a_mask(ctx: ProgramContext, mul: Node) -> bool:
    """Whether the tensor a ``mul`` scales is a 0/1 mask: made from a bool or integer value
    through casts, ``1 - m`` and reshapes only (``ones_like(s) * c`` scales no mask)."""

    def steps(value: str) -> list[str]:
        producer = ctx.producers.get(value)
        mask_step = producer is not None and producer.op_base in MASK_STEPS
        return producer.tensor_inputs() if mask_step else []

    return _reaches_a_mask(mul.tensor_inputs(), lambda v: ctx.dtype(v) or "", steps)


def _fx_scales_a_mask(mul: Any) -> bool:
    """:func:`_scales_a_mask` on the exported program the rewrite edits."""
    from coreml_lint.rulekit.fx import op_base

    def steps(value: Any) -> list[Any]:
        mask_step = value.op == "call_function" and op_base(value) in MASK_STEPS
        return list(value.all_input_nodes) if mask_step else []

    def dtype(value: Any) -> str:
        return str(getattr(value.meta.get("val"), "dtype", "")).replace("torch.", "")

    return _reaches_a_mask([a for a in mul.args if hasattr(a, "meta")], dtype, steps)


def _reaches_a_mask(
    operands: list[Any], dtype: Callable[[Any], str], steps: Callable[[Any], list[Any]]
) -> bool:
    """One walk for both graphs: from a ``mul``'s operands back through mask steps
    (``steps``: a value's operands where a mask step makes it, else none) to a bool or
    integer value."""
    frontier = list(operands)
    seen = set(frontier)
    while frontier:
        value = frontier.pop()
        kind = dtype(value)
        if kind == "bool" or "int" in kind:
            return True
        for operand in steps(value):
            if operand not in seen:
                seen.add(operand)
                frontier.append(operand)
    return False


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def padded_attention(fill: float, padding: str = "left") -> tuple[Any, tuple[Any, ...]]:
    """Self-attention masked as transformers' eager attention masks a padded batch. Left
    padding leaves the first query rows of the padded sequence with every key masked."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        b, t, _ = x.shape
        q = x.view(b, t, 2, -1).transpose(1, 2)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        keep = causal[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(b, 1, t, t).masked_fill(~keep, fill)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    padded = [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    if padding == "right":
        padded = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    return module(forward), (torch.randn(2, 5, 8), torch.tensor(padded))


@case(
    "finfo-min-padding-mask",
    expect={"CML310"},
    silent=returns(r"= select\(cond=[^)]*a=-inf"),
)
def _() -> Any:
    return padded_attention(torch.finfo(torch.float32).min)


@case("finfo-min-causal-right-padded-lengths", expect=set(), warnings={"CML310"})
def _() -> Any:
    """A causal mask and a length mask (``arange(t) < lengths``): every row of a sequence
    with a token keeps its first position, so only an empty sequence loses whole rows (a
    warning; verify agrees on these lengths)."""

    def forward(s: Any, scores: Any, lengths: Any) -> Any:
        t = scores.shape[-1]
        i = torch.arange(t)
        keep = (i[None, :] <= i[:, None])[None] & (i[None, :] < lengths[:, None])[:, None]
        mask = torch.zeros_like(scores).masked_fill(~keep[:, None], torch.finfo(scores.dtype).min)
        return torch.softmax(scores + mask, dim=-1)

    return module(forward), (torch.randn(2, 2, 6, 6), torch.tensor([6, 3]))


@case("fill-keeping-the-diagonal", expect=set())
def _() -> Any:
    """SASRec's mask: causal and key padding, or the diagonal (``| eye``): every row keeps
    its own position, so no row is ever fully masked, however padded."""

    def forward(s: Any, x: Any, ids: Any) -> Any:
        t = ids.shape[1]
        keep = torch.ones(t, t, dtype=torch.bool).tril()[None] & (ids != 0)[:, None]
        keep = keep | torch.eye(t, dtype=torch.bool)[None]
        scores = (x @ x.transpose(-2, -1)).masked_fill(~keep, -1e9)
        return scores.softmax(-1) @ x

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[0, 0, 3, 4, 5], [1] * 5]))


@case(
    "finfo-min-query-and-key-padding",
    expect={"CML310"},
    silent=returns(r"= select\(cond=[^)]*a=-inf"),
)
def _() -> Any:
    """The padding mask applied to the query rows too: a padded query row of a sequence
    with tokens has every key masked, NaN in Core ML (uniform in eager)."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        scores = x @ x.transpose(-2, -1)
        keep = attention_mask[:, None, :].bool() & attention_mask[:, :, None].bool()
        return scores.masked_fill(~keep, torch.finfo(torch.float32).min).softmax(-1) @ x

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1] * 5]))


@case("fp16-safe-padding-mask", expect=set(), clean=returns(r"= select\(cond=[^)]*a=-30000"))
def _() -> Any:
    # Right padding: every query row keeps a key. (A fully masked row is padding, whose
    # values differ between float16 and float32 whatever the mask value; only NaN is wrong.)
    return padded_attention(-30000.0, padding="right")


@case(
    "infinite-padding-mask",
    expect=set(),
    warnings={"CML310"},
    silent=returns(r"= select\(cond=[^)]*a=-inf"),
)
def _() -> Any:
    # float("-inf") is -inf in float16 too, but torch's SDPA gives a fully masked row zeros
    return padded_attention(float("-inf"))


def _selects_minus_inf(lowered: Any) -> bool:
    """MIL evidence: a ``select`` one of whose constant branches holds -inf (float16's
    finfo.min, broadcast to a constant tensor where the number was a branch)."""
    import numpy as np

    for delegate in lowered.delegates:
        for found in re.finditer(r"= select\(cond=%\w+, a=%(\w+), b=%(\w+)", delegate.mil):
            for branch in found.groups():
                value = delegate.consts.get(branch)
                if value is not None and np.isneginf(np.asarray(value, np.float64)).any():
                    return True
    return False


@case("finfo-min-where-tensor-first-left-padding", expect={"CML310"}, silent=_selects_minus_inf)
def _() -> Any:
    """GPT-2's eager mask in transformers: ``torch.where(keep, zeros, finfo.min)``
    (where.ScalarOther, which torch decomposes), added to the scores of a left-padded
    batch."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        keep = causal[None] & attention_mask[:, None, :].bool()
        bias = torch.where(keep, torch.zeros(1, t, t), torch.finfo(torch.float32).min)
        return ((x @ x.transpose(-2, -1)) + bias).softmax(-1) @ x

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[0, 0, 1, 1, 1], [1] * 5]))


@case("finfo-min-where-scalar-padding-mask", expect={"CML310"}, silent=_selects_minus_inf)
def _() -> Any:
    """``torch.where(~keep, finfo.min, 0.0)``: both branches numbers (``where.Scalar``)."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        b, t, _ = x.shape
        q = x.view(b, t, 2, -1).transpose(1, 2)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        keep = causal[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.where(~keep, torch.finfo(torch.float32).min, 0.0)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[0, 0, 1, 1, 1], [1] * 5]))


@case("infinite-causal-full-like", expect=set(), warnings=set())
def _() -> Any:
    """``full_like(scores, -inf).triu(1)``: -inf everywhere, then the causal part kept; no
    row of a causal mask is fully masked, and which positions are is not the fill's."""

    def forward(s: Any, x: Any) -> Any:
        q = x.view(2, 5, 2, -1).transpose(1, 2)
        scores = q @ q.transpose(-2, -1)
        mask = torch.full_like(scores, float("-inf")).triu(1)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    return module(forward), (torch.randn(2, 5, 8),)


@case("infinite-padding-mask-plain-softmax", expect=set())
def _() -> Any:
    """A fully masked row of a plain softmax is NaN in eager as well: nothing to report."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        scores = x @ x.transpose(-2, -1)
        keep = attention_mask[:, None, :].bool() & attention_mask[:, :, None].bool()
        return scores.masked_fill(~keep, float("-inf")).softmax(-1) @ x

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[0, 0, 1, 1, 1], [1] * 5]))


def extended_mask(value: float, padded: list[int] | None = None) -> tuple[Any, tuple[Any, ...]]:
    """Attention masked as transformers' older ``get_extended_attention_mask`` does: the
    0/1 padding mask scaled by the value and added to the scores."""

    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        scores = x @ x.transpose(-2, -1)
        scale = (1.0 - attention_mask[:, None, :].float()) * value
        return (scores + scale).softmax(-1)

    mask = torch.tensor([padded or [1, 1, 1, 0, 0], [1] * 5])
    return module(forward), (torch.randn(2, 5, 8), mask)


@case(
    "finfo-min-scaled-padding-mask",
    expect={"CML310"},
    silent=returns(r"= mul\(x=[^)]*y=-inf"),
)
def _() -> Any:
    return extended_mask(torch.finfo(torch.float32).min)


@case("fp16-safe-scaled-padding-mask", expect=set(), clean=returns(r"= mul\(x=[^)]*y=-30000"))
def _() -> Any:
    return extended_mask(-30000.0)


@case(
    "large-positive-scaled-padding-mask-subtracted",
    expect={"CML310"},
    # the product stays float32 (1e9 is no infinity to coremltools), then enters float16
    silent=lambda lowered: (
        re.search(r"= mul\(x=[^\n]*y=1000000000\.0", lowered.mil) is not None
        and "aten_mul_tensor_to_fp16" in lowered.mil
    ),
)
def _() -> Any:
    # ``s - (1 - mask) * 1e9``: a fully masked row (the first sequence, all padding) is NaN,
    # as with a fill; the other rows agree
    def forward(s: Any, x: Any, attention_mask: Any) -> Any:
        scores = x @ x.transpose(-2, -1)
        return (scores - (1.0 - attention_mask[:, None, :].float()) * 1e9).softmax(-1)

    return module(forward), (torch.randn(2, 5, 8), torch.tensor([[0] * 5, [1] * 5]))


@case("finfo-min-causal-only", expect=set())
def _() -> Any:
    def forward(s: Any, x: Any) -> Any:
        t = x.shape[-2]
        mask = torch.zeros(t, t).masked_fill(
            ~torch.ones(t, t, dtype=torch.bool).tril(), torch.finfo(torch.float32).min
        )
        return (x @ x.transpose(-2, -1) + mask).softmax(-1)

    return module(forward), (torch.randn(2, 5, 8),)


@case("finfo-min-filled-into-scores-causal", expect=set())
def _() -> Any:
    # The scores depend on the input; which positions are masked does not (no row of a
    # causal mask is fully masked, so float16's -inf never makes a NaN here).
    def forward(s: Any, x: Any) -> Any:
        t = x.shape[-2]
        scores = x @ x.transpose(-2, -1)
        causal = ~torch.ones(t, t, dtype=torch.bool).tril()
        return scores.masked_fill(causal, torch.finfo(torch.float32).min).softmax(-1)

    return module(forward), (torch.randn(2, 5, 8),)

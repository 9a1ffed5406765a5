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

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import FLOAT_DTYPES, DType
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, nn, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword
from coreml_lint.source.patterns import enclosing_class, enclosing_function, is_bool
from coreml_lint.source.sites import module_site, owner_stack

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


ADDITIVE_MASK = """
def additive_mask(mask):
    \"\"\"The float additive mask nn.MultiheadAttention makes of a bool one (True: blocked),
    made here so that Core ML keeps its dtype (coreml-lint).\"\"\"
    return torch.zeros(mask.shape, device=mask.device).masked_fill(mask, float("-inf"))
"""
# MultiheadAttention.forward(query, key, value, key_padding_mask, need_weights, attn_mask)
_MASK_POSITIONS = {"key_padding_mask": 3, "attn_mask": 5}
_CANONICAL_MASK = re.compile(r"\b(attn_mask|key_padding_mask) = (?:F\.)?_canonical_mask\(")


MHA_CALL_MASK = MHA_BOOL_MASK.replace(
    "        mask = torch.ones(5, 5, dtype=torch.bool).triu(1)\n", ""
).replace("attn_mask=mask,", "attn_mask=torch.ones(5, 5).triu(1).bool(),")
MHA_CALL_MASK_FIXED = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
    + ADDITIVE_MASK
    + "\n"
    + MHA_CALL_MASK.replace(
        "attn_mask=torch.ones(5, 5).triu(1).bool(),",
        "attn_mask=additive_mask(torch.ones(5, 5).triu(1).bool()),",
    )
)


def _feeds_baddbmm(ctx: ProgramContext, written: list[Any]) -> bool:
    """Whether the mask written into the kept-bool tensor is the ``baddbmm`` input of
    MultiheadAttention's ``need_weights=True`` path (an fp32/bool add there: a crash), not
    SDPA's mask (wrong values, silently), within a few reshapes."""
    frontier, seen = [n.outputs[0] for n in written if n.outputs], set()
    for _ in range(6):
        nxt = []
        for name in frontier:
            for user in ctx.users.get(name, []):
                if user.op_base == "baddbmm":
                    return True
                if user.name not in seen and user.outputs:
                    seen.add(user.name)
                    nxt.append(user.outputs[0])
        frontier = nxt
    return False


@replacement
def _mask_written_out(fix: SourceFix, node: Any, edits: Any) -> Any:
    """A bool mask named by a plain name as the float additive mask, written out."""
    import libcst as cst

    from coreml_lint.rulekit.cst import code

    torch, mask = edits.torch(), code(node)
    return cst.parse_expression(
        f'{torch}.zeros({mask}.shape, device={mask}.device).masked_fill({mask}, float("-inf"))'
    )


@replacement
def _mask_through_helper(fix: SourceFix, node: Any, edits: Any) -> Any:
    """A bool mask made by a call as ``additive_mask(<call>)``: the helper reads it once."""
    import libcst as cst

    _need_additive_mask(edits)
    return cst.Call(func=cst.Name("additive_mask"), args=[cst.Arg(node)])


@replacement
def _mask_argument_through_helper(fix: SourceFix, call: Any, edits: Any) -> Any:
    """The MultiheadAttention call with its ``fix.get("name")`` mask argument (by keyword,
    or at ``fix.get("position")``) passed through ``additive_mask``."""
    import libcst as cst

    _need_additive_mask(edits)
    name, position = fix.get("name"), fix.get("position")
    args = list(call.args)
    for index, arg in enumerate(args):
        keyword_name = arg.keyword.value if arg.keyword is not None else None
        if keyword_name == name or (keyword_name is None and index == position):
            wrapped_value = cst.Call(func=cst.Name("additive_mask"), args=[cst.Arg(arg.value)])
            args[index] = arg.with_changes(value=wrapped_value)
    return call.with_changes(args=args)


def _need_additive_mask(edits: Any) -> None:
    edits.need_helper("additive_mask", ADDITIVE_MASK.replace("torch.", f"{edits.torch()}."))


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
            crashes = have == "bool" and _feeds_baddbmm(ctx, written)
            mask_note = (
                " nn.MultiheadAttention built this from a bool attn_mask, and with "
                "need_weights=True the bool mask reaches baddbmm: lowering fails with `y has "
                "dtype fp32 whereas x has dtype bool`"
                if crashes
                else " nn.MultiheadAttention built this from a bool attn_mask, so the additive "
                "mask ends up inverted (blocked positions attend, allowed ones are masked)"
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
                outcome=Outcome.CRASH if crashes else None,
                dtype=wanted.name,
                modules=owner_stack(node.modules()),
                mha_mask=_mha_mask(node.stack_trace) if have == "bool" else None,
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """A bool mask ``nn.MultiheadAttention`` turned into ``zeros_like(mask,
        dtype=float)``: the program knows the mask is bool whatever the source shows (a
        ``.bool()`` at the end of a chain, a model input, a buffer), and which of the
        call's masks it is (torch's own line in the node's stack trace). The argument of
        the call at the finding's line becomes the float additive mask MHA meant to make
        of it, as the source rule writes it for a mask it sees is bool."""
        mask_name = finding.extra.get("mha_mask")
        modules = finding.extra.get("modules") or []
        if not mask_name or finding.location is None or not modules:
            return None
        if modules[-1][1] != "torch.nn.modules.activation.MultiheadAttention":
            return None
        site = module_site(modules)
        attribute = site[1] if site is not None and "." not in site[1] else None
        line = finding.location.line
        calls = [
            (call, mask)
            for call in source.calls()
            if call.lineno <= line <= (call.end_lineno or call.lineno)
            and (mask := _mask_argument(source, call, mask_name, attribute)) is not None
        ]
        if len(calls) != 1:
            return not_one_call(line, len(calls), f"MultiheadAttention(..., {mask_name}=...)")
        mask = calls[0][1]
        if isinstance(mask, ast.Call) and _callee(mask) in ("additive_mask", "masked_fill"):
            return f"{mask_name} is already made a float mask in the source: export again"
        return _mask_edit(source, mask, calls[0][0], mask_name) or (
            f"{mask_name}=`{ast.unparse(mask)}`: no place for a float mask"
        )

    source_triggers = ("MultiheadAttention",)
    source_pattern = "`nn.MultiheadAttention(...)(..., attn_mask=<bool>)`"
    source_fix = "a float additive mask built in the model"
    examples = (
        Invalid(MHA_BOOL_MASK, MHA_BOOL_MASK_FIXED, at=(9, 44)),
        Invalid(MHA_CALL_MASK, MHA_CALL_MASK_FIXED, at=(8, 44)),
        Invalid(
            MHA_CALL_MASK.replace(
                "torch.ones(5, 5).triu(1).bool()", "torch.ones(5, 5).triu(1) > 0"
            ),
            MHA_CALL_MASK_FIXED.replace(
                "additive_mask(torch.ones(5, 5).triu(1).bool())",
                "additive_mask(torch.ones(5, 5).triu(1) > 0)",
            ),
            at=(8, 44),
        ),
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
                    edit=_mask_edit(ctx, mask, call, name),
                )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        from coreml_lint.rules.cml301_fill_dtype_ignored import integer_fills

        return integer_fills(ep, likes=True)

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """A like-op the rewrite could not replace runs on the CPU."""
        from coreml_lint.rulekit.fx import op_base

        if op_base(node) in LIKE_OPS and "dtype" in node.kwargs:
            return "*_like with a dtype coremltools ignores"
        return None


def _mha_mask(stack_trace: str | None) -> str | None:
    """Which argument of ``nn.MultiheadAttention`` a bool-to-float mask node was made from:
    torch's innermost ``<name> = F._canonical_mask(`` line in the node's stack trace."""
    found = _CANONICAL_MASK.findall(stack_trace or "")
    return found[-1] if found else None


def _mask_argument(
    ctx: SourceContext, call: ast.Call, name: str, attribute: str | None
) -> ast.expr | None:
    """The ``name`` mask a call of the program's MultiheadAttention passes: by keyword to a
    callee the file does not name as a library function, or by position to
    ``self.<attribute>``, the module the program says ran."""
    if ctx.qualname(call.func) is not None:
        return None
    func = call.func
    own = (
        attribute is not None
        and isinstance(func, ast.Attribute)
        and func.attr == attribute
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    )
    mask = keyword(call, name)
    position = _MASK_POSITIONS[name]
    spread = any(isinstance(a, ast.Starred) for a in call.args[: position + 1])
    if mask is None and own and len(call.args) > position and not spread:
        mask = call.args[position]
    if mask is None or (isinstance(mask, ast.Constant) and mask.value is None):
        return None
    is_method = isinstance(func, ast.Attribute) and not (
        isinstance(func.value, ast.Name) and func.value.id == "self"
    )
    return mask if own or (attribute is None and not is_method) else None


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _mask_edit(ctx: SourceContext, mask: ast.expr, call: ast.Call, name: str) -> SourceFix | None:
    """The float additive mask in place of a bool one: written out around a name, through
    a small helper around a call (which must run once), or, for any other expression
    (``self.causal``, ``~pad``, ``self.causal[:T, :T]``), the helper around the argument
    of the MultiheadAttention call."""
    description = "float additive mask built in the model"
    if isinstance(mask, ast.Name):  # not an attribute: its first name starts where it does
        return ctx.edit_expression(mask, _mask_written_out, safe=True, description=description)
    if isinstance(mask, ast.Call):
        return ctx.edit(mask, _mask_through_helper, safe=True, description=description)
    if isinstance(mask, ast.Constant) or has_star_args(call):
        return None
    position = next((i for i, arg in enumerate(call.args) if arg is mask), None)
    return ctx.edit(
        call,
        _mask_argument_through_helper,
        safe=True,
        description=description,
        name=name,
        position=position,
    )


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

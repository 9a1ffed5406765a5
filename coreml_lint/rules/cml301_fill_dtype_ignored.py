"""CML301 fill-dtype-ignored: an integer fill that coremltools makes as float.

What it does
    Flags a delegated fill whose result torch types as integer or bool but coremltools
    builds as fp32: ``torch.full(size, <int>)`` without ``dtype=``; ``torch.zeros(...,
    dtype=<int>)``; ``x.new_zeros(...)`` of an integer tensor (with or without ``dtype=``);
    ``x.new_empty(...)`` of an integer tensor with no ``fill_`` after it.

Why it breaks
    coremltools' handlers read only positional arguments, and export records ``dtype=`` as a keyword
    or not at all (docs/background.md#keyword-arguments): ``full`` falls back to fp32, ``zeros``
    ignores its dtype, ``new_zeros`` always fills ``0.0``. Computed in fp16, 3001 becomes 3000.0
    (the partition returns float, which the runtime converts back to int64, rounded). When
    the fill feeds ``gather``/``index_select`` indices, lowering crashes: ``expects ...
    ['int32'] but got tensor[4,16,fp32]``.

Severity
    In source, where the use is not visible: ``error`` for a fill value above 2048,
    ``warning`` otherwise (lint the exported program for the precise verdict). In a program:
    ``error`` when lowering crashes (index of gather/index_select), when the float value
    leaves the partition (the program gets float where it declares an integer), or when the
    fill value is above 2048 (fp16 rounds it). A small fill used only inside the partition
    (``torch.full(..., 3) + arange`` feeding ``embedding``, which casts its indices) computes
    the right values while they stay at or below 2048: ``warning``. No finding when every
    use is float arithmetic (``torch.full(size, 2) * x``): torch promotes the integer to float
    there too, so the float fill computes the same values; nor when a small fill is only
    read as it is (``torch.zeros(..., dtype=torch.long)`` as an embedding's indices, or
    compared): fp16 holds every integer up to 2048 exactly.

Example
    ``pos = torch.full((1, 4), 3001) + xi``

Fix
    (a) ``torch.full(size, value, dtype=torch.int64)``; for ``zeros(dtype=int)`` write
    ``torch.full(size, 0, dtype=...)``; for ``new_zeros`` write ``torch.zeros_like(...)`` or
    ``torch.full(..., 0, dtype=x.dtype)``; (b) rewrite integer fills into
    ``aten.full(..., dtype=...)`` before lowering.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

import ast
import struct
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import FLOAT_DTYPES, INTEGER_DTYPES, DType, Node
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import F, Invalid, Valid, case, module, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import (
    SourceContext,
    SourceFix,
    has_star_args,
    int_literal,
    keyword,
)
from coreml_lint.source.patterns import bound_constant
from coreml_lint.source.triggers import CalleeNames

SHAPE_ONLY = {"view", "expand", "unsqueeze", "squeeze", "repeat", "clone", "slice", "select"}
PASS_THROUGH = {"add", "sub", "mul", "remainder", "clamp", *SHAPE_ONLY}
INDEX_CONSUMERS = {"gather": 2, "index_select": 2}
# Writes into a destination, by the position of what they write. Core ML keeps the fill's
# fp32 as the destination's dtype and the integers written as int32, and its scatter and
# tensor_assign ops refuse the mix: "the named input `updates` must have the same data type
# as the named input `data`". slice_scatter lowers (its updates are cast), so it only
# passes the fill on.
WRITERS = {
    "select_scatter": (1, "src"),
    "index_put": (2, "values"),
    "scatter": (3, "src"),
    "scatter_add": (3, "src"),
}
KEEPS_DESTINATION = {"slice_scatter"}
# Ops that refuse a bool fill made as float (measured: ``~torch.eye(n, dtype=torch.bool)``).
BITWISE_BOOL_ONLY = {"bitwise_not", "bitwise_and"}
FLOAT_PROMOTING = {"add", "sub", "rsub", "mul", "div", "true_divide", "pow", "where", "lerp"}
# Uses that read an integer's value and make nothing integer from it: a fill that reaches only
# these (through views) keeps its own value, which fp16 holds exactly up to 2048.
VALUE_READERS = {"embedding", "eq", "ne", "lt", "le", "gt", "ge"}


def _has_dtype(node: Node) -> bool:
    return any(isinstance(v, DType) for v in [*node.args[2:], *node.kwargs.values()])


def _example(value: float) -> str:
    """``: the fill value 3001 becomes 3000`` (float16 rounding, as Core ML stores it)."""
    try:
        rounded = struct.unpack("e", struct.pack("e", float(value)))[0]
    except (OverflowError, struct.error):
        return f": the fill value {value:g} becomes inf"
    return f": the fill value {value:g} becomes {rounded:g}" if rounded != value else ""


# The callees the source check looks at: torch.full, torch.zeros, x.new_zeros.
_CALLEES = ("full", "zeros", "new_zeros")

# A fill whose value the class binds once, in __init__ (the examples' model).
_BASE_IN_INIT = """
class Positions(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = 3001

    def forward(self, n):
        return {fill}
"""


@replacement
def _with_dtype(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``torch.full(size, fill)`` with the dtype torch gives it (``dtype=torch.int64``)."""
    from coreml_lint.rulekit.cst import append_kwarg

    return append_kwarg(call, "dtype", _torch_attribute(edits, fix.get("dtype", "int64")))


@replacement
def _zeros_as_full(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``torch.zeros(size, dtype=<int>)`` as ``torch.full(size, 0, dtype=<int>)``: one
    sequence, or the integers made a tuple (``fix.get("size")``)."""
    import libcst as cst

    positional, keywords = _split_arguments(call)
    if fix.get("size") == "sequence":
        return _full(positional[0].value, keywords, edits)
    return _full(cst.Tuple([cst.Element(a.value) for a in positional]), keywords, edits)


@replacement
def _new_zeros_as_full(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``x.new_zeros(size, dtype=<int>)`` as ``torch.full(size, 0, dtype=<int>,
    device=x.device)``."""
    import libcst as cst

    from coreml_lint.rulekit.cst import kwarg

    positional, keywords = _split_arguments(call)
    if not any(k.keyword.value == "device" for k in keywords):
        keywords.append(kwarg("device", cst.Attribute(call.func.value, cst.Name("device"))))
    return _full(positional[0].value, keywords, edits)


def _split_arguments(call: Any) -> tuple[list[Any], list[Any]]:
    from coreml_lint.rulekit.cst import kwarg

    positional = [a for a in call.args if a.keyword is None]
    keywords = [kwarg(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
    return positional, keywords


def _full(size: Any, keywords: list[Any], edits: Any) -> Any:
    import libcst as cst

    from coreml_lint.rulekit.cst import with_args

    full = cst.Call(func=_torch_attribute(edits, "full"))
    return with_args(full, [cst.Arg(size), cst.Arg(cst.Integer("0")), *keywords])


def _torch_attribute(edits: Any, attr: str) -> Any:
    """``torch.<attr>`` in the file's name for torch, built directly (no parse)."""
    import libcst as cst

    return cst.Attribute(value=cst.Name(edits.torch()), attr=cst.Name(attr))


class FillDtypeIgnored(Rule):
    code = "CML301"
    name = "fill-dtype-ignored"
    outcome = Outcome.SILENT
    other_severities = (Severity.WARNING,)
    summary = "integer fill made as float by coremltools: values rounded in fp16"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if not node.outputs or node.namespace != "aten":
                continue
            dtype = ctx.dtype(node.outputs[0])
            if dtype not in INTEGER_DTYPES and dtype != "bool":
                continue
            why = self._why(ctx, node)
            if why is None:
                continue
            if dtype == "bool":  # 0.0 and 1.0 are the right values: only a bitwise op fails
                user = self._bitwise_user(ctx, node)
                if user is not None:
                    yield ctx.finding(
                        node,
                        f"{why}, and {ctx.edge_name(user)} takes only bools: lowering fails "
                        "with `Not supported type ... double ... for 'bitwise_not' op` (or "
                        "`The bitwise_and op only supports boolean input`)",
                        outcome=Outcome.CRASH,
                        severity=Severity.ERROR,
                        fix=self._fix(node, dtype),
                        partitioner=ctx.skip_advice(node),
                        dtype=dtype,
                    )
                continue
            index_user, reached, integer_use, only_read = self._follow(ctx, node)
            part = ctx.placement.partition_of(node)
            leaves = part is not None and any(v in part.outputs for v in reached)
            if not (index_user or leaves or integer_use):
                continue  # only ever promoted to float, as torch promotes it: same values
            value = node.arg(1, "fill_value") if node.target == "aten.full.default" else 0
            large = isinstance(value, (int, float)) and abs(value) > 2048
            if only_read and not (index_user or leaves or large):
                continue  # its one value, exact in fp16, is only read: nothing is rounded
            severity = Severity.ERROR
            if index_user is not None and index_user.op_base in WRITERS:
                message = (
                    f"{why}, and {ctx.edge_name(index_user)} writes integers into it: lowering "
                    "fails with `ValueError: ... the named input `updates` must have the same "
                    "data type as the named input` (fp32 destination, int32 updates)"
                )
                outcome = Outcome.CRASH
            elif index_user is not None:
                message = (
                    f"{why}, and it feeds the indices of {ctx.edge_name(index_user)}: lowering "
                    "fails with `ValueError: ... expects tensor or scalar of dtype from type "
                    "domain ['int32'] but got tensor[...,fp32]`"
                )
                outcome = Outcome.CRASH
            elif leaves:
                message = (
                    f"{why}: Core ML computes it in fp16 and the partition returns it as "
                    f"float (the runtime converts it back to {dtype}), so integers above 2048 "
                    f"are rounded{(_example(value) if large else '') or ' (3001 becomes 3000)'}"
                )
                outcome = Outcome.SILENT
            else:
                message = (
                    f"{why}: it is computed in fp16, so its integer values are rounded above "
                    f"2048{' (the fill value ' + str(value) + ' already is)' if large else ''}"
                )
                outcome = Outcome.SILENT
                severity = Severity.ERROR if large else Severity.WARNING
            yield ctx.finding(
                node,
                message,
                outcome=outcome,
                severity=severity,
                fix=self._fix(node, dtype),
                partitioner=ctx.skip_advice(node),
                dtype=dtype,
            )

    @staticmethod
    def _why(ctx: ProgramContext, node: Node) -> str | None:
        dtype = ctx.dtype(node.outputs[0])
        if node.target == "aten.full.default" and not _has_dtype(node):
            return f"torch.full without dtype= is {dtype} in torch but fp32 in Core ML"
        if node.target == "aten.zeros.default":
            return f"torch.zeros(dtype={dtype}) is made as fp32: coremltools ignores its dtype"
        if node.target == "aten.new_zeros.default":
            return f"new_zeros of a {dtype} tensor is made as fp32: coremltools always fills 0.0"
        if node.target in ("aten.eye.default", "aten.eye.m"):
            return f"torch.eye(dtype={dtype}) is made as fp32: coremltools ignores its dtype"
        if node.target == "aten.new_empty.default":
            users = ctx.users.get(node.outputs[0], [])
            if not any(u.op_base in ("fill", "copy") for u in users):
                return f"new_empty of a {dtype} tensor with no fill_ is made as fp32"
        return None

    @staticmethod
    def _follow(ctx: ProgramContext, node: Node) -> tuple[Node | None, set[str], bool, bool]:
        """The Core ML op that fails on the fill, if any (a gather/index_select it feeds as
        indices, a scatter that writes integers into it); every value it reaches through
        integer-preserving Core ML ops (and writes that keep it as their destination);
        whether any Core ML op uses it as an integer; and whether every use only reads the
        fill's own value (through views, an embedding index or a comparison: MobileBERT's
        ``torch.zeros(..., dtype=torch.long)`` token types), so no integer but the fill
        itself is ever made. Arithmetic whose result torch types as float (``full(.., 2) *
        x``) promotes the fill exactly as Core ML's float fill does, so it is not an integer
        use; an index (embedding), a comparison or an integer result is."""

        def result(user: Node) -> str | None:
            return ctx.dtype(user.outputs[0]) if user.outputs else None

        def name(value: Any) -> str | None:
            return getattr(value, "name", None)

        def writes_integers(user: Node) -> bool:
            position, keyword = WRITERS[user.op_base]
            written = user.arg(position, keyword)
            if isinstance(written, bool) or written is None:
                return False
            # ``idx[0] = x[0] * 3``: a copy into the fill's view, which coremltools makes as
            # its source (``identity``), so a float source stays float beside the fill
            seen = 0
            while (source := ctx.producers.get(name(written) or "")) is not None and seen < 8:
                if source.target != "aten.copy.default":
                    break
                written, seen = source.arg(1, "src"), seen + 1
            return isinstance(written, int) or ctx.dtype(name(written)) in INTEGER_DTYPES

        start = node.outputs[0]
        reached, integer_use, only_read = {start}, False, True
        # The walk passes through a user once this loop has put its output in ``reached``
        # (the walk asks after each user has been looked at).
        walk = ctx.coreml_users_downstream(
            [start], follow=lambda user: bool(user.outputs) and user.outputs[0] in reached, depth=8
        )
        for value, user in walk:
            position = INDEX_CONSUMERS.get(user.op_base)
            if position is not None and name(user.arg(position, "index")) == value:
                return user, reached, True, False
            destination = name(user.arg(0, "self")) == value
            if destination and user.op_base in WRITERS and writes_integers(user):
                return user, reached, True, False
            if user.op_base in FLOAT_PROMOTING and result(user) in FLOAT_DTYPES:
                continue
            integer_use = True
            only_read = only_read and user.op_base in VALUE_READERS | SHAPE_ONLY
            keeps = destination and user.op_base in KEEPS_DESTINATION
            if keeps or (user.op_base in PASS_THROUGH and result(user) in INTEGER_DTYPES):
                reached.update(user.outputs)
        return None, reached, integer_use, only_read

    @staticmethod
    def _bitwise_user(ctx: ProgramContext, node: Node) -> Node | None:
        """The Core ML ``bitwise_not``/``bitwise_and`` a bool fill reaches through views: made
        as float, it is refused there (``|`` and ``^``, ``logical_not``, ``masked_fill``
        and ``where`` take it)."""

        def view(user: Node) -> bool:
            out = user.outputs[0] if user.outputs else None
            return user.op_base in SHAPE_ONLY and ctx.dtype(out) == "bool"

        for _, user in ctx.coreml_users_downstream([node.outputs[0]], follow=view, depth=8):
            if user.op_base in BITWISE_BOOL_ONLY:
                return user
        return None

    @staticmethod
    def _fix(node: Node, dtype: str) -> str:
        torch_dtype = f"torch.{dtype}"
        zero = "False" if dtype == "bool" else "0"
        if node.target == "aten.full.default":
            return f"pass dtype={torch_dtype} to torch.full"
        if node.target == "aten.zeros.default":
            return f"use torch.full(size, {zero}, dtype={torch_dtype}) instead of torch.zeros"
        if node.target in ("aten.eye.default", "aten.eye.m"):
            return f"use torch.eye(n).to({torch_dtype}): Core ML makes the cast it is given"
        return f"use torch.zeros_like(...) or torch.full(size, {zero}, dtype={torch_dtype})"

    source_triggers = (CalleeNames(*_CALLEES),)
    source_pattern = (
        "`torch.full(size, <int>)` without `dtype`; `torch.zeros(..., dtype=<int>)`; "
        "`x.new_zeros(..., dtype=<int>)`"
    )
    source_fix = "`dtype=torch.int64`; `torch.full(size, 0, dtype=...)`"
    examples = (
        Invalid(
            "x = torch.full((2, 3), 3001)",
            "x = torch.full((2, 3), 3001, dtype=torch.int64)",
            at=(1, 5),
        ),
        Invalid(
            "x = torch.zeros(2, 3, dtype=torch.long)",
            "x = torch.full((2, 3), 0, dtype=torch.long)",
            at=(1, 5),
        ),
        Invalid(
            "def f(x):\n    return x.new_zeros((2, 3), dtype=torch.int32)",
            "def f(x):\n    return torch.full((2, 3), 0, dtype=torch.int32, device=x.device)",
            at=(2, 12),
        ),
        Invalid(
            _BASE_IN_INIT.format(fill="torch.full((1, n), self.base)"),
            _BASE_IN_INIT.format(fill="torch.full((1, n), self.base, dtype=torch.int64)"),
            at=(8, 16),
        ),
        Invalid(
            "def f(n):\n    base = 3001\n    return torch.full((1, n), base)",
            "def f(n):\n    base = 3001\n    return torch.full((1, n), base, dtype=torch.int64)",
            at=(3, 12),
        ),
        Valid("x = torch.full((2, 3), 3001, dtype=torch.int64)"),
        Valid("x = torch.full((2, 3), 0.5)"),
        # self.base is bound twice (configurable): nothing the source can know.
        Valid(
            _BASE_IN_INIT.format(fill="torch.full((1, n), self.base)")
            + "\n    def rebase(self, base):\n        self.base = base"
        ),
        Valid("def f(n, base=3001):\n    return torch.full((1, n), base)"),
        Valid("x = torch.zeros(2, 3)"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            if isinstance(call.func, ast.Attribute) and call.func.attr not in _CALLEES:
                continue  # a qualified name ends in the attribute: neither full nor zeros
            name = ctx.qualname(call.func)
            dtype = keyword(call, "dtype")
            if has_star_args(call):
                continue
            if name == "torch.full" and dtype is None:
                fill = call.args[1] if len(call.args) > 1 else keyword(call, "fill_value")
                value = bound_constant(ctx, fill, call)
                if type(value) is not int or len(call.args) > 2:
                    continue
                yield ctx.finding(
                    call,
                    "torch.full with an integer fill and no dtype= is int64 in torch but fp32 "
                    "in Core ML (coremltools reads no keyword dtype): integers above 2048 round",
                    fix="pass dtype=torch.int64, the dtype torch infers",
                    severity=Severity.ERROR if abs(value) > 2048 else Severity.WARNING,
                    edit=ctx.edit(
                        call, _with_dtype, safe=True, description="add dtype=torch.int64"
                    ),
                )
            elif name == "torch.zeros" and ctx.is_torch_dtype(dtype, INTEGER_TORCH_NAMES):
                size = _size_form(call.args)
                yield ctx.finding(
                    call,
                    "torch.zeros(dtype=<int>) is made as fp32 in Core ML: coremltools ignores "
                    "its keyword dtype",
                    severity=Severity.WARNING,
                    fix="use torch.full(size, 0, dtype=...)",
                    edit=ctx.edit(
                        call,
                        _zeros_as_full,
                        safe=True,
                        description="torch.full(size, 0, dtype=...)",
                        size=size,
                    )
                    if size
                    else None,
                )
            elif (
                name is None
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "new_zeros"
                and ctx.is_torch_dtype(dtype, INTEGER_TORCH_NAMES)
                and len(call.args) == 1
            ):
                yield ctx.finding(
                    call,
                    "new_zeros(dtype=<int>) is made as fp32 in Core ML: coremltools always "
                    "fills 0.0",
                    severity=Severity.WARNING,
                    fix="use torch.full(size, 0, dtype=..., device=x.device)",
                    edit=ctx.edit(
                        call, _new_zeros_as_full, safe=True, description="torch.full(size, 0, ...)"
                    ),
                )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """``torch.full(size, <any value expression>)`` at the finding's line gets the dtype
        the program knows (``self.base`` is an int: the fill is int64). Other fills are left
        to the source check."""
        if finding.op != "aten.full.default" or finding.location is None:
            return None
        line = finding.location.line
        fills = [
            c
            for c in source.calls()
            if c.lineno == line and source.qualname(c.func) == "torch.full"
        ]
        calls = [
            c
            for c in fills
            if keyword(c, "dtype") is None and not has_star_args(c) and len(c.args) <= 2
        ]
        if len(fills) == 1 and not calls and keyword(fills[0], "dtype") is not None:
            return f"the torch.full at line {line} already has a dtype: export again"
        if len(calls) != 1:
            return not_one_call(line, len(calls), "torch.full (without dtype)")
        dtype = finding.extra.get("dtype", "int64")
        return source.edit(
            calls[0], _with_dtype, safe=True, description=f"add dtype=torch.{dtype}", dtype=dtype
        )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        return integer_fills(ep)


def _size_form(args: list[ast.expr]) -> str | None:
    """How ``torch.zeros``'s positional size reads: ``"sequence"`` (one tuple, list or
    shape), ``"ints"`` (one or more integers, made into a tuple), or None when a lone name
    could be either and a rewrite would have to guess."""
    if not args:
        return None
    if len(args) > 1:
        return "ints"
    (size,) = args
    if isinstance(size, (ast.Tuple, ast.List)) or (
        isinstance(size, ast.Attribute) and size.attr == "shape"
    ):
        return "sequence"
    if (
        isinstance(size, ast.Call)
        and isinstance(size.func, ast.Attribute)
        and size.func.attr == "size"
    ):
        return "ints" if size.args else "sequence"
    if int_literal(size) is not None or isinstance(size, ast.BinOp):
        return "ints"
    return None


INTEGER_TORCH_NAMES = {"int8", "uint8", "int16", "int32", "int64", "long", "int", "short"}


def integer_fills(ep: Any, *, likes: bool = False) -> tuple[Any, list[str]]:
    """Integer fills (or, with ``likes``, ``*_like(dtype=...)``: CML302's) that coremltools
    would make in another dtype become ``aten.full(size, value, dtype=...)``, which it makes
    as asked. One kind per call, so each rule's report lists only its own rewrites."""
    import torch

    from coreml_lint.rulekit.fx import FLOATS, aten, finish, val

    zero_fills = (aten.zeros.default, aten.new_zeros.default, aten.new_empty.default)
    like_ops = (aten.zeros_like.default, aten.empty_like.default, aten.full_like.default)
    done = []
    for node in list(ep.graph.nodes):
        fake = val(node)
        if not isinstance(fake, torch.Tensor) or not all(isinstance(d, int) for d in fake.shape):
            continue
        target, value = node.target, None
        if likes:
            if target in like_ops:
                source = val(node.args[0])
                if "dtype" in node.kwargs and source is not None and source.dtype != fake.dtype:
                    value = node.args[1] if target == aten.full_like.default else 0
        elif target == aten.full.default and "dtype" not in node.kwargs:
            value = node.args[1] if fake.dtype not in FLOATS else None
        elif target in zero_fills and fake.dtype not in FLOATS:
            value = 0
        elif target in (aten.eye.default, aten.eye.m) and fake.dtype not in FLOATS:
            _cast_eye(ep, node, fake)
            done.append(f"{node.name}: made as aten.eye(...) cast to {fake.dtype}")
            continue
        if value is None:
            continue
        with ep.graph.inserting_before(node):
            full = ep.graph.call_function(
                aten.full.default, (list(fake.shape), value), {"dtype": fake.dtype}
            )
        full.meta = dict(node.meta)
        node.replace_all_uses_with(full)
        ep.graph.erase_node(node)
        done.append(f"{node.name}: made as aten.full(..., dtype={fake.dtype})")
    return finish(ep), done


def _cast_eye(ep: Any, node: Any, fake: Any) -> None:
    """``eye(n, dtype=d)`` as ``eye(n)`` and a cast to ``d``, which coremltools makes."""
    from coreml_lint.rulekit.fx import aten, emit, fake_mode

    mode = fake_mode(ep)
    kwargs = {k: v for k, v in node.kwargs.items() if k != "dtype"}
    with ep.graph.inserting_before(node):
        eye = emit(ep, mode, node.target, tuple(node.args), kwargs)
        cast = emit(ep, mode, aten._to_copy.default, (eye,), {"dtype": fake.dtype})
    cast.meta = {**node.meta, "val": cast.meta["val"]}
    node.replace_all_uses_with(cast)
    ep.graph.erase_node(node)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def xi() -> tuple[Any, ...]:
    return (torch.full((1, 4), 1, dtype=torch.int32),)


@case("full-int-no-dtype", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: torch.full((1, 4), 3001) + xi), xi()


@case("full-int-dtype", expect=set(), clean=returns(r"3001"))
def _():
    return module(lambda s, xi: torch.full((1, 4), 3001, dtype=torch.int32) + xi), xi()


@case("zeros-int-dtype", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: torch.zeros((1, 4), dtype=torch.int32) + xi + 3001), xi()


@case("new-zeros-int", expect={"CML301"}, silent=returns(r"3000\.0"))
def _():
    return module(lambda s, xi: xi.new_zeros((1, 4)) + xi + 3001), xi()


@case("zeros-like-int", expect=set(), clean=returns(r"3001"))
def _():
    return module(lambda s, xi: torch.zeros_like(xi) + xi + 3001), xi()


@case("zeros-int-embedding-index", expect=set(), warnings=set(), clean=returns(r"= gather\("))
def _():
    """MobileBERT's token types: ``torch.zeros(..., dtype=torch.long)`` only indexes an
    embedding. Made as fp32 0.0, it is still index 0: nothing to round, nothing to say.
    (The table is an input here, so that Core ML cannot fold the lookup away.)"""

    def forward(s, x, table):
        return F.embedding(torch.zeros(1, 4, dtype=torch.long), table) + x

    return module(forward), (torch.randn(1, 4, 8), torch.randn(2, 8))


def _relative_positions(fill: Any) -> Any:
    """BEiT's relative position index: a table of integer positions written into a fill
    (a block of offsets, then the class token's row), which then indexes a bias table."""

    def forward(s, bias, offsets):
        index = fill()
        index[1:, 1:] = offsets
        index[0, :] = 7
        return bias[index.view(-1)]

    return module(forward), (torch.randn(9, 2), torch.arange(4).view(2, 2))


@case("zeros-int-written", expect={"CML301"}, crash=r"`updates` must have the same data type")
def _():
    return _relative_positions(lambda: torch.zeros(3, 3, dtype=torch.long))


@case("full-int-dtype-written", expect=set(), clean=returns(r"= gather\("))
def _():
    return _relative_positions(lambda: torch.full((3, 3), 0, dtype=torch.long))


@case("full-int-index-put", expect={"CML301"}, crash=r"`updates` must have the same data type")
def _():
    def forward(s, x, ids):
        counts = torch.full((4, 4), 0)
        counts[torch.tensor([0, 2])] = ids
        return x * counts

    return module(forward), (torch.randn(4, 4), torch.arange(8).view(2, 4))


def _off_diagonal(mask: Any) -> Any:
    """Contrastive logits with the diagonal (each item against itself) masked out."""
    return module(lambda s, x: x.masked_fill(~mask(), 0.0)), (torch.randn(4, 4),)


@case("eye-bool-bitwise-not", expect={"CML301"}, crash=r"found for 'bitwise_not' op")
def _():
    return _off_diagonal(lambda: torch.eye(4, dtype=torch.bool))


@case("eye-cast-bool", expect=set(), clean=returns(r"= select\(cond="))
def _():
    return _off_diagonal(lambda: torch.eye(4).bool())


@case("eye-int-gather", expect={"CML301"}, crash=r"gather_along_axis.*\['int32'\] but got")
def _():
    return module(lambda s, x: x.gather(1, torch.eye(4, dtype=torch.long))), (torch.randn(4, 4),)


@case("full-int-float-use", expect=set(), clean=returns(r"mul\(x=\[\[2\.0"))
def _():
    """An integer fill only used in float arithmetic: torch promotes it to float as well."""
    return module(lambda s, x: torch.full((1, 4), 2) * x), (torch.randn(1, 4),)


@case("float-zeros", expect=set())
def _():
    return module(lambda s, x: torch.zeros(1, 4) + x), (torch.randn(1, 4),)


@case(
    "full-index-gather",
    expect={"CML301"},
    crash=r"gather_along_axis.*\['int32'\] but got",
)
def _():
    def forward(s, x):
        return torch.gather(x, 1, torch.full((4, 16), 0) + torch.arange(16))

    return module(forward), (torch.randn(4, 16),)

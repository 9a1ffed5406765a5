"""CML315 float-range-made-integer: ``torch.arange(n, dtype=torch.float32)`` is int32 in Core ML.

What it does
    Flags a delegated ``torch.arange`` given a float ``dtype=`` and whole-number bounds (Python
    ints, or a size read off a dynamic shape) whose values reach, through views, ``cat``,
    ``neg`` and arithmetic among such ranges, an op that takes only floats in Core ML:
    ``sin``/``cos``/``tan``/``exp``/``sqrt``/``tanh``/``sigmoid``/``erf`` and the activations,
    ``softmax``, ``outer``, ``layer_norm``, ``group_norm``, a ``stack`` beside a float, or a
    matrix product whose second operand is the range or whose other operand is a weight. The
    rotary-embedding line ``t = torch.arange(T, dtype=torch.float32)`` then
    ``torch.outer(t, inv_freq)`` is the everyday case.

Why it breaks
    coremltools' ``arange`` converter makes a range of integer bounds as an int32 tensor,
    whatever ``dtype=`` export recorded. Ops that promote their operands (``+``, ``*``, ``/``
    with a float, ``pow``, ``log``, ``rsqrt``, ``linear``, ``bmm``, ``cat`` beside a float, a
    product of the range and an activation) still
    lower and compute the right values; ops whose MIL type domain is float only fail:
    ``Op "aten_sin_default" (op_type: sin) Input x="aten_arange_default" expects tensor or
    scalar of dtype from type domain ['fp16', 'fp32'] but got tensor[8,int32]``, or for
    ``outer``/``matmul`` ``y has dtype fp32 whereas x has dtype int32``. Float bounds
    (``torch.arange(0.0, n)``, a step of ``0.5``) and ``torch.arange(n).float()`` make floats.
    Measured with the stock ``CoreMLPartitioner`` at its default target (iOS15); the crashes
    at iOS18 too.

Example
    ``t = torch.arange(x.shape[1], dtype=torch.float32)`` then ``torch.outer(t, inv_freq)``

Fix
    (a) make the range in integers and cast it: ``torch.arange(n).to(torch.float32)`` (the
    same values; ``--fix`` writes it); (b) ``coreml-lint lower`` makes each such range as
    int64 and casts it to its dtype inside the program, which lowers.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import FLOAT_DTYPES, DType, Node, SymRef
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import F, case, dynamic_case, module, nn, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword

RANGES = frozenset({"aten.arange.default", "aten.arange.start", "aten.arange.start_step"})

# Ops whose Core ML result stays int32 when their tensor operands are such ranges (each
# measured feeding ``sin``): views and copies, ``neg``, ``flip``, ``repeat``; ``cat`` and
# ``stack`` of ranges only (a float beside them promotes the join, or, for ``stack``, fails:
# ``FLOAT_ONLY``); ``add``/``sub``/``mul`` of ranges only, with no number (``t * 2``, ``t +
# 0.5`` make floats); ``rsub`` of an integer (``1 - t``; ``1.5 - t`` makes floats).
KEEPS_INTEGERS = frozenset(
    {
        "view", "view_copy", "reshape", "_unsafe_view", "unsqueeze", "unsqueeze_copy",
        "squeeze", "squeeze_copy", "expand", "expand_copy", "permute", "permute_copy", "t",
        "t_copy", "transpose", "transpose_copy", "slice", "slice_copy", "select",
        "select_copy", "alias", "alias_copy", "clone", "flip", "repeat", "neg",
    }
)  # fmt: skip
JOINS = frozenset({"cat", "stack"})  # a list of tensors and a dim
ALL_OPERANDS_KEEP = frozenset({"add", "sub", "mul"})

# Ops measured to fail on an int32 operand (each fed ``arange(8, dtype=float32)``); ``log``,
# ``log1p``, ``rsqrt``, ``reciprocal``, ``pow``, ``abs``, ``clamp``, ``floor``, ``where``,
# ``maximum``, ``cumsum``, ``sum``, ``mean``, ``var``, ``norm``, ``linear``, ``bmm`` and a
# ``cat`` beside a float were measured converting, and are not flagged. ``outer`` fails
# whichever operand the range is.
FLOAT_ONLY = frozenset(
    {
        "sin", "cos", "tan", "atan", "asin", "sinh", "exp", "expm1", "sqrt", "sigmoid",
        "tanh", "erf", "gelu", "silu", "relu", "softplus", "hardswish", "_softmax",
        "softmax", "_log_softmax", "log_softmax", "outer", "native_layer_norm",
        "layer_norm", "native_group_norm", "group_norm",
    }
)  # fmt: skip
# A matrix product fails where its second operand is the range, or where the range meets
# a weight (a parameter, buffer or constant: coremltools makes it ``linear``); with the range
# first beside an activation, it promotes and converts (measured).
PRODUCTS = frozenset({"mm", "matmul"})
WEIGHT_KINDS = frozenset({"parameter", "buffer", "constant"})


def whole_float_range(node: Node) -> str | None:
    """The float dtype of an ``arange`` whose bounds are all whole numbers (what Core ML
    makes int32), else None."""
    if node.target not in RANGES:
        return None
    dtype = node.kwargs.get("dtype")
    if not isinstance(dtype, DType) or dtype.name not in FLOAT_DTYPES:
        return None
    numbers = node.args
    whole = all(
        isinstance(n, SymRef) or (isinstance(n, int) and not isinstance(n, bool)) for n in numbers
    )
    return dtype.name if numbers and whole else None


def _fails_on(ctx: ProgramContext, user: Node, integer: set[str]) -> bool:
    """Whether ``user``, reading some of the ``integer`` values, takes only floats there."""
    base = user.op_base
    inputs = user.tensor_inputs()
    if base in FLOAT_ONLY:
        return True
    if base == "stack":
        return not all(i in integer for i in inputs)  # ints beside floats
    if base in PRODUCTS and len(inputs) >= 2:
        kinds = {spec.name: spec.kind for spec in ctx.graph.inputs}
        return inputs[1] in integer or kinds.get(inputs[1]) in WEIGHT_KINDS
    return False


def _keeps_integers(user: Node, integer: set[str]) -> bool:
    """Whether ``user``'s result stays int32 in Core ML (``KEEPS_INTEGERS``' measurements)."""
    base = user.op_base
    inputs = user.tensor_inputs()
    if base in KEEPS_INTEGERS:
        return True
    if base in JOINS:
        return all(i in integer for i in inputs)
    if base == "rsub":
        other = user.args[1] if len(user.args) > 1 else None
        return isinstance(other, int) and not isinstance(other, bool)
    if base in ALL_OPERANDS_KEEP:
        numbers = [a for a in user.args[1:] if isinstance(a, (int, float))]
        return not numbers and all(i in integer for i in inputs)
    return False


def _integer_values(ctx: ProgramContext, part: object) -> set[str]:
    """The values of a partition Core ML holds as int32 for its whole float ranges: theirs,
    and those of ops that keep them so, in graph order (a join of two ranges included)."""
    integer: set[str] = set()
    for node in ctx.graph.nodes:
        if not node.outputs or ctx.placement.partition_of(node) is not part:
            continue
        if whole_float_range(node) and ctx.on_coreml(node):
            integer.update(node.outputs)
        elif any(i in integer for i in node.tensor_inputs()) and _keeps_integers(node, integer):
            integer.add(node.outputs[0])
    return integer


def _float_only_reader(ctx: ProgramContext, node: Node) -> Node | None:
    """The first op on Core ML, in the range's partition, that reads the range's int32
    values (through ops that keep them int32) and takes only floats there."""
    part = ctx.placement.partition_of(node)
    integer = _integer_values(ctx, part)
    frontier, seen = list(node.outputs), set(node.outputs)
    while frontier:
        value = frontier.pop()
        for user in ctx.users.get(value, []):
            if ctx.placement.partition_of(user) is not part or not user.outputs:
                continue
            if _fails_on(ctx, user, integer):
                return user
            made = user.outputs[0]
            if made in integer and made not in seen:
                seen.add(made)
                frontier.append(made)
    return None


@replacement
def _range_then_cast(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``torch.arange(..., dtype=D)`` as ``torch.arange(...).to(D)``: the same values."""
    import libcst as cst

    dtype = next(a.value for a in call.args if a.keyword is not None and a.keyword.value == "dtype")
    kept = [a for a in call.args if a.keyword is None or a.keyword.value != "dtype"]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    ranged = call.with_changes(args=kept)
    return cst.Call(func=cst.Attribute(value=ranged, attr=cst.Name("to")), args=[cst.Arg(dtype)])


class FloatRangeMadeInteger(Rule):
    code = "CML315"
    name = "float-range-made-integer"
    outcome = Outcome.CRASH
    summary = "arange(n, dtype=float) is made int32 in Core ML: a float-only op reading it fails"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            dtype = whole_float_range(node)
            if dtype is None:
                continue
            reader = _float_only_reader(ctx, node)
            if reader is None:
                continue
            yield ctx.finding(
                node,
                f"torch.arange with whole-number bounds and dtype={dtype} is made int32 in Core "
                f"ML (coremltools ignores the dtype of an integer range), and `{reader.op_base}` "
                f"({reader.name}) reads it: lowering fails with `expects tensor or scalar of "
                "dtype from type domain ['fp16', 'fp32'] but got tensor[int32]` (or `y has "
                "dtype fp32 whereas x has dtype int32`)",
                fix=f"make the range in integers and cast it: torch.arange(...).to(torch.{dtype})",
                partitioner=ctx.skip_advice(node),
                dtype=dtype,
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The ``torch.arange(..., dtype=...)`` at the finding's line made in integers and
        cast (the program showed its bounds are whole numbers)."""
        if finding.location is None:
            return None
        line = finding.location.line
        calls = [
            c
            for c in source.calls()
            if c.lineno == line
            and source.qualname(c.func) == "torch.arange"
            and keyword(c, "dtype") is not None
            and keyword(c, "requires_grad") is None  # an int64 range cannot require grad
            and not has_star_args(c)
        ]
        if len(calls) != 1:
            return not_one_call(line, len(calls), "torch.arange(..., dtype=...)")
        dtype = finding.extra.get("dtype", "float32")
        return source.edit(
            calls[0],
            _range_then_cast,
            safe=True,
            description=f"make the range in integers and cast it to torch.{dtype}",
        )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Every float ``arange`` of whole-number bounds made as int64 and cast to its dtype
        right after: the values are the same, and Core ML's int32 range then meets a cast,
        not a float-only op."""
        import torch

        from coreml_lint.rulekit.fx import cast, finish, val

        done = []
        for node in list(ep.graph.nodes):
            dtype = _fx_whole_float_range(node)
            if dtype is None:
                continue
            node.kwargs = {**node.kwargs, "dtype": torch.int64}
            node.meta["val"] = val(node).to(torch.int64)
            users = list(node.users)
            with ep.graph.inserting_after(node):
                made = cast(ep, node, dtype)
            for user in users:
                user.replace_input_with(node, made)
            done.append(f"{node.name}: the range made as int64 and cast to {dtype}")
        return finish(ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """Where the rewrite was not applied, the range is made on the CPU (a float32 input
        of the partition then)."""
        if _fx_whole_float_range(node) is None:
            return None
        return "float arange of whole numbers, made int32 in Core ML"


def _fx_whole_float_range(node: Any) -> Any:
    """``whole_float_range`` of a ``torch.fx`` node (lower's hooks): its float dtype, or
    None. A bound another node makes is a symbolic size."""
    import torch

    from coreml_lint.rulekit.fx import FLOATS, op_base

    name = getattr(node.target, "__name__", "")
    if op_base(node) != "arange" or f"aten.{name}" not in RANGES:
        return None
    dtype = node.kwargs.get("dtype")
    whole = all(isinstance(n, torch.fx.Node) or type(n) is int for n in node.args)
    return dtype if dtype in FLOATS and whole and node.args else None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
INT32_OPERAND = r"type domain \['fp16', 'fp32'\] but got tensor\[[^\]]*int32\]"
INT32_MATMUL = r"has dtype (int32 whereas x has dtype fp32|fp32 whereas x has dtype int32)"


def _rotary(x: Any, make: Any) -> Any:
    inv = 10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float32) / -8)
    return x + torch.outer(make(x.shape[0]), inv).repeat(1, 2)


@case("rotary-float-range-outer", expect={"CML315"}, crash=INT32_MATMUL)
def _():
    return module(lambda s, x: _rotary(x, lambda n: torch.arange(n, dtype=torch.float32))), (
        torch.randn(6, 8),
    )


@case("rotary-range-cast-outer", expect=set())
def _():
    # The fix: the range made in integers and cast.
    return module(lambda s, x: _rotary(x, lambda n: torch.arange(n).to(torch.float32))), (
        torch.randn(6, 8),
    )


@case("float-range-outer-input", expect={"CML315"}, crash=INT32_MATMUL)
def _():
    forward = lambda s, x: x + torch.outer(torch.arange(6, dtype=torch.float32), x[0])  # noqa: E731
    return module(forward), (torch.randn(6, 8),)


@case("float-range-sin-through-views", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    return module(lambda s, x: x + torch.arange(8, dtype=torch.float32).view(2, 4).sin()), (
        torch.randn(3, 2, 4),
    )


@case("float16-range-step-sin", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    forward = lambda s, x: x + torch.arange(0, 16, 2, dtype=torch.float16).sin().float()  # noqa: E731
    return module(forward), (torch.randn(3, 8),)


@case("float-range-sin-ios18", expect={"CML315"}, settings={"ios": 18}, crash=INT32_OPERAND)
def _():
    return module(lambda s, x: x + torch.arange(8, dtype=torch.float32).sin()), (torch.randn(3, 8),)


@case("float-range-softmax", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    return module(lambda s, x: x + torch.arange(8, dtype=torch.float32).softmax(-1)), (
        torch.randn(3, 8),
    )


@case("float-range-layer-norm", expect={"CML315"}, crash=r"epsilon.*has dtype int32")
def _():
    return module(lambda s, x: x + F.layer_norm(torch.arange(8, dtype=torch.float32), (8,))), (
        torch.randn(3, 8),
    )


def _range() -> Any:
    return torch.arange(8, dtype=torch.float32)


@case("float-range-from-one-sin", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    return module(lambda s, x: x + (1 - _range()).sin()), (torch.randn(2, 8),)


@case("float-range-from-a-half-sin", expect=set())
def _():
    return module(lambda s, x: x + (1.5 - _range()).sin()), (torch.randn(2, 8),)


@case("two-float-ranges-joined-sin", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    forward = lambda s, x: x + torch.cat([_range()[None], _range()[None]], -1)[:, :8].sin()  # noqa: E731
    return module(forward), (torch.randn(2, 8),)


@case("float-ranges-stacked-sin", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    return module(lambda s, x: x + torch.stack([_range(), _range()]).sin()), (torch.randn(2, 8),)


@case("float-ranges-stacked-added", expect=set())
def _():
    return module(lambda s, x: x + torch.stack([_range(), _range()])), (torch.randn(2, 8),)


@case("activation-times-float-range", expect={"CML315"}, crash=INT32_MATMUL)
def _():
    return module(lambda s, x: x @ _range()[:, None]), (torch.randn(2, 8),)


@case("float-range-times-activation", expect=set())
def _():
    return module(lambda s, x: _range()[:, None] @ x[:1]), (torch.randn(2, 8),)


@case("float-range-times-two-sin", expect=set())
def _():
    # A number operand makes floats: measured lowering.
    return module(lambda s, x: x + (torch.arange(8, dtype=torch.float32) * 2).sin()), (
        torch.randn(3, 8),
    )


@case("float-range-scaled-exp", expect=set())
def _():
    # The sinusoidal embedding's arithmetic: division by a number, then exp.
    return module(lambda s, x: x + torch.exp(-torch.arange(8, dtype=torch.float32) / 8)), (
        torch.randn(3, 8),
    )


@case("float-bounds-range-sin", expect=set())
def _():
    return module(lambda s, x: x + torch.arange(0.0, 8.0).sin()), (torch.randn(3, 8),)


@case("float-range-log", expect=set())
def _():
    return module(lambda s, x: x + (torch.arange(8, dtype=torch.float32) + 1.0).log()), (
        torch.randn(3, 8),
    )


@dynamic_case("dynamic-float-range-sin", expect={"CML315"}, crash=INT32_OPERAND)
def _():
    class Positions(nn.Module):  # the angles of each row's position, rows a dynamic dim
        def forward(self, x):
            return x + torch.arange(x.shape[0], dtype=torch.float32).sin()[:, None]

    return Positions().eval(), (torch.randn(4, 8),), {"x": {0: torch.export.Dim("rows", max=64)}}

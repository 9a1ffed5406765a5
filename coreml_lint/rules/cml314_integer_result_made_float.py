"""CML314 integer-result-made-float: an integer floor division, one-sided clamp, range or
count of bools that coremltools makes as float, and an op that needs an integer reads it.

What it does
    Flags a delegated floor or truncating division of integers (``a // b``,
    ``torch.div(a, b, rounding_mode="floor")``, ``floor_divide``), a clamp of integers with
    one bound (``ids.clamp(min=0)``), a ``torch.linspace(..., dtype=<int>)``, a
    ``torch.arange`` with a float number and an integer ``dtype=``, or a sum of bools (a
    count: ``mask.sum(1)``, ``torch.count_nonzero``) whose result
    reaches, through integer arithmetic and views, the indices of
    ``gather``/``index_select``, or a ``stack``/``cat`` beside an integer made another way.

Why it breaks
    coremltools converts these ops into float ones (``floor_div``/``real_div`` on values cast
    to fp32; ``clip`` with an infinite other bound; ``linspace`` and a ``range_1d`` of floats
    in fp32, whatever ``dtype=`` says; ``reduce_sum`` of a bool cast to fp32, whatever
    ``dtype=`` says), so the value that torch types as int64 is fp32 in
    Core ML, and so is everything computed from it there. ``gather_along_axis``
    takes int32 indices only: ``expects tensor or scalar of dtype from type domain
    ['int32'] but got tensor[...,fp32]``; ``stack`` refuses the mix of fp32 and int32:
    ``Tensors in 'values' of the stack op should share the same data type``. ``%``,
    ``clamp`` with both bounds, ``clamp_min``, ``maximum`` and the rest of integer
    arithmetic stay integer, and so do ``arange`` of int numbers, ``logspace``, a sum of
    integers and a ``cumsum`` of bools (measured).

Example
    ``cell = heat.argmax(-1) // width`` then ``feat.gather(-1, cell.clamp(min=0))``.

Fix
    (a) divide as float and cast back, which Core ML makes as written:
    ``torch.floor(a / b).long()`` (``torch.trunc`` for ``rounding_mode="trunc"``; exact while
    ``|a|`` stays below 2^24, and Core ML's float division was float already); clamp with
    ``x.clamp_min(lo)``/``x.clamp_max(hi)`` or both bounds; give ``arange`` int numbers;
    compute a ``linspace`` with torch once, as a buffer or an input (torch computes an integer
    linspace in float64 from truncated bounds: no float32 form matches it everywhere);
    count integers: ``mask.long().sum(1)``, ``(x != 0).long().sum(1)``;
    (b) ``coreml-lint lower`` rewrites the divisions, clamps, aranges and counts whose result
    reaches
    an index or a join so in the program, and keeps an integer ``linspace`` on the CPU.

References
    None found: apple/coremltools and pytorch/executorch issues were searched (2026-12)
    without one that reports this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import INTEGER_DTYPES, Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

DIVISIONS = {"aten.div.Tensor_mode", "aten.floor_divide.default"}
CLAMP = "aten.clamp.default"
# Ranges coremltools computes in fp32 whatever their dtype: always (``linspace``), or when a
# number is a float (``arange(0, 8, 2.5, dtype=torch.long)``, ``arange(n / 2, dtype=...)``:
# ``range_1d`` of floats, the numbers promoted together).
LINSPACE = "aten.linspace.default"
ARANGES = {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}
# Counts: coremltools' ``reduce_sum`` of a bool casts it to fp32 (``count_nonzero`` is a
# sum of ``x != 0``); a sum of integers stays integer (measured).
SUMS = {"aten.sum.default", "aten.sum.dim_IntList"}
COUNTS = {"aten.count_nonzero.default", "aten.count_nonzero.dim_IntList"}
# Ops whose integer result Core ML computes from its (here fp32) operands in their type:
# the float carries on to what reads them.
CARRY = {
    "add", "sub", "rsub", "mul", "remainder", "clamp", "clamp_min", "clamp_max", "maximum",
    "minimum", "neg", "abs", "where", "view", "expand", "unsqueeze", "squeeze", "repeat",
    "clone", "slice", "select", "permute", "transpose", "flip", "roll",
}  # fmt: skip
INDEX_READERS = {"gather": (2, "index"), "index_select": (2, "index")}
JOINS = {"stack", "cat"}
READERS = {*INDEX_READERS, *JOINS}


class IntegerResultMadeFloat(Rule):
    code = "CML314"
    name = "integer-result-made-float"
    outcome = Outcome.CRASH
    summary = "integer division, one-sided clamp, range or bool count made float, read as an index"

    def __init__(self) -> None:
        self.linspaces: set[str] = set()  # integer linspace nodes of the ATen graph refused

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        floats: set[str] | None = None
        for node in _candidates(ctx):
            why = _made_float(ctx, node)
            if why is None:
                continue
            floats = _floats(ctx) if floats is None else floats
            reader = _integer_reader(ctx, node, floats)
            if reader is None:
                continue  # its values are the table's to judge (CML801), not a crash
            user, failure = reader
            yield ctx.finding(
                node,
                f"{why}, and {ctx.edge_name(user)} {failure}",
                fix=_fix(node),
                partitioner=ctx.skip_advice(node),
            )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """An integer ``linspace`` stays on the CPU with the pieces torch decomposes it into
        (no rewrite computes torch's values in Core ML, and it has no kernel of its own):
        the ATen graph's node is asked first, then each edge node made from it."""
        from coreml_lint.stack.capture import lineage

        fake = getattr(node, "meta", {}).get("val")
        if node.target == torch.ops.aten.linspace.default and _integer(fake):
            self.linspaces.add(node.name)
            return "an integer linspace is made in fp32 by coremltools: computed by torch"
        if self.linspaces and any(name in self.linspaces for name in lineage(node)):
            return "a piece of an integer linspace, computed by torch"
        return None

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """A floor/trunc division of integers as ``floor``/``trunc`` of the true division
        cast back to the integer dtype; a one-sided clamp as ``clamp_min``/``clamp_max``.
        Only those whose result reaches an index or a join (what the check follows): the
        float32 division is exact only up to 2^24, so no other division is touched."""
        from coreml_lint.rulekit.fx import aten, emit, fake_mode, finish, op_base, reaches, val

        mode, done = None, []
        for node in list(ep.graph.nodes):
            fake = val(node)
            if node.op != "call_function" or not isinstance(fake, torch.Tensor):
                continue  # not one tensor (a sort's values and indices)
            if fake.is_floating_point():
                continue
            if fake.dtype == torch.bool:
                continue
            if not reaches(node, lambda user: op_base(user) in READERS, depth=8):
                continue
            if _float_range(str(node.target), node.args):
                made = _whole_range(ep, node, fake)
                if made is not None:
                    node.replace_all_uses_with(made)
                    ep.graph.erase_node(node)
                    done.append(f"{node.name}: {op_base(node)} made so Core ML keeps it integer")
                continue
            if str(node.target) in {*SUMS, *COUNTS}:
                mode = mode or fake_mode(ep)
                if _count_integers(ep, mode, node, fake):
                    done.append(f"{node.name}: {op_base(node)} counted in {fake.dtype}")
                continue
            if node.target == aten.clamp.default:
                low, high = _bounds(node.args, node.kwargs)
                if (low is None) == (high is None):
                    continue
                node.target = aten.clamp_min.default if high is None else aten.clamp_max.default
                node.args, node.kwargs = (node.args[0], high if low is None else low), {}
                done.append(f"{node.name}: clamp with one bound as {node.target.__name__}")
                continue
            rounding = _rounding(node.target, node.args, node.kwargs)
            if rounding is None:
                continue
            mode = mode or fake_mode(ep)
            with ep.graph.inserting_before(node):
                ratio = emit(ep, mode, aten.div.Tensor, tuple(node.args[:2]))
                rounded = emit(ep, mode, getattr(aten, rounding).default, (ratio,))
                made = emit(ep, mode, aten._to_copy.default, (rounded,), {"dtype": fake.dtype})
            made.meta = {**node.meta, "val": made.meta["val"]}
            node.replace_all_uses_with(made)
            ep.graph.erase_node(node)
            done.append(f"{node.name}: divided as float, {rounding}ed and cast to {fake.dtype}")
        return finish(ep), done


def _count_integers(ep: Any, mode: Any, node: Any, fake: Any) -> bool:
    """A sum of bools as the sum of the bools cast to the result's integer dtype, which
    Core ML keeps integer; a ``count_nonzero`` as that sum of ``x != 0``. False for a sum
    of anything but bools."""
    from coreml_lint.rulekit.fx import aten, emit, val

    operand = node.args[0]
    counts = str(node.target) in COUNTS
    if not counts and getattr(val(operand), "dtype", None) != torch.bool:
        return False
    with ep.graph.inserting_before(node):
        if counts:
            operand = emit(ep, mode, aten.ne.Scalar, (operand, 0))
        cast = emit(ep, mode, aten._to_copy.default, (operand,), {"dtype": fake.dtype})
    if not counts:
        node.args = (cast, *node.args[1:])
        return True
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    with ep.graph.inserting_before(node):
        if dim is None:
            made = emit(ep, mode, aten.sum.default, (cast,))
        else:
            dims = [dim] if isinstance(dim, int) else list(dim)
            made = emit(ep, mode, aten.sum.dim_IntList, (cast, dims))
    made.meta = {**node.meta, "val": made.meta["val"]}
    node.replace_all_uses_with(made)
    ep.graph.erase_node(node)
    return True


def _whole_range(ep: Any, node: Any, fake: Any) -> Any:
    """The integer ``arange`` torch makes, in a form Core ML keeps integer: an arange of
    ints with the start and step truncated as torch truncates them for an integer dtype
    (``arange(0, 8, 2.5)`` of longs is ``[0, 2, 4, 6]``), as many as torch makes. None when
    its numbers are not constants, or for ``linspace``, which no integer form computes as
    torch does (:meth:`IntegerResultMadeFloat.refuse` keeps it on the CPU)."""
    from coreml_lint.rulekit.fx import aten, emit, fake_mode

    if node.target == aten.linspace.default or any(isinstance(a, torch.fx.Node) for a in node.args):
        return None
    numbers = list(node.args) if node.target != aten.arange.default else [0, *node.args]
    start, _end, step = [*numbers, 1][:3]
    start, step = int(start), int(step)
    if step == 0 or not isinstance(fake.shape[0], int):
        return None
    kwargs = {k: v for k, v in node.kwargs.items() if k != "dtype"}
    whole = (start, start + step * fake.shape[0], step)
    with ep.graph.inserting_before(node):
        made = emit(
            ep, fake_mode(ep), aten.arange.start_step, whole, {**kwargs, "dtype": fake.dtype}
        )
    made.meta = {**node.meta, "val": made.meta["val"]}
    return made


# torch computes an integer linspace in float64 from truncated bounds, then truncates: no
# cast of a float32 linspace (Core ML's) matches it everywhere (``linspace(0, 16, 15)[7]``),
# so ``lower`` keeps it on the CPU (``refuse``) rather than rewriting it.
LINSPACE_FIX = (
    "compute the range with torch once: register it as a buffer "
    '(`self.register_buffer("idx", torch.linspace(..., dtype=torch.long))`, a constant '
    "Core ML keeps integer) or pass it in as an input"
)


def _integer(fake: Any) -> bool:
    """Whether a fake tensor holds integers (not float, not bool)."""
    return fake is not None and not fake.is_floating_point() and fake.dtype != torch.bool


def _bounds(args: Any, kwargs: Any) -> tuple[Any, Any]:
    """A clamp's ``min`` and ``max``, positional or keyword (None when left out)."""
    low, high = [*args[1:], None, None][:2]
    return kwargs.get("min", low), kwargs.get("max", high)


def _rounding(target: Any, args: Any, kwargs: Any) -> str | None:
    """``"floor"``/``"trunc"`` for an integer division that rounds, else None (ATen
    targets: the rewrite's; the lint's are their names, see :func:`_made_float`)."""
    name = getattr(target, "__name__", str(target)).removeprefix("aten.")
    if name == "floor_divide.default":
        return "floor"
    if name == "div.Tensor_mode":
        mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
        return mode if mode in ("floor", "trunc") else None
    return None


def _float_range(target: str, args: Any) -> bool:
    """Whether a range op (by its ``aten.<name>.<overload>`` spelling) is one coremltools
    computes in fp32 whatever its dtype."""
    if target == LINSPACE:
        return True
    return target in ARANGES and any(isinstance(a, float) for a in args)


def _made_float(ctx: ProgramContext, node: Node) -> str | None:
    """Why Core ML makes this integer node as float, or None when it does not."""
    if not node.outputs or ctx.dtype(node.outputs[0]) not in INTEGER_DTYPES:
        return None
    if _float_range(node.target, node.args):
        return (
            f"{node.op_base} with an integer dtype is made in fp32 by coremltools "
            f"({ctx.dtype(node.outputs[0])} in torch, fp32 in Core ML)"
        )
    if node.target in DIVISIONS:
        rounding = _rounding(node.target, node.args, node.kwargs)
        if rounding is not None:
            return (
                f"the {rounding} division of integers is made as float by coremltools "
                f"({ctx.dtype(node.outputs[0])} in torch, fp32 in Core ML)"
            )
    if _counts_bools(ctx, node):
        return (
            f"a count of bools ({node.op_base}) is made in fp32 by coremltools: its "
            f"`reduce_sum` casts the bools to fp32 ({ctx.dtype(node.outputs[0])} in torch)"
        )
    if node.target == CLAMP:
        low, high = _bounds(node.args, node.kwargs)
        if (low is None) != (high is None):
            bound = "min" if high is None else "max"
            return (
                f"a clamp of integers with only a {bound} is made as a float clip by "
                "coremltools (its other bound is infinite)"
            )
    return None


def _candidates(ctx: ProgramContext) -> list[Node]:
    """The Core ML nodes this rule reads: the delegated ones, and a ``count_nonzero`` torch
    decomposes into a sum the partitioner delegates."""
    whole = set(map(id, ctx.coreml_nodes()))
    return [
        node
        for node in ctx.coreml_nodes(include_decomposed=True)
        if id(node) in whole or node.target in COUNTS
    ]


def _counts_bools(ctx: ProgramContext, node: Node) -> bool:
    """A ``count_nonzero``, or a ``sum`` whose operand is bool."""
    operands = node.tensor_inputs()
    bools = bool(operands) and ctx.dtype(operands[0]) == "bool"
    return node.target in COUNTS or (node.target in SUMS and bools)


def _integer_reader(ctx: ProgramContext, node: Node, floats: set[str]) -> tuple[Node, str] | None:
    """The Core ML op that fails on the float this node's result is there: an index it
    reaches through integer arithmetic and views (the first one), else a join with another
    integer."""
    carried = {node.outputs[0]}
    joins: list[Node] = []

    def carries(user: Node) -> bool:
        return bool(user.outputs) and user.outputs[0] in carried

    for value, user in ctx.coreml_users_downstream([node.outputs[0]], follow=carries, depth=8):
        position = INDEX_READERS.get(user.op_base)
        index = user.arg(*position) if position else None
        if position and getattr(index, "name", None) == value:
            return user, (
                "reads it as indices: lowering fails with `ValueError: ... expects tensor or "
                "scalar of dtype from type domain ['int32'] but got tensor[...,fp32]`"
            )
        if user.op_base in JOINS and _joins_another_integer(ctx, user, floats):
            joins.append(user)
        out = user.outputs[0] if user.outputs else None
        if user.op_base in CARRY and ctx.dtype(out) in INTEGER_DTYPES:
            carried.add(out)
    if joins:
        return joins[0], (
            "joins it with an integer made otherwise: lowering fails with `ValueError: "
            "Tensors in 'values' of the stack op ... should share the same data type`"
        )
    return None


def _joins_another_integer(ctx: ProgramContext, join: Node, floats: set[str]) -> bool:
    """Whether the join also takes an integer Core ML keeps integer (not one this rule's ops
    made float: ``stack([ids // 4, ids // 2])`` is fp32 beside fp32, and lowers)."""
    others = [v for v in join.tensor_inputs() if v not in floats]
    return any(ctx.dtype(v) in INTEGER_DTYPES for v in others)


def _floats(ctx: ProgramContext) -> set[str]:
    """Every integer value Core ML holds as float because of this rule's ops: their results
    and what integer arithmetic and views carry on from them."""
    sources = [n.outputs[0] for n in _candidates(ctx) if _made_float(ctx, n) is not None]
    floats = set(sources)

    def carries(user: Node) -> bool:
        out = user.outputs[0] if user.outputs else None
        if user.op_base in CARRY and ctx.dtype(out) in INTEGER_DTYPES:
            floats.add(out)
            return True
        return False

    for _ in ctx.coreml_users_downstream(sources, follow=carries, depth=8):
        pass
    return floats


def _fix(node: Node) -> str:
    if node.target == LINSPACE:
        return LINSPACE_FIX
    if _float_range(node.target, node.args):
        return (
            "give it int numbers (torch truncates a float start and step for an integer "
            "dtype: `torch.arange(0, 8, 2.5, dtype=torch.long)` is `torch.arange(0, 8, 2)`)"
        )
    if node.target == CLAMP:
        return "clamp with `x.clamp_min(lo)` / `x.clamp_max(hi)`, or give both bounds"
    if node.target in COUNTS:
        return "count integers: `(x != 0).long().sum(dim)` (a sum of integers stays integer)"
    if node.target in SUMS:
        return "count integers: `mask.long().sum(dim)` (a sum of integers stays integer)"
    rounding = _rounding(node.target, node.args, node.kwargs) or "floor"
    return f"divide as float and cast back: `torch.{rounding}(a / b).long()`"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
INDICES_FP32 = r"gather_along_axis.*\['int32'\] but got"
GATHERED = r"= gather_along_axis\("


def _keypoints(cell: Any) -> tuple[Any, tuple[Any, ...]]:
    """A heatmap's peak cell turned into indices of a feature row (``cell(peak)``)."""
    return module(lambda s, x: x.gather(1, cell(x.argmax(1, keepdim=True)))), (torch.randn(4, 8),)


@case("floor-div-gather-index", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    return _keypoints(lambda peak: peak // 2)


@case("trunc-div-add-gather-index", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    return _keypoints(lambda peak: torch.div(peak, 2, rounding_mode="trunc") + 1)


@case("floor-of-true-div-gather-index", expect=set(), clean=returns(GATHERED))
def _() -> Any:
    return _keypoints(lambda peak: torch.floor(peak / 2).long())


@case("clamp-min-gather-index", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    return _keypoints(lambda peak: (peak - 1).clamp(min=0))


@case("clamp-min-method-gather-index", expect=set(), clean=returns(GATHERED))
def _() -> Any:
    return _keypoints(lambda peak: (peak - 1).clamp_min(0))


@case("floor-div-stack", expect={"CML314"}, crash=r"should share the same data type")
def _() -> Any:
    def forward(s, x, ids):
        return torch.stack([ids // 4, ids], 1) + 1

    return module(forward), (torch.randn(4), torch.arange(8))


@case("floor-divs-stacked", expect=set(), clean=returns(r"= stack\("))
def _() -> Any:
    """Two of its floor divisions joined: fp32 beside fp32 in Core ML, which lowers."""

    def forward(s, x, ids):
        return torch.stack([ids // 4, ids // 2], 1) + 1

    return module(forward), (torch.randn(4), torch.arange(8))


@case("linspace-long-index-select", expect={"CML314"}, crash=r"\['int32'\] but got")
def _() -> Any:
    """Frames sampled evenly along time (``torch.linspace(..., dtype=torch.long)``)."""

    def forward(s, x):
        return x.index_select(1, torch.linspace(0, x.shape[1] - 1, 4, dtype=torch.long))

    return module(forward), (torch.randn(2, 8),)


@case("linspace-buffer-index-select", expect=set(), clean=returns(r"= gather\("))
def _() -> Any:
    model = module(lambda s, x: x.index_select(1, s.frames))
    model.register_buffer("frames", torch.linspace(0, 7, 4, dtype=torch.long))
    return model, (torch.randn(2, 8),)


@case("arange-whole-float-long-index-select", expect={"CML314"}, crash=r"\['int32'\] but got")
def _() -> Any:
    """``arange(n / 2)``: a whole float, still promoted to a float range by coremltools."""
    return module(lambda s, x: x.index_select(1, torch.arange(8 / 2, dtype=torch.long))), (
        torch.randn(2, 8),
    )


@case("arange-fractional-long-index-select", expect={"CML314"}, crash=r"\['int32'\] but got")
def _() -> Any:
    return module(lambda s, x: x.index_select(1, torch.arange(0, 8, 2.5, dtype=torch.long))), (
        torch.randn(2, 8),
    )


@case("arange-whole-long-index-select", expect=set(), clean=returns(r"= gather\("))
def _() -> Any:
    return module(lambda s, x: x.index_select(1, torch.arange(0, 8, 2, dtype=torch.long))), (
        torch.randn(2, 8),
    )


@case("floor-div-returned", expect=set())
def _() -> Any:
    """Only returned: its values are the op table's to judge, no index reads it."""
    return module(lambda s, ids: ids // 4), (torch.arange(8),)


def _last_valid(count: Any) -> tuple[Any, tuple[Any, ...]]:
    """Each row's last valid feature, found by counting the valid ones (``count(valid)``),
    as a model pools the last token of a padded sequence."""

    def forward(s, x, valid):
        return x.gather(1, count(valid).unsqueeze(1) - 1)

    valid = torch.arange(8)[None] < torch.tensor([[3], [8], [5], [1]])
    return module(forward), (torch.randn(4, 8), valid)


@case("bool-count-gather-index", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    return _last_valid(lambda valid: valid.sum(1))


@case("count-nonzero-gather-index", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    return _last_valid(lambda valid: torch.count_nonzero(valid, dim=1))


@case("long-count-gather-index", expect=set(), clean=returns(GATHERED))
def _() -> Any:
    return _last_valid(lambda valid: valid.long().sum(1))


@case("count-nonzeros-stacked", expect=set(), clean=returns(r"= stack\("))
def _() -> Any:
    """Two counts joined: fp32 beside fp32 in Core ML, which lowers."""

    def forward(s, x, valid):
        return torch.stack([torch.count_nonzero(valid, dim=1), torch.count_nonzero(x > 0, dim=1)])

    valid = torch.arange(8)[None] < torch.tensor([[3], [8], [5], [1]])
    return module(forward), (torch.randn(4, 8), valid)


@case("topk-index-floor-div-gather", expect={"CML314"}, crash=INDICES_FP32)
def _() -> Any:
    """The cells of a heatmap's top two peaks: the rewrite passes the top-k's two outputs."""

    def forward(s, x):
        _, peaks = x.topk(2, dim=1)
        return x.gather(1, peaks // 2)

    return module(forward), (torch.randn(4, 8),)

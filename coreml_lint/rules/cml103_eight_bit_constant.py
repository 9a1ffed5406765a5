"""CML103 eight-bit-constant: a uint8/int8 buffer or parameter is a Core ML constant below iOS17.

What it does
    Flags an 8-bit parameter, buffer or lifted constant that a Core ML partition owns
    (``take_over_constant_data=True``, the default) when the deployment target is below
    iOS17. Quantized weights (read by a dequantize op, or cast to float and multiplied) are
    CML107's: each quantization scheme has its own target.

Why it breaks
    The constant reaches MIL as a uint8 numpy array; the ``cast`` and ``slice_by_index`` ops
    of the iOS15/iOS16 opsets accept only fp16, fp32, int32 and bool, so lowering stops with
    ``ValueError: Op ... Input x="b_mask" expects tensor or scalar of dtype from type domain
    ['fp16', 'fp32', 'int32', 'bool'] but got tensor[1,8,uint8]``. With
    ``take_over_constant_data=False`` it becomes a partition input instead (CML101).

    Weight-only int8 quantization (``dequantize_per_channel`` of an int8 weight) fails the
    same way below iOS17: ``NotImplementedError: Parameter dtype of the cast operation can
    be one of the ['fp16', 'fp32', 'int32', 'bool']. Provided int8``.

Example
    ``self.register_buffer("mask", torch.tensor([...], dtype=torch.uint8))`` then
    ``x * self.mask.float()``.

Fix
    (a) store the buffer as int32 or float32 (float16 too with the default options);
    (b) minimum deployment target iOS17 or later; (c) widen the buffer in ``ep.state_dict``
    and drop the ``_assert_tensor_metadata`` guards.

References
    - https://github.com/pytorch/executorch/issues/11686
      CoreML partitioner errors out with 8-bit integer types (open)
    - https://github.com/pytorch/executorch/pull/19394
      int8 weights lifted into Core ML subgraphs: `KeyError: torch.int8` (closed unmerged)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import EIGHT_BIT_DTYPES, Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, keyword
from coreml_lint.source.patterns import enclosing_class

EIGHT_BIT_BUFFER = """
class Lut(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("lut", torch.arange(256, dtype=torch.uint8))

    def forward(self, x):
        return x + self.lut[:8].float()
"""
INT32_BUFFER = EIGHT_BIT_BUFFER.replace("dtype=torch.uint8", "dtype=torch.int32")


@replacement
def _retype_buffer(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``register_buffer(name, <8-bit tensor>)`` with the tensor's own dtype made int32
    (the source shows where the dtype is chosen)."""
    return _with_buffer_value(call, _retype, edits)


@replacement
def _widen_buffer(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``register_buffer(name, <any expression>)`` stored ``.to(torch.int32)``: the program
    knows the expression is an 8-bit tensor."""
    return _with_buffer_value(call, _as_int32, edits)


def _with_buffer_value(call: Any, change: Any, edits: Any) -> Any:
    import libcst as cst

    from coreml_lint.rulekit.cst import with_args

    args = list(call.args)
    int32 = cst.parse_expression(f"{edits.torch()}.int32")
    args[1] = args[1].with_changes(value=change(args[1].value, int32))
    return with_args(call, args)


class EightBitConstant(Rule):
    code = "CML103"
    name = "eight-bit-constant"
    outcome = Outcome.CRASH
    summary = "uint8/int8 buffer owned by a Core ML partition below iOS17: MIL type error"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 17:
            return
        from coreml_lint.rules.cml107_quantization_target import quantized_constants

        quantized = quantized_constants(ctx)
        for part in ctx.placement.partitions:
            for value in part.constants:
                dtype = ctx.dtype(value)
                if dtype not in EIGHT_BIT_DTYPES or value in quantized:
                    continue
                readers = ctx.readers_in(value, part)
                if not readers:
                    continue
                spec = next(s for s in ctx.graph.inputs if s.name == value)
                reader = readers[0]
                op = reader.target if ctx.placement.nodes[reader.name].decomposed else None
                yield ctx.finding(
                    reader,
                    f"{dtype} {spec.kind} '{spec.target or value}' becomes a constant of Core ML "
                    f"partition {part.id}; below iOS17 MIL has no 8-bit type for it, so "
                    f"{op or ctx.edge_name(reader)} fails with `ValueError: Op ... expects tensor "
                    "or scalar of dtype from type domain ['fp16', 'fp32', 'int32', 'bool'] but "
                    f"got tensor[...,{dtype}]`",
                    fix=f"store '{spec.target or value}' as int32 or float32 (or float16)",
                    partitioner={"minimum_deployment_target": 17},
                    value=value,
                    dtype=dtype,
                    **_where_built(ctx, value, spec.target or value, readers[0]),
                )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The ``register_buffer`` call that made the buffer, found by the buffer's name in
        the class the program says owns it, stores it as int32 when every use the program
        shows only reads its values into a wider dtype (``self.lut[idx].float()``)."""
        owner, attribute = finding.extra.get("owner"), finding.extra.get("attribute")
        if not owner or not attribute:
            return None
        if not finding.extra.get("widening_is_safe"):
            return f"'{attribute}' is used as {finding.extra.get('dtype')} values, not only read"
        for cls in source.classes(owner.rsplit(".", 1)[-1]):
            call = registered_buffer(cls, attribute)
            if call is not None and _widened_already(call.args[1]):
                return f"'{attribute}' is already stored as int32 in the source: export again"
            if call is not None:
                return source.edit(
                    call, _widen_buffer, safe=True, description="store the buffer as int32"
                )
        return f"no `self.register_buffer('{attribute}', ...)` in a class {owner} of this file"

    source_triggers = ("register_buffer",)
    source_pattern = "`register_buffer(name, <uint8/int8 tensor>)`"
    source_fix = "store as int32, when every use casts it"
    examples = (
        Invalid(
            EIGHT_BIT_BUFFER,
            EIGHT_BIT_BUFFER.replace("dtype=torch.uint8", "dtype=torch.int32"),
            at=(5, 9),
        ),
        Valid(EIGHT_BIT_BUFFER.replace("dtype=torch.uint8", "dtype=torch.int32")),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        settings = ctx.config.partitioner if ctx.config else None
        if (
            settings
            and settings.minimum_deployment_target >= 17
            and settings.take_over_constant_data
        ):
            return
        for call in ctx.calls():
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "register_buffer"):
                continue
            if len(call.args) < 2 or not isinstance(call.args[0], ast.Constant):
                continue
            name, value = call.args[0].value, call.args[1]
            dtype = eight_bit_dtype(ctx, value)
            if dtype is None or not isinstance(name, str):
                continue
            cls = enclosing_class(ctx, call)
            all_cast = cls is not None and _every_use_is_cast(ctx, cls, name)
            yield ctx.finding(
                call,
                f"buffer '{name}' is stored as {dtype}: below iOS17 Core ML has no 8-bit type "
                "for it and lowering fails (`expects ... ['fp16', 'fp32', 'int32', 'bool'] but "
                f"got tensor[...,{dtype}]`; `KeyError: torch.{dtype}` with "
                "take_over_constant_data=False)",
                fix=f"store '{name}' as int32 (every {dtype} value fits)"
                if all_cast
                else f"store '{name}' as int32 where its values are only read ({dtype} "
                "arithmetic wraps around, int32 arithmetic does not), or target iOS17+",
                edit=ctx.edit(
                    call, _retype_buffer, safe=True, description="store the buffer as int32"
                )
                if all_cast
                else None,
                partitioner={"minimum_deployment_target": 17},
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """uint8/int8 parameters and buffers stored as int32, their dtype guards dropped."""
        import torch

        from coreml_lint.rulekit.fx import EIGHT_BIT, aten, finish, val

        done = []
        signature = ep.graph_signature
        targets = {**signature.inputs_to_buffers, **signature.inputs_to_parameters}
        for node in list(ep.graph.nodes):
            fake = val(node)
            key = targets.get(node.name) if node.op == "placeholder" else None
            if key is None or fake is None or fake.dtype not in EIGHT_BIT:
                continue
            if key not in ep.state_dict:
                continue
            ep.state_dict[key] = ep.state_dict[key].to(torch.int32)
            with fake.fake_mode:
                node.meta["val"] = torch.empty_strided(fake.shape, fake.stride(), dtype=torch.int32)
            done.append(f"{key}: {fake.dtype} buffer stored as int32")
        if not done:
            return ep, []
        # The dtype guards export inserted would fail on the widened buffers.
        for node in list(ep.graph.nodes):
            if node.target == aten._assert_tensor_metadata.default:
                ep.graph.erase_node(node)
        finish(ep)
        return ep.run_decompositions({}), done  # re-derives every node's metadata

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        from coreml_lint.rulekit.fx import EIGHT_BIT, touches

        return "touches a uint8/int8 tensor" if touches(node, EIGHT_BIT) else None


# Ops through which a buffer's values only travel (indexed, viewed, copied) before a cast.
_READ_ONLY = {
    "index",
    "select",
    "slice",
    "view",
    "_unsafe_view",
    "reshape",
    "expand",
    "unsqueeze",
    "squeeze",
    "permute",
    "t",
    "transpose",
    "clone",
    "gather",
    "index_select",
    "embedding",
}
_WIDE = {"float16", "float32", "float64", "int32", "int64"}


def _where_built(ctx: ProgramContext, value: str, target: str, reader: Node) -> dict[str, Any]:
    """What a program-guided fix needs: the buffer's attribute name, the class of the
    module that registered it, and whether every use only reads its values into a wider
    dtype (then storing it as int32 changes nothing the model computes)."""
    owner_path, _, attribute = target.rpartition(".")
    owner = next((cls for path, cls in reader.modules() if path == owner_path), None)
    widening_is_safe = _only_widened(ctx, value)
    return {"attribute": attribute, "owner": owner, "widening_is_safe": widening_is_safe}


def _only_widened(ctx: ProgramContext, value: str) -> bool:
    """Whether the constant's values reach only casts to a wider dtype, through read-only
    ops, wherever they go."""
    frontier, seen = [value], {value}
    while frontier:
        for user in ctx.users.get(frontier.pop(), []):
            if user.target == "aten._to_copy.default" and ctx.dtype(user.outputs[0]) in _WIDE:
                continue
            if user.op_base not in _READ_ONLY:
                return False
            for out in user.outputs:
                if out not in seen:
                    seen.add(out)
                    frontier.append(out)
    return True


def registered_buffer(cls: ast.ClassDef, name: str) -> ast.Call | None:
    """``self.register_buffer("<name>", value)`` in a method of ``cls``."""
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == name
        ):
            return node
    return None


def _widened_already(value: ast.expr) -> bool:
    """``<expr>.to(torch.int32)``: the fix's own output, seen against a stale program."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "to"
        and len(value.args) == 1
        and ast.unparse(value.args[0]).endswith("int32")
    )


def _as_int32(value: Any, widened: Any) -> Any:
    """``value.to(torch.int32)``, in parentheses when ``value`` needs them."""
    import libcst as cst

    simple = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
    base = (
        value
        if isinstance(value, simple)
        else value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    )
    return cst.Call(func=cst.Attribute(base, cst.Name("to")), args=[cst.Arg(widened)])


_EIGHT_BIT_METHODS = {"byte": "uint8", "char": "int8"}


def eight_bit_dtype(ctx: SourceContext, expr: ast.AST) -> str | None:
    """``uint8``/``int8`` when the expression visibly makes an 8-bit tensor."""
    if not isinstance(expr, ast.Call):
        return None
    for name in ("uint8", "int8"):
        if ctx.is_torch_dtype(keyword(expr, "dtype"), {name}):
            return name
    func = expr.func
    if isinstance(func, ast.Attribute):
        if func.attr in _EIGHT_BIT_METHODS and not expr.args:
            return _EIGHT_BIT_METHODS[func.attr]
        if func.attr in ("to", "type") and len(expr.args) == 1:
            for name in ("uint8", "int8"):
                if ctx.is_torch_dtype(expr.args[0], {name}):
                    return name
    return None


_CASTS = {"float", "half", "double", "int", "long", "to", "type"}


def _every_use_is_cast(ctx: SourceContext, cls: ast.ClassDef, name: str) -> bool:
    """Every ``self.<name>`` read in the class is cast (maybe after slicing) right away, so
    storing the buffer as int32 changes nothing the model computes."""
    uses = 0
    for node in ast.walk(cls):
        if not (
            isinstance(node, ast.Attribute)
            and node.attr == name
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Load)
        ):
            continue
        uses += 1
        parent = ctx.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node, parent = parent, ctx.parents.get(parent)
        call = ctx.parents.get(parent)
        if not (
            isinstance(parent, ast.Attribute)
            and parent.value is node
            and parent.attr in _CASTS
            and isinstance(call, ast.Call)
            and call.func is parent
        ):
            return False
        if parent.attr in ("to", "type") and (
            not call.args or ctx.qualname(call.args[0]) not in _WIDE_DTYPES
        ):
            return False
    return uses > 0


_WIDE_DTYPES = {
    f"torch.{n}"
    for n in (
        "float32",
        "float",
        "float16",
        "half",
        "float64",
        "double",
        "int32",
        "int",
        "int64",
        "long",
    )
}


def _retype(value: Any, widened: Any) -> Any:
    """The same tensor expression, made as int32 instead of 8 bits."""
    import libcst as cst

    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in _EIGHT_BIT_METHODS:
        return value.with_changes(func=func.with_changes(attr=cst.Name("int")))
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value in ("to", "type")
        and len(value.args) == 1
    ):
        return value.with_changes(args=[value.args[0].with_changes(value=widened)])
    args = [
        a.with_changes(value=widened) if a.keyword is not None and a.keyword.value == "dtype" else a
        for a in value.args
    ]
    return value.with_changes(args=args)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def mask_buffer() -> Any:
    return torch.tensor([[0, 1, 200, 255, 3, 0, 7, 9]], dtype=torch.uint8)


@case("uint8-buffer", expect={"CML103"}, crash=r"type domain .*but got tensor\[1,8,uint8\]")
def _():
    return module(lambda s, x: x * s.mask.float(), mask=mask_buffer()), (torch.randn(1, 8),)


@case("uint8-buffer-ios17", expect=set(), settings={"ios": 17})
def _():
    return module(lambda s, x: x * s.mask.float(), mask=mask_buffer()), (torch.randn(1, 8),)


@case(
    "uint8-buffer-not-taken-over",
    expect={"CML101"},
    settings={"take_over_constant_data": False},
    crash=r"KeyError: torch\.uint8",
)
def _():
    return module(lambda s, x: x * s.mask.float(), mask=mask_buffer()), (torch.randn(1, 8),)


@case("int32-buffer", expect=set())
def _():
    return module(lambda s, x: x * s.mask.float(), mask=mask_buffer().to(torch.int32)), (
        torch.randn(1, 8),
    )


@case("uint8-lut-sliced", expect={"CML103"}, crash=r"slice_by_index.*but got tensor\[256,uint8\]")
def _():
    lut = torch.arange(256).to(torch.uint8)
    return module(lambda s, x: x + s.lut[:8].float(), lut=lut), (torch.randn(8),)


@case("float16-lut", expect=set())
def _():
    lut = torch.arange(256).to(torch.float16)
    return module(lambda s, x: x + s.lut[:8].float(), lut=lut), (torch.randn(8),)

"""Attention-mask fills that float16 cannot hold, as the source shows them (CML310).

A fill counts when all three are plain in one function:

- the value is beyond float16's range and finite in float32: ``torch.finfo(torch.float32)
  .min`` (or ``torch.finfo()``, ``float``/``float64``), or a number literal below -65504
  (``-1e9``). ``torch.finfo(x.dtype).min`` is left out: it is float16's own minimum in a
  float16 model, and the source does not say which the model is; ``-inf`` is left out too
  (eager gives NaN on a fully masked row as well);
- which positions are masked depends on a parameter of the function (a padding mask passed
  in), followed through the function's assignments: a mask made from constants or buffers
  only (a causal mask) never masks a whole row;
- the filled value reaches a softmax (``softmax`` call or method) or the ``attn_mask`` of
  ``scaled_dot_product_attention`` in the same function, through its assignments.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from coreml_lint.source.context import SourceContext, keyword
from coreml_lint.source.patterns import resolved_qualname

FP16_MAX = 65504.0
_WIDE = {"torch.float32", "torch.float", "torch.float64", "torch.double"}
_SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
_SDPA = "torch.nn.functional.scaled_dot_product_attention"


def overflowing_mask_fills(ctx: SourceContext) -> Iterator[tuple[ast.Call, ast.expr]]:
    """(the fill call, its value expression) for each fill the module docstring describes."""
    for function in ast.walk(ctx.tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]} - {"self"}
        flows = _flows(function)
        for call in _calls(function):
            parts = _fill_parts(ctx, call)
            if parts is None:
                continue
            mask, value = parts
            if not _overflows(ctx, value) or not _depends_on(mask, params, flows):
                continue
            if _reaches_softmax(ctx, call, function, flows):
                yield call, value


def _calls(function: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            yield node


def _fill_parts(ctx: SourceContext, call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """(mask, value) of ``x.masked_fill(mask, value)`` / ``torch.masked_fill(x, mask,
    value)`` / ``torch.where(mask, value, x)`` / ``torch.where(mask, x, value)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("masked_fill", "masked_fill_"):
        if ctx.qualname(func) == "torch.masked_fill" and len(call.args) == 3:
            return call.args[1], call.args[2]
        if len(call.args) == 2:
            return call.args[0], call.args[1]
        return None
    if resolved_qualname(ctx, func) == "torch.where" and len(call.args) == 3:
        mask, a, b = call.args
        return (mask, a) if _overflows(ctx, a) else (mask, b)
    return None


def _overflows(ctx: SourceContext, value: ast.expr) -> bool:
    number = _number(value)
    if number is not None:
        return number < -FP16_MAX and number != float("-inf")
    if not (isinstance(value, ast.Attribute) and value.attr == "min"):
        return False
    finfo = value.value
    if not isinstance(finfo, ast.Call) or resolved_qualname(ctx, finfo.func) != "torch.finfo":
        return False
    if not finfo.args and not finfo.keywords:
        return True  # torch.finfo() is float32's
    dtype = finfo.args[0] if finfo.args else keyword(finfo, "type")
    return dtype is not None and ctx.qualname(dtype) in _WIDE


def _number(value: ast.expr) -> float | None:
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        inner = _number(value.operand)
        return -inner if inner is not None else None
    if isinstance(value, ast.Constant) and type(value.value) in (int, float):
        return float(value.value)
    return None


def _flows(function: ast.AST) -> dict[str, list[ast.expr]]:
    """Every value each local name is assigned in the function."""
    flows: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        flows.setdefault(name.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            flows.setdefault(node.target.id, []).append(node.value)
    return flows


_METADATA = {"shape", "dtype", "device", "ndim"}


def _names(expr: ast.AST) -> set[str]:
    """The names whose values ``expr`` reads; not those it reads only the metadata of
    (``x.shape``, ``x.size(1)``, ``x.dtype``): a causal mask sized from the input still
    masks no whole row."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in _METADATA:
            continue
        if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "dim"))
            or (isinstance(node.func, ast.Name) and node.func.id == "len")
        ):
            stack.extend(node.args)
            continue
        if isinstance(node, ast.Name):
            found.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _depends_on(expr: ast.expr, params: set[str], flows: dict[str, list[ast.expr]]) -> bool:
    """Whether ``expr`` reads one of ``params``, through local assignments."""
    seen: set[str] = set()
    todo = list(_names(expr))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in params:
            return True
        for value in flows.get(name, []):
            todo.extend(_names(value))
    return False


def _reaches_softmax(
    ctx: SourceContext, fill: ast.Call, function: ast.AST, flows: dict[str, list[ast.expr]]
) -> bool:
    """Whether the fill's result is (through assignments) what a softmax or an SDPA mask
    reads in this function."""
    carriers = {id(fill)}
    tainted: set[str] = set()
    changed = True
    while changed:  # names assigned from the fill, or from names assigned from it
        changed = False
        for name, values in flows.items():
            if name not in tainted and any(_carries(v, carriers, tainted) for v in values):
                tainted.add(name)
                changed = True
    for call in _calls(function):
        read = _softmax_input(ctx, call)
        if read is not None and _carries(read, carriers, tainted):
            return True
    return False


def _carries(expr: ast.AST, carriers: set[int], tainted: set[str]) -> bool:
    return any(
        id(node) in carriers or (isinstance(node, ast.Name) and node.id in tainted)
        for node in ast.walk(expr)
    )


def _softmax_input(ctx: SourceContext, call: ast.Call) -> ast.expr | None:
    func = call.func
    name = resolved_qualname(ctx, func)
    if name in _SOFTMAX and call.args:
        return call.args[0]
    if name == _SDPA:
        return call.args[3] if len(call.args) > 3 else keyword(call, "attn_mask")
    if isinstance(func, ast.Attribute) and func.attr == "softmax" and name is None:
        return func.value
    return None

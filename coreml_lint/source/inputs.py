"""Example inputs a file exports a model with, and the dtypes the source states for them.

An example input is an element of the argument tuple of ``torch.export.export(model,
args)``, or of the ``example_inputs`` of a ``{name: (module, example_inputs)}`` dict that a
function returns (the ``programs`` factories ``coreml-lint --export`` builds). Its dtype
counts only when the expression says it: ``x.half()``, ``x.to(torch.float16)``,
``torch.randn(..., dtype=torch.float16)``, ``.byte()``, or a local name assigned once from
one of those. Everything else (a tensor loaded from a file, a parameter) has no dtype
here, so nothing is said about it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from coreml_lint.source.context import SourceContext, keyword
from coreml_lint.source.patterns import enclosing_function, single_assignment

_METHOD_DTYPES = {
    "half": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "byte": "uint8",
    "char": "int8",
    "int": "int32",
    "long": "int64",
}
_FACTORIES = {
    "torch.randn",
    "torch.rand",
    "torch.zeros",
    "torch.ones",
    "torch.empty",
    "torch.full",
    "torch.randint",
    "torch.tensor",
    "torch.arange",
}


def example_inputs(ctx: SourceContext) -> Iterator[ast.expr]:
    """Every example input expression of the file (see the module docstring)."""
    for call in ctx.calls():
        if ctx.qualname(call.func) == "torch.export.export" and len(call.args) >= 2:
            yield from _elements(ctx, call.args[1], call)
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            for value in node.value.values:
                if isinstance(value, ast.Tuple) and len(value.elts) in (2, 3):
                    yield from _elements(ctx, value.elts[1], node)


def _elements(ctx: SourceContext, args: ast.expr, at: ast.AST) -> Iterator[ast.expr]:
    if isinstance(args, ast.Name):
        bound = single_assignment(ctx, args.id, enclosing_function(ctx, at))
        args = bound if bound is not None else args
    if isinstance(args, (ast.Tuple, ast.List)):
        yield from args.elts
    else:
        yield args  # one tensor given alone


def input_dtype(ctx: SourceContext, expr: ast.expr, depth: int = 0) -> str | None:
    """The dtype name the source states for ``expr`` (``"float16"``), else None."""
    if isinstance(expr, ast.Name) and depth < 3:
        bound = single_assignment(ctx, expr.id, enclosing_function(ctx, expr))
        return input_dtype(ctx, bound, depth + 1) if bound is not None else None
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    method = isinstance(func, ast.Attribute) and ctx.qualname(func) is None  # not torch.<f>
    if method and func.attr in _METHOD_DTYPES and not expr.args:
        return _METHOD_DTYPES[func.attr]
    if method and func.attr == "to":
        dtype = keyword(expr, "dtype") or next((a for a in expr.args if _dtype_name(ctx, a)), None)
        return _dtype_name(ctx, dtype)
    if ctx.qualname(func) in _FACTORIES:
        return _dtype_name(ctx, keyword(expr, "dtype"))
    return None


def _dtype_name(ctx: SourceContext, expr: ast.expr | None) -> str | None:
    name = ctx.qualname(expr) if expr is not None else None
    if name is None or not name.startswith("torch."):
        return None
    short = name[len("torch.") :]
    aliases = {"half": "float16", "float": "float32", "double": "float64", "long": "int64"}
    short = aliases.get(short, short)
    known = {"float16", "bfloat16", "float32", "float64", "uint8", "int8", "int32", "int64"}
    return short if short in known else None

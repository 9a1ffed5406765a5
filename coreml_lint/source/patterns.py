"""Small static facts about expressions that several source rules share."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.source.context import SourceContext, int_literal, keyword

_BOOL_FUNCTIONS = {
    "torch.logical_and",
    "torch.logical_or",
    "torch.logical_not",
    "torch.logical_xor",
    "torch.isnan",
    "torch.isinf",
    "torch.isfinite",
    "torch.eq",
    "torch.ne",
    "torch.gt",
    "torch.ge",
    "torch.lt",
    "torch.le",
}
_BOOL_METHODS = {
    "bool",
    "logical_and",
    "logical_or",
    "logical_not",
    "isnan",
    "isinf",
    "eq",
    "ne",
    "gt",
    "ge",
    "lt",
    "le",
}
# Ops whose result has their first tensor argument's dtype.
_SAME_DTYPE_FUNCTIONS = {
    "torch.triu",
    "torch.tril",
    "torch.flip",
    "torch.roll",
    "torch.clone",
    "torch.transpose",
    "torch.permute",
    "torch.reshape",
    "torch.unsqueeze",
    "torch.squeeze",
}
_SAME_DTYPE_METHODS = {
    "triu",
    "tril",
    "flip",
    "roll",
    "clone",
    "contiguous",
    "transpose",
    "permute",
    "reshape",
    "view",
    "unsqueeze",
    "squeeze",
    "expand",
    "expand_as",
    "repeat",
    "detach",
}
_FACTORIES = {
    "torch.ones",
    "torch.zeros",
    "torch.full",
    "torch.empty",
    "torch.tensor",
    "torch.ones_like",
    "torch.zeros_like",
    "torch.full_like",
    "torch.empty_like",
}


def enclosing_function(ctx: SourceContext, node: ast.AST) -> ast.AST:
    current = ctx.parents.get(node)
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
        current = ctx.parents.get(current)
    return current or ctx.tree


def enclosing_class(ctx: SourceContext, node: ast.AST) -> ast.ClassDef | None:
    current = ctx.parents.get(node)
    while current is not None and not isinstance(current, ast.ClassDef):
        current = ctx.parents.get(current)
    return current


def single_assignment(ctx: SourceContext, name: str, scope: ast.AST) -> ast.expr | None:
    """The value of ``name`` when the scope assigns it exactly once, else None."""
    values = _assignments(ctx, scope).get(name, [])
    return values[0] if len(values) == 1 else None


def is_rebound(ctx: SourceContext, name: str, scope: ast.AST) -> bool:
    """Whether the scope binds ``name`` anywhere (assignment, loop, ``with``)."""
    return name in _assignments(ctx, scope)


def _assignments(ctx: SourceContext, scope: ast.AST) -> dict[str, list[ast.expr | None]]:
    """Every value each plain name is bound to in a scope (loops and ``with`` count as
    unknown bindings), computed once per scope."""
    cache = ctx.memo.setdefault("assignments", {})
    if scope in cache:
        return cache[scope]
    bound: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            bound.setdefault(node.target.id, []).extend([None, None])
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem)):
            target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            for t in ast.walk(target) if target is not None else ():
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).extend([None, None])
    cache[scope] = bound
    return bound


def is_bool(ctx: SourceContext, expr: ast.AST | None, scope: ast.AST, depth: int = 0) -> bool:
    """Whether ``expr`` is visibly a bool tensor: a comparison, a logical op, a bool factory,
    or a local name assigned once from one of those."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, ast.Compare):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return is_bool(ctx, expr.operand, scope, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return is_bool(ctx, expr.left, scope, depth + 1) and is_bool(
            ctx, expr.right, scope, depth + 1
        )
    if isinstance(expr, ast.Name):
        value = single_assignment(ctx, expr.id, scope)
        return value is not None and is_bool(ctx, value, scope, depth + 1)
    if isinstance(expr, ast.Call):
        name = ctx.qualname(expr.func)
        if name in _BOOL_FUNCTIONS:
            return True
        if name in _SAME_DTYPE_FUNCTIONS and expr.args:
            return is_bool(ctx, expr.args[0], scope, depth + 1)
        if (
            name is None
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in _SAME_DTYPE_METHODS
        ):
            return is_bool(ctx, expr.func.value, scope, depth + 1)
        if name in _FACTORIES:
            return ctx.is_torch_dtype(keyword(expr, "dtype"), {"bool"})
        if isinstance(expr.func, ast.Attribute):
            if expr.func.attr in _BOOL_METHODS and name is None:
                return True
            if expr.func.attr == "to" and expr.args:
                return ctx.is_torch_dtype(expr.args[0], {"bool"})
    return False


def is_simple(expr: ast.AST) -> bool:
    """Safe to repeat in generated code: a name, an attribute chain or a constant."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, (ast.Name, ast.Constant)) or (
        isinstance(expr, ast.Tuple) and all(is_simple(e) for e in expr.elts)
    )


def assigned_calls(
    cls: ast.ClassDef, attribute: str
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]]:
    """Each ``self.<attribute> = <callee>(...)`` in a method of ``cls``, with the method."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(method):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == attribute
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    yield method, node.value


def parameter_default(
    function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> ast.expr | None:
    """The default value of ``function``'s parameter ``name`` (``norm_layer=nn.RMSNorm``)."""
    args = function.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    with_defaults = positional[len(positional) - len(args.defaults) :]
    defaults = dict(zip(with_defaults, args.defaults, strict=True))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is not None:
            defaults[arg.arg] = default
    return defaults.get(name)


def bound_constant(ctx: SourceContext, expr: ast.AST | None, at: ast.AST) -> Any:
    """The literal value ``expr`` stands for at ``at``: a literal, a module-level constant,
    a local name its function binds once to a literal, or ``self.<name>`` that its class
    binds exactly once, in ``__init__``, to a literal (``self.base = 3001``). Else None:
    a name bound twice, in a loop or by a parameter could hold anything."""
    literal = int_literal(expr)
    if literal is not None:
        return literal
    value = ctx.constant(expr)
    if value is not None:
        return value
    if isinstance(expr, ast.Name):
        scope = enclosing_function(ctx, at)
        if scope is not ctx.tree and not _is_parameter(scope, expr.id):
            bound = single_assignment(ctx, expr.id, scope)
            return int_literal(bound) if int_literal(bound) is not None else ctx.constant(bound)
        return None
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
        and (cls := enclosing_class(ctx, at)) is not None
    ):
        values = _attribute_assignments(ctx, cls).get(expr.attr, [])
        if len(values) == 1 and values[0] is not None:
            literal = int_literal(values[0])
            return literal if literal is not None else ctx.constant(values[0])
    return None


def _is_parameter(function: ast.AST, name: str) -> bool:
    args = getattr(function, "args", None)
    if args is None:
        return False
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return any(a is not None and a.arg == name for a in every)


def _attribute_assignments(ctx: SourceContext, cls: ast.ClassDef) -> dict[str, list[Any]]:
    """The values each ``self.<name>`` is bound to in the class's methods; a binding
    outside ``__init__``, augmented, or by unpacking counts as unknown (None)."""
    cache = ctx.memo.setdefault("attribute_assignments", {})
    if cls in cache:
        return cache[cls]
    bound: dict[str, list[Any]] = {}
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        in_init = method.name == "__init__"
        for node in ast.walk(method):
            targets: list[ast.AST] = []
            value = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets, value = [node.target], None
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem)):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                targets = [target] if target is not None else []
            for target in targets:
                for t in ast.walk(target):
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        plain = t is target and in_init and isinstance(node, ast.Assign)
                        bound.setdefault(t.attr, []).append(value if plain else None)
    cache[cls] = bound
    return bound


def resolved_qualname(ctx: SourceContext, expr: ast.AST | None) -> str | None:
    """``ctx.qualname``, also through a module-level alias bound once (``RMSNorm =
    nn.RMSNorm``, then ``RMSNorm(d)``)."""
    if expr is None:
        return None
    name = ctx.qualname(expr)
    if name is not None or not isinstance(expr, ast.Name):
        return name
    aliases = ctx.memo.setdefault("module_aliases", {})
    if expr.id not in aliases:
        value = None
        if len(_assignments(ctx, ctx.tree).get(expr.id, [])) == 1:
            value = next(
                (
                    stmt.value
                    for stmt in ctx.tree.body
                    if isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == expr.id
                ),
                None,
            )
        aliases[expr.id] = ctx.qualname(value) if value is not None else None
    return aliases[expr.id]

"""Symbolic sizes of a dynamic program, evaluated without torch or sympy.

A program exported with ``torch.export.Dim`` records each size as text: tensor sizes and
symbolic ints as sympy's ``srepr`` (``Mul(Integer(16), Symbol('s1', positive=True,
integer=True))``), range-constraint keys as printed expressions (``16*s1``). Rules need
to know what a size can be (is an upsample's output a fixed multiple of its input over
every size the constraints allow?), so we parse both spellings with ``ast`` into a small
expression tree and evaluate it at sample points drawn from the constraints. Nothing is
executed: only whitelisted sympy/torch function names are understood, anything else makes
the expression unknown (None), and a rule must then stay silent.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

Number = Fraction
Env = Mapping[str, int]
# An unbounded Dim (``max_val: None``) is sampled up to this multiple of its example size.
UNBOUNDED_FACTOR = 8


class Unknown(Exception):
    """The expression uses something we do not model."""


def _floor_div(a: Number, b: Number) -> Number:
    if b == 0:
        raise Unknown("division by zero")
    return Number(math.floor(a / b))


def _ceil_div(a: Number, b: Number) -> Number:
    if b == 0:
        raise Unknown("division by zero")
    return Number(math.ceil(a / b))


def _true_div(a: Number, b: Number) -> Number:
    if b == 0:
        raise Unknown("division by zero")
    return a / b


def _mod(a: Number, b: Number) -> Number:
    if b == 0:
        raise Unknown("division by zero")
    return a - b * math.floor(a / b)


# Sizes are far below this; a value beyond it comes from a hostile or damaged archive (nested
# powers could otherwise build numbers of any size).
LIMIT = 1 << 64


def _bounded(value: Number) -> Number:
    if abs(value) > LIMIT or value.denominator > LIMIT:
        raise Unknown("value out of range")
    return value


def _pow(a: Number, b: Number) -> Number:
    if b.denominator != 1 or abs(b) > 64:
        raise Unknown("non-integer power")
    if a != 0 and abs(a) != 1 and abs(a.numerator).bit_length() * abs(int(b)) > 128:
        raise Unknown("value out of range")
    return _bounded(a ** int(b))


def _product(*values: Number) -> Number:
    out = Number(1)
    for value in values:
        out = _bounded(out * value)
    return out


# sympy / torch.utils._sympy function names a size expression can use.
FUNCTIONS: dict[str, Callable[..., Number]] = {
    "Add": lambda *v: sum(v, Number(0)),
    "Mul": _product,
    "Pow": _pow,
    "FloorDiv": _floor_div,
    "CeilDiv": _ceil_div,
    "CleanDiv": _floor_div,
    "IntTrueDiv": _true_div,
    "FloatTrueDiv": _true_div,
    "Mod": _mod,
    "PythonMod": _mod,
    "Max": lambda *v: max(v),
    "Min": lambda *v: min(v),
    "Abs": abs,
    "FloorToInt": lambda v: Number(math.floor(v)),
    "CeilToInt": lambda v: Number(math.ceil(v)),
    "TruncToInt": lambda v: Number(math.trunc(v)),
    "ToFloat": lambda v: v,
    "floor": lambda v: Number(math.floor(v)),
    "ceiling": lambda v: Number(math.ceil(v)),
}
BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: _floor_div,
    ast.Div: _true_div,
    ast.Mod: _mod,
    ast.Pow: _pow,
}


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _eval(node: ast.expr, env: Env) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return Number(node.value)
    if isinstance(node, ast.Name):
        if node.id in env:
            return Number(env[node.id])
        raise Unknown(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return _bounded(BINARY[type(node.op)](_eval(node.left, env), _eval(node.right, env)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name == "Symbol" and node.args and isinstance(node.args[0], ast.Constant):
            symbol = str(node.args[0].value)
            if symbol in env:
                return Number(env[symbol])
            raise Unknown(symbol)
        if name in ("Integer", "Float") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return Number(first.value)  # Float('0.5', precision=53)
            return _eval(first, env)
        if name == "Rational" and len(node.args) == 2:
            return _true_div(_eval(node.args[0], env), _eval(node.args[1], env))
        if name in FUNCTIONS:
            return FUNCTIONS[name](*(_eval(arg, env) for arg in node.args))
    raise Unknown(ast.dump(node)[:40])


def evaluate(size: int | str, env: Env) -> Number | None:
    """The value of a size (an int, or an expression in either spelling) at ``env``, or
    None when it uses something unknown."""
    if isinstance(size, int):
        return Number(size)
    tree = _parse(size)
    if tree is None:
        return None
    try:
        return _eval(tree, env)
    except (Unknown, ArithmeticError, TypeError, ValueError, RecursionError):
        return None


def symbols(size: int | str) -> frozenset[str]:
    """The symbols a size depends on (empty for a static size)."""
    if isinstance(size, int):
        return frozenset()
    tree = _parse(size)
    if tree is None:
        return frozenset()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in FUNCTIONS:
            found.add(node.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Symbol"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return frozenset(found - {"Symbol", "Integer", "Rational", "Float"})


_INFIX = {"Add": " + ", "Mul": "*"}
_WRAPPERS = ("Integer", "Float", "ToFloat", "TruncToInt", "FloorToInt")


def pretty(size: int | str) -> str:
    """A size as a person writes it: ``Mul(Integer(16), Symbol('s1', ...))`` -> ``16*s1``."""
    if isinstance(size, int):
        return str(size)
    tree = _parse(size)
    return size if tree is None else _pretty(tree)


def _pretty(node: ast.expr) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name, args = node.func.id, node.args
        if name == "Symbol" and args and isinstance(args[0], ast.Constant):
            return str(args[0].value)
        if name in _WRAPPERS and len(args) == 1:
            inner = args[0]
            if isinstance(inner, ast.Constant):
                return str(inner.value)
            return _pretty(inner)
        if name in _INFIX:
            return "(" + _INFIX[name].join(_pretty(a) for a in args) + ")"
        if name == "FloorDiv" and len(args) == 2:
            return f"({_pretty(args[0])} // {_pretty(args[1])})"
        return f"{name}({', '.join(_pretty(a) for a in args)})"
    return ast.unparse(node)


def is_plain_symbol(size: int | str) -> bool:
    """Whether a size is one symbol (``Symbol('s0', ...)`` or ``s0``), not an expression."""
    if isinstance(size, int):
        return False
    tree = _parse(size)
    if isinstance(tree, ast.Name):
        return True
    return (
        isinstance(tree, ast.Call)
        and isinstance(tree.func, ast.Name)
        and tree.func.id == "Symbol"
        and len(tree.args) == 1
    )


def same_size(a: int | str, b: int | str, points: list[dict[str, int]]) -> bool:
    """Whether two sizes agree at every sample point (and can be evaluated there)."""
    if not points:
        return False
    for env in points:
        x, y = evaluate(a, env), evaluate(b, env)
        if x is None or y is None or x != y:
            return False
    return True


def is_symbolic(size: int | str) -> bool:
    return not isinstance(size, int)


def symbol_ranges(meta: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Each plain symbol's (min, max) from a graph's ``range_constraints``; a missing
    bound is filled from the example size (the hints of ``sym_values``) so every symbol
    can be sampled."""
    hints = example_sizes(meta)
    ranges: dict[str, tuple[int, int]] = {}
    for key, (low, high) in (meta.get("range_constraints") or {}).items():
        if not key.isidentifier():
            continue  # a derived dim's expression (``16*s1``): its symbol has its own entry
        low = low if low is not None else 0
        if high is None:
            high = max(low, hints.get(key, low)) * UNBOUNDED_FACTOR or UNBOUNDED_FACTOR
        ranges[key] = (low, high)
    return ranges


def example_sizes(meta: Mapping[str, Any]) -> dict[str, int]:
    """The value each plain symbol had at export, where a symbolic int shows it
    (``sym_size`` of an input records its symbol and its hint)."""
    found: dict[str, int] = {}
    for expr, hint in (meta.get("sym_values") or {}).values():
        names = symbols(expr)
        if hint is not None and len(names) == 1 and _parse(expr) is not None:
            (name,) = names
            if evaluate(expr, {name: hint}) == hint:
                found.setdefault(name, hint)
    return found


def sample_points(meta: Mapping[str, Any], limit: int = 12) -> Iterator[dict[str, int]]:
    """Assignments of every constrained symbol: all at their minimum, all at their maximum,
    the example sizes, and spread points between (deterministic)."""
    ranges = symbol_ranges(meta)
    if not ranges:
        return
    hints = example_sizes(meta)
    names = sorted(ranges)
    yield {n: ranges[n][0] for n in names}
    yield {n: ranges[n][1] for n in names}
    yield {n: min(max(hints.get(n, ranges[n][0]), ranges[n][0]), ranges[n][1]) for n in names}
    for step in range(1, limit - 2):
        point = {}
        for offset, n in enumerate(names):
            low, high = ranges[n]
            point[n] = low + ((step * 7 + offset * 13) * 2654435761) % (high - low + 1)
        yield point

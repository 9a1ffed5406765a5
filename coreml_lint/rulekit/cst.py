"""Small libcst builders the rules' transforms share (imported only when fixing)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

_NO_SPACE = cst.SimpleWhitespace("")


def kwarg(name: str, value: str | cst.BaseExpression) -> cst.Arg:
    """``name=value`` formatted the way people write it (no spaces around ``=``)."""
    expr = cst.parse_expression(value) if isinstance(value, str) else value
    return cst.Arg(
        keyword=cst.Name(name),
        value=expr,
        equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE),
    )


def with_args(call: cst.Call, args: list[cst.Arg]) -> cst.Call:
    """``call`` with ``args``, laid out as its arguments were: one per line stays one per
    line (a trailing comma kept), one line stays one line."""
    return call.with_changes(args=join(args, like=call.args))


def join(args: list[cst.Arg], like: Sequence[cst.Arg] = ()) -> list[cst.Arg]:
    """``args`` with commas between them: the separator the original arguments ``like``
    used (a newline and indent when they were one per line), and their trailing comma."""
    separators = [a.comma for a in like[:-1] if isinstance(a.comma, cst.Comma)]
    comma = next(
        (c for c in separators if isinstance(c.whitespace_after, cst.ParenthesizedWhitespace)),
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
    )
    trailing = like[-1].comma if like else cst.MaybeSentinel.DEFAULT
    last = len(args) - 1
    return [_with_comma(a, comma if i < last else trailing) for i, a in enumerate(args)]


def _with_comma(arg: cst.Arg, comma: cst.Comma | cst.MaybeSentinel) -> cst.Arg:
    """``arg`` itself when its comma already reads the same (the node is kept, so the
    fixer can copy its text instead of rendering it), else a copy with ``comma``."""
    if arg.comma is comma or same_comma(arg.comma, comma):
        return arg
    return arg.with_changes(comma=comma)


def same_comma(a: object, b: object) -> bool:
    """Whether two commas render alike (a cheap test for the usual whitespace)."""
    if not (isinstance(a, cst.Comma) and isinstance(b, cst.Comma)):
        return False
    pairs = ((a.whitespace_before, b.whitespace_before), (a.whitespace_after, b.whitespace_after))
    return all(
        x is y
        or (type(x) is type(y) is cst.SimpleWhitespace and x.value == y.value)
        or (type(x) is not cst.SimpleWhitespace and x.deep_equals(y))
        for x, y in pairs
    )


def append_kwarg(call: cst.Call, name: str, value: str | cst.BaseExpression) -> cst.Call:
    return with_args(call, [*call.args, kwarg(name, value)])


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)

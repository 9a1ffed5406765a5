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
    return [a.with_changes(comma=comma if i < last else trailing) for i, a in enumerate(args)]


def append_kwarg(call: cst.Call, name: str, value: str | cst.BaseExpression) -> cst.Call:
    return with_args(call, [*call.args, kwarg(name, value)])


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)

"""Small libcst builders the rules' transforms share (imported only when fixing)."""

from __future__ import annotations

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
    """``call`` with ``args``, commas between them and none after the last."""
    return call.with_changes(args=join(args))


def join(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    last = len(args) - 1
    return [
        a.with_changes(comma=comma if i < last else cst.MaybeSentinel.DEFAULT)
        for i, a in enumerate(args)
    ]


def append_kwarg(call: cst.Call, name: str, value: str | cst.BaseExpression) -> cst.Call:
    return with_args(call, [*call.args, kwarg(name, value)])


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)

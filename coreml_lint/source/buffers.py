"""Registered buffers that a module's ``forward`` updates in place, as the source shows
them: what ``torch.export`` turns into mutated buffers (and the Core ML partitioner into
state).

Only what the source states plainly counts: a buffer registered with a literal name in the
class (``self.register_buffer("cache", ...)``), written through ``self.cache`` in
``forward`` or in a method of the same class that ``forward`` calls (``self.update(...)``),
by an in-place method, an indexed assignment or an augmented assignment. Left out, so
that nothing is reported that export would not do:

- ``copy_`` into a buffer that the same method has not read before: a buffer only copied
  into is written back by ExecuTorch, not made state (torch's
  ``_remove_unnecessary_copy_op_pass``). Read first and then copied into (a streaming
  conv's ``tail``) it is state (both measured);
- writes under a test of ``self.training`` or a tracing/scripting check, in either branch:
  an exported (eval) model does not run the training one (BatchNorm's running
  statistics), and which one that is (``if not self.training:``) is left unread. Nor do
  the methods called only there, nor what follows ``if not self.training: return ...``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from coreml_lint.source.context import SourceContext

# In-place methods that make a mutated buffer the partitioner gives to Core ML as state
# (each measured with the stock lowering: `State model is supported only >= iOS18`).
STATE_WRITES = frozenset(
    {
        "add_",
        "sub_",
        "mul_",
        "div_",
        "clamp_",
        "fill_",
        "zero_",
        "masked_fill_",
        "index_copy_",
        "index_put_",
        "index_add_",
        "scatter_",
    }
)
# A write under an ``if`` whose test names one of these does not run in an exported model.
_NOT_EXPORTED = ("training", "is_tracing", "is_scripting", "is_compiling", "is_exporting")


@dataclass(frozen=True)
class BufferWrite:
    buffer: str
    node: ast.AST  # the statement or call that writes it (the finding's place)
    how: str  # "index_copy_", "indexed assignment", "+="


def buffer_writes(ctx: SourceContext) -> list[BufferWrite]:
    """Every in-place write of a registered buffer reached from a ``forward`` (memoised)."""
    if "buffer_writes" not in ctx.memo:
        found: list[BufferWrite] = []
        for cls in ast.walk(ctx.tree):
            if isinstance(cls, ast.ClassDef):
                found.extend(_class_writes(ctx, cls))
        ctx.memo["buffer_writes"] = found
    return ctx.memo["buffer_writes"]


def _class_writes(ctx: SourceContext, cls: ast.ClassDef) -> Iterator[BufferWrite]:
    buffers = registered_buffers(cls)
    if not buffers:
        return
    for method in _reached_from_forward(cls):
        nodes = list(_walk_exported(method))
        for node in nodes:
            write = _write(node, buffers) or _copy_after_read(node, buffers, nodes)
            if write is not None:
                yield write


def registered_buffers(cls: ast.ClassDef) -> set[str]:
    """Names registered with ``self.register_buffer("<literal>", ...)`` in the class."""
    names = set()
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Call)
            and _self_attribute(node.func) == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def _reached_from_forward(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    """``forward`` and the methods of the class it calls as ``self.name(...)``, closed."""
    methods = {
        n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    todo, seen = ["forward"], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for node in _walk_exported(methods[name]):  # not a method called only in training
            if isinstance(node, ast.Call):
                called = _self_attribute(node.func)
                if called in methods:
                    todo.append(called)
    return [methods[name] for name in sorted(seen)]


def _walk_exported(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function`` outside ``if`` statements on training or tracing, and
    outside nested functions and classes."""
    stack = _exported_children(function)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.If) and _names_not_exported(node.test):
            continue  # which branch export takes (`if not self.training`) is not said here
        yield node
        stack.extend(_exported_children(node))


def _exported_children(node: ast.AST) -> list[ast.AST]:
    """The child nodes of ``node``, but in a block, none after an ``if`` on training or
    tracing that returns or raises (``if not self.training: return x``): what follows it
    may run in one mode only, and which one is not always plain (``if self.training:
    return x`` leaves the rest to eval, and the rest is kept)."""
    children: list[ast.AST] = []
    for value in (value for _, value in ast.iter_fields(node)):
        if isinstance(value, ast.AST):
            children.append(value)
            continue
        for child in value if isinstance(value, list) else ():
            if isinstance(child, ast.AST):
                children.append(child)
                if isinstance(child, ast.If) and _rest_not_exported(child):
                    break
    return children


def _rest_not_exported(branch: ast.If) -> bool:
    if not _names_not_exported(branch.test):
        return False
    body, orelse = _ends(branch.body), _ends(branch.orelse)
    test = branch.test
    if _self_attribute(test) == "training":  # `if self.training:` ... the rest is eval's
        return orelse
    return body or orelse


def _ends(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise))


def _names_not_exported(test: ast.AST) -> bool:
    for node in ast.walk(test):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in _NOT_EXPORTED:
            return True
    return False


def _write(node: ast.AST, buffers: set[str]) -> BufferWrite | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = _self_attribute(node.func.value)
        if owner in buffers and node.func.attr in STATE_WRITES:
            return BufferWrite(owner, node, node.func.attr)
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _self_attribute(target.value) in buffers:
                return BufferWrite(_self_attribute(target.value) or "", node, "indexed assignment")
    elif isinstance(node, ast.AugAssign):
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        name = _self_attribute(target)
        if name in buffers:
            return BufferWrite(name or "", node, f"{_OPERATORS.get(type(node.op), 'op')}=")
    return None


def _copy_after_read(node: ast.AST, buffers: set[str], nodes: list[ast.AST]) -> BufferWrite | None:
    """``self.buf.copy_(v)`` after a read of ``self.buf`` earlier in the same method."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "copy_"
    ):
        return None
    receiver = node.func.value
    name = _self_attribute(receiver)
    if name not in buffers:
        return None
    at = (node.lineno, node.col_offset)
    # self.buf.shape / .device / .size() read no values; self.buf.resize_() writes
    metadata = {
        id(n.value)
        for n in nodes
        if isinstance(n, ast.Attribute)
        and (n.attr in ("shape", "dtype", "device", "ndim", "size") or n.attr.endswith("_"))
    }
    read_before = any(
        other is not receiver
        and id(other) not in metadata
        and _self_attribute(other) == name
        and (other.lineno, other.col_offset) < at
        for other in nodes
    )
    return BufferWrite(name or "", node, "copy_ after reading it") if read_before else None


_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def _self_attribute(expr: ast.AST) -> str | None:
    """``name`` for ``self.name``."""
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return expr.attr
    return None

"""Shared view of mutable buffers for the CML2xx state rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.program.placement import mutated_buffers
from coreml_lint.rulekit.context import ProgramContext


@dataclass
class MutableBuffer:
    placeholder: str
    target: str
    written: str  # the value written back at the end of the program
    coreml_readers: list[Node]
    cpu_readers: list[Node]  # CPU nodes reading the buffer or a value written into it
    writer: Node | None

    @property
    def becomes_state(self) -> bool:
        """``tag_mutated_buffer`` gives the buffer to the delegate of any Core ML reader."""
        return bool(self.coreml_readers)


def mutable_buffers(ctx: ProgramContext) -> list[MutableBuffer]:
    targets = {s.name: s.target or s.name for s in ctx.graph.inputs}
    found = []
    for placeholder, written in mutated_buffers(ctx.graph).items():
        readers = ctx.users.get(placeholder, [])
        writer = ctx.producers.get(written)
        written_readers = []
        if writer is not None and ctx.on_coreml(writer):
            written_readers = [u for u in ctx.users.get(written, []) if not ctx.on_coreml(u)]
        found.append(
            MutableBuffer(
                placeholder=placeholder,
                target=targets[placeholder],
                written=written,
                coreml_readers=[r for r in readers if ctx.on_coreml(r)],
                cpu_readers=[r for r in readers if not ctx.on_coreml(r)] + written_readers,
                writer=writer,
            )
        )
    return found


def value_key(ctx: ProgramContext, name: str, depth: int = 16) -> Any:
    """A value's expression, structurally: two values with the same key compute the same
    thing from the same inputs, as coremltools' common-subexpression pass sees them.
    ``copy(buffer, src)`` is ``src`` (coremltools writes ``src`` to the state). Memoised
    per graph, so a value reached along many paths is keyed once."""
    memo = ctx.memo.setdefault("value_keys", {})
    if (name, depth) not in memo:
        memo[name, depth] = _value_key(ctx, name, depth)
    return memo[name, depth]


def _value_key(ctx: ProgramContext, name: str, depth: int) -> Any:
    node = ctx.producers.get(name)
    if node is None or depth == 0:
        return ("value", name)
    if node.target == "aten.copy.default" and len(node.args) > 1:
        return _arg_key(ctx, node.args[1], depth - 1)
    return (
        node.target,
        node.outputs.index(name),
        tuple(_arg_key(ctx, a, depth - 1) for a in node.args),
        tuple(sorted((k, _arg_key(ctx, v, depth - 1)) for k, v in node.kwargs.items())),
    )


def _arg_key(ctx: ProgramContext, value: Any, depth: int) -> Any:
    if isinstance(value, TensorRef):
        return value_key(ctx, value.name, depth)
    if isinstance(value, (list, tuple)):
        return tuple(_arg_key(ctx, v, depth) for v in value)
    return repr(value)

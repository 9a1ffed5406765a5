"""Shared view of mutable buffers for the CML2xx state rules."""

from __future__ import annotations

from dataclasses import dataclass

from coreml_lint.checks.base import ProgramContext
from coreml_lint.program.graph import Node
from coreml_lint.program.placement import mutated_buffers


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

"""CML203 integer-state-fp16: an integer or bool buffer held as Core ML state becomes fp16.

What it does
    At iOS18+ with ``take_over_mutable_buffer=True``, flags a non-float mutable buffer (a
    step counter, a position, a mask) that becomes Core ML state.

Why it breaks
    coremltools only supports fp16 states: it logs ``Core ML only supports fp16 states, so
    buffer step has been cast to fp16`` and every ``read_state`` in the MIL is fp16, int32
    and int64 counters included. An integer in fp16 is exact only up to 2048, so a counter
    or a cache position silently goes wrong after 2048 steps.

    Two or more integer states written the same value crash instead (found on transformers'
    static cache, whose every layer sets ``cumulative_length.copy_(cache_position[0])`` and
    then adds the new length): coremltools' common-subexpression pass merges the writes into
    one fp16 cast feeding several ``coreml_update_state`` ops, and
    ``canonicalize_inplace_pattern`` fails with ``KeyError: %coreml_update_state_0 ...``.

Example
    ``self.register_buffer("step", torch.zeros(1, dtype=torch.int64))``; ``self.step.add_(1)``.

Fix
    (a) ``take_over_mutable_buffer=False`` (ExecuTorch keeps the buffer with its dtype);
    (b) pass the position in as a program input instead of counting in a buffer.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import FLOAT_DTYPES
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, nn, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules._state import mutable_buffers, value_key
from coreml_lint.rules.cml201_state_below_ios18 import counter


class IntegerStateFp16(Rule):
    code = "CML203"
    name = "integer-state-fp16"
    outcome = Outcome.SILENT
    summary = "integer/bool mutable buffer held as fp16 Core ML state: exact only to 2048"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        settings = ctx.settings
        if not settings.take_over_mutable_buffer or settings.minimum_deployment_target < 18:
            return
        integer_states = []
        for buf in mutable_buffers(ctx):
            dtype = ctx.dtype(buf.placeholder)
            if buf.becomes_state and dtype is not None and dtype not in FLOAT_DTYPES:
                integer_states.append((buf, dtype))
        keys = Counter(value_key(ctx, buf.written) for buf, _ in integer_states)
        for buf, dtype in integer_states:
            shared = keys[value_key(ctx, buf.written)] > 1
            if shared:
                message = (
                    f"{dtype} buffer '{buf.target}' becomes Core ML state, and another integer "
                    "state is written the same value: coremltools merges the two writes, and "
                    "lowering fails with `KeyError: %coreml_update_state_0 ...` in "
                    "canonicalize_inplace_pattern"
                )
            else:
                message = (
                    f"{dtype} buffer '{buf.target}' becomes Core ML state, and Core ML states "
                    "are fp16: coremltools casts it (`Core ML only supports fp16 states`), so "
                    "integer values above 2048 are rounded"
                )
            yield ctx.finding(
                buf.writer or buf.coreml_readers[0],
                message,
                outcome=Outcome.CRASH if shared else Outcome.SILENT,
                fix="pass the counter in as a program input, or set take_over_mutable_buffer=False",
                partitioner={"take_over_mutable_buffer": False},
                buffer=buf.target,
                dtype=dtype,
            )

    def return_buffer(self, node: Any, program: Any, settings: PartitionerSettings) -> str | None:
        import torch

        from coreml_lint.rulekit.fx import mutable_buffer_readers, val

        fake = val(node)
        if mutable_buffer_readers(node, program) is None or not isinstance(fake, torch.Tensor):
            return None
        if fake.is_floating_point():
            return None
        return f"{fake.dtype} would become an fp16 Core ML state"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def position_counters(count: int, then_add: bool) -> nn.Module:
    """transformers' static cache: each layer sets an int64 0-d ``cumulative_length`` from
    ``cache_position[0]`` and then adds the new tokens' length."""

    def forward(s, x, cache_position):
        for i in range(count):
            length = getattr(s, f"length{i}")
            length.copy_(cache_position[0])
            if then_add:
                length += x.shape[0]
        return x * 2

    buffers = {f"length{i}": torch.zeros((), dtype=torch.int64) for i in range(count)}
    return module(forward, **buffers)


@case(
    "int-state-ios18",
    expect={"CML203"},
    settings={"ios": 18},
    silent=returns(r"%count: \(1, 4, ?fp16\)\(State\)|%count: \(1,4,fp16\)\(State\)"),
)
def _():
    return counter(torch.int32), (torch.randn(1, 4),)


@case(
    "int-states-same-value-ios18",
    expect={"CML203"},
    settings={"ios": 18},
    crash=r"KeyError:.*coreml_update_state",
)
def _():
    return position_counters(2, then_add=True), (torch.randn(2, 3), torch.tensor([5]))


@case("int-state-one-value-ios18", expect={"CML203"}, settings={"ios": 18})
def _():
    return position_counters(1, then_add=True), (torch.randn(2, 3), torch.tensor([5]))


@case("buffer-only-copied-into", expect=set())
def _():
    """``copy_`` into a buffer nothing reads: torch's run_decompositions writes the source
    straight back (``_remove_unnecessary_copy_op_pass``), so there is no Core ML state and
    even the default target lowers."""
    return position_counters(2, then_add=False), (torch.randn(2, 3), torch.tensor([5]))

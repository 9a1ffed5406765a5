"""CML201 state-below-ios18: a mutable buffer becomes Core ML state below iOS18.

What it does
    Flags a buffer the program writes (``self.count.add_(1)``, ``self.cache[:, pos] = x``)
    that a Core ML op reads, when ``take_over_mutable_buffer=True`` (the default) and the
    deployment target is below iOS18.

Why it breaks
    The partitioner hands such a buffer to Core ML as state, and coremltools refuses
    state models below iOS18: ``ValueError: State model is supported only >= iOS18.
    Please update the minimum_deployment_target to at least coremltools.target.iOS18``
   .

Example
    ``self.register_buffer("count", torch.zeros(1, 4))``; ``self.count.add_(1)``.

On model source
    Without an export it flags a buffer registered with a literal name whose ``forward``
    (or a method ``forward`` calls) updates it in place: ``self.cache.index_copy_(...)``,
    ``self.cache[:, pos] = k``, ``self.count += 1``, ``add_``/``fill_``/``zero_``/
    ``masked_fill_``/``index_put_``/... (see ``coreml_lint/source/buffers.py``). A buffer
    only ``copy_``'d into is not state, and writes under ``if self.training:`` do not run
    in an exported model: neither is flagged (a ``copy_`` after ``forward`` read the
    buffer is: it is state).

Fix
    (a) ``take_over_mutable_buffer=False`` (any target; costs a CPU copy per step and the
    buffer's initial value is not serialized); (b) an iOS18 target when every reader of the
    buffer is in Core ML (then see CML202 and CML203).

References
    - https://github.com/pytorch/executorch/issues/4209
      Core ML state, the counterpart of a mutable buffer, starts at iOS 18
    - https://github.com/pytorch/executorch/pull/5165
      the partitioner tags mutable buffers as Core ML state (take_over_mutable_buffer)
    - https://github.com/pytorch/executorch/issues/21855
      builds fail at execute with "must be an MLState" although take_over_mutable_buffer=False
      (open)
    - https://github.com/apple/coremltools/issues/2826
      `states=[]` cannot say "no states": every mutable buffer becomes a state (open)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, returns, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules._state import mutable_buffers
from coreml_lint.source.buffers import buffer_writes
from coreml_lint.source.context import SourceContext


class StateBelowIOS18(Rule):
    code = "CML201"
    name = "state-below-ios18"
    outcome = Outcome.CRASH
    summary = (
        "mutable buffer becomes Core ML state below iOS18: State model is supported only >= iOS18"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        settings = ctx.settings
        if not settings.take_over_mutable_buffer or settings.minimum_deployment_target >= 18:
            return
        for buf in mutable_buffers(ctx):
            if not buf.becomes_state:
                continue
            yield ctx.finding(
                buf.writer or buf.coreml_readers[0],
                f"buffer '{buf.target}' is written by the program and read in Core ML, so it "
                "becomes Core ML state: lowering fails with `ValueError: State model is "
                "supported only >= iOS18`",
                fix="set take_over_mutable_buffer=False, or target iOS18",
                partitioner=self._advice(ctx, buf),
                buffer=buf.target,
            )

    @staticmethod
    def _advice(ctx: ProgramContext, buf: Any) -> dict[str, Any]:
        """Keep the buffer with ExecuTorch; unless it requires grad, which ExecuTorch's
        write refuses (CML204): then iOS18, where it can be Core ML state."""
        info = ctx.graph.tensors.get(buf.placeholder)
        if info is not None and info.requires_grad:
            return {"minimum_deployment_target": 18}
        return {"take_over_mutable_buffer": False}

    def adjust_settings(self, settings: PartitionerSettings) -> PartitionerSettings:
        """No state below iOS18: ExecuTorch keeps the mutable buffers."""
        return settings.changed(take_over_mutable_buffer=False)

    source_triggers = ("register_buffer",)
    source_pattern = (
        "a registered buffer updated in place in `forward` (`self.cache[:, pos] = k`, "
        "`index_copy_`, `add_`, `+=`), below iOS18"
    )
    source_fix = "`take_over_mutable_buffer=False`, or target iOS18"
    examples = (
        Invalid(
            "class Cache(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("k", torch.zeros(1, 8, 4))\n'
            "    def forward(self, x, pos):\n"
            "        self.k.index_copy_(1, pos, x)\n"
            "        return self.k.sum(1)\n",
            at=(6, 9),
        ),
        Invalid(
            "class Cache(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("k", torch.zeros(1, 8, 4))\n'
            "    def forward(self, x, pos):\n"
            "        self._update(x, pos)\n"
            "        return self.k.sum(1)\n"
            "    def _update(self, x, pos):\n"
            "        self.k[:, pos] = x\n",
            at=(9, 9),
        ),
        Valid(
            "class Cache(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("k", torch.zeros(1, 8, 4))\n'
            "    def forward(self, x):\n"
            "        self.k.copy_(x)\n"
            "        return self.k * 2\n"
        ),
        Invalid(
            "class Stream(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("tail", torch.zeros(1, 4, 2))\n'
            "    def forward(self, x):\n"
            "        y = torch.cat([self.tail, x], dim=-1)\n"
            "        self.tail.copy_(y[..., -2:])\n"
            "        return y\n",
            at=(7, 9),
        ),
        Valid(
            "class Stats(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("mean", torch.zeros(4))\n'
            "    def forward(self, x):\n"
            "        if self.training:\n"
            "            self.mean.mul_(0.9).add_(0.1 * x.mean(0))\n"
            "        if not self.training:\n"
            "            return x - self.mean\n"
            "        else:\n"
            "            self.mean.zero_()\n"
            "        return x - self.mean\n"
        ),
        Valid(
            "class Cache(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("k", torch.zeros(1, 8, 4))\n'
            "    def forward(self, x):\n"
            "        k = self.k.clone()\n"
            "        k[:, 0] = x\n"
            "        return k\n"
            "    def reset(self):\n"
            "        self.k.zero_()\n"
        ),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        settings = ctx.config.partitioner if ctx.config is not None else PartitionerSettings()
        if not settings.take_over_mutable_buffer or settings.minimum_deployment_target >= 18:
            return
        for write in buffer_writes(ctx):
            yield ctx.finding(
                write.node,
                f"buffer '{write.buffer}' is updated in place in forward ({write.how}): "
                "exported, it is a mutable buffer the partitioner makes Core ML state, and "
                "lowering fails with `ValueError: State model is supported only >= iOS18`",
                fix="set take_over_mutable_buffer=False (and export under torch.no_grad(): "
                "CML204), or target iOS18",
                partitioner={"take_over_mutable_buffer": False},
            )


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def counter(dtype: Any = None) -> Any:
    dtype = dtype or torch.float32

    def forward(s, x):
        s.count.add_(1)
        return x + s.count

    return module(forward, count=torch.zeros(1, 4, dtype=dtype))


@case("state-default-target", expect={"CML201"}, crash=r"State model is supported only >= iOS18")
def _():
    return counter(), (torch.randn(1, 4),)


@case("state-not-taken-over", expect=set(), settings={"take_over_mutable_buffer": False})
def _():
    return counter(), (torch.randn(1, 4),)


@case("state-ios18", expect=set(), settings={"ios": 18}, clean=returns(r"read_state"))
def _():
    return counter(), (torch.randn(1, 4),)


@case("kv-cache-slice-ios18", expect=set(), settings={"ios": 18})
def _():
    def forward(s, x):
        s.cache[:, 2:3] = x
        return s.cache * 2

    return module(forward, cache=torch.zeros(1, 8, 4)), (torch.randn(1, 1, 4),)

"""CML204 buffer-requires-grad: a mutable buffer exported with requires_grad that ExecuTorch writes.

What it does
    Flags a buffer the program writes (a KV cache, a counter) whose exported value requires
    grad, when the write stays with ExecuTorch instead of becoming Core ML state: with
    ``take_over_mutable_buffer=False``, when no Core ML op reads the buffer (its update is
    skipped to the CPU), or below iOS18, where Core ML has no state and the way around
    CML201 is ``take_over_mutable_buffer=False``.

Why it breaks
    A model exported outside ``torch.no_grad()`` keeps ``requires_grad=True`` on its
    parameters, and a buffer written from them (``self.cache[:, pos] = self.k_proj(x)``) is
    recorded as requiring grad too. ExecuTorch then writes the buffer back with an in-place
    ``copy_`` while building the program, and ``to_executorch()`` fails with ``RuntimeError:
    a leaf Variable that requires grad is being used in an in-place operation`` (at every
    target). When the buffer is Core ML state (iOS18, every reader delegated), Core ML
    writes it and nothing fails.

Example
    ``ep = torch.export.export(decoder, (tokens, pos))`` (no ``torch.no_grad()``), lowered
    with ``CoreMLPartitioner(take_over_mutable_buffer=False)``.

Fix
    (a) export under ``with torch.no_grad():`` (or ``requires_grad_(False)`` on the
    parameters first); (b) iOS18 with the buffer as Core ML state; (c) ``coreml-lint
    lower`` clears the flag in the program, so no re-export is needed.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, nn, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules._state import mutable_buffers

CRASH = (
    "`RuntimeError: a leaf Variable that requires grad is being used in an in-place "
    "operation` in to_executorch()"
)


class BufferRequiresGrad(Rule):
    code = "CML204"
    name = "buffer-requires-grad"
    outcome = Outcome.CRASH
    summary = (
        "mutable buffer exported with requires_grad, written by ExecuTorch: to_executorch fails"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        settings = ctx.settings
        for buf in mutable_buffers(ctx):
            info = ctx.graph.tensors.get(buf.placeholder)
            if info is None or not info.requires_grad:
                continue
            if not settings.take_over_mutable_buffer:
                why = "take_over_mutable_buffer=False keeps it with ExecuTorch"
            elif not buf.becomes_state:
                why = "no Core ML op reads it, so it is not Core ML state"
            elif settings.minimum_deployment_target < 18:
                why = (
                    "below iOS18 it cannot be Core ML state (CML201), and with "
                    "take_over_mutable_buffer=False ExecuTorch writes it"
                )
            else:
                continue
            yield ctx.finding(
                buf.writer or (buf.coreml_readers + buf.cpu_readers)[0],
                f"buffer '{buf.target}' was exported with requires_grad (the program was "
                f"exported outside torch.no_grad()), and {why}: lowering fails with {CRASH}",
                fix="export under `with torch.no_grad():` (or call requires_grad_(False) on "
                "the parameters before exporting)",
                buffer=buf.target,
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """The program's inputs stop requiring grad: nothing it computes changes."""
        from coreml_lint.rulekit.fx import stop_requiring_grad

        names = stop_requiring_grad(ep)
        return ep, [
            f"{name}: requires_grad cleared (as a torch.no_grad() export)" for name in names
        ]


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def decoder(requires_grad: bool = True) -> tuple[Any, tuple[Any, ...]]:
    """A one-layer KV cache written from a Linear's output, exported the way the test
    harness exports (grad mode on); ``requires_grad=False`` is the torch.no_grad() export."""

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k_proj = nn.Linear(8, 8)
            self.register_buffer("cache", torch.zeros(1, 4, 8))

        def forward(self, x: Any, pos: Any) -> Any:
            torch.ops.aten.index_put_(self.cache, [None, pos.view(1)], self.k_proj(x).unsqueeze(1))
            return self.cache.sum(1)

    model = Decoder().eval()
    model.requires_grad_(requires_grad)
    return model, (torch.randn(1, 8), torch.tensor(1))


GRAD_CRASH = r"a leaf Variable that requires grad is being used in an in-place operation"


@case(
    "grad-buffer-not-taken-over",
    expect={"CML204"},
    settings={"take_over_mutable_buffer": False},
    crash=GRAD_CRASH,
)
def _() -> Any:
    return decoder()


@case(
    "grad-buffer-no-grad-export",
    expect=set(),
    settings={"take_over_mutable_buffer": False},
)
def _() -> Any:
    return decoder(requires_grad=False)


@case("grad-buffer-ios18-state", expect=set(), settings={"ios": 18})
def _() -> Any:
    return decoder()


@case(
    "grad-buffer-writer-skipped-ios18",
    expect={"CML204"},
    settings={"ios": 18, "skip": ["aten.index_put.default"]},
    crash=GRAD_CRASH,
)
def _() -> Any:
    return decoder()


@case(
    "grad-buffer-default-target",
    expect={"CML201", "CML204"},
    crash=r"State model is supported only >= iOS18",
)
def _() -> Any:
    return decoder()

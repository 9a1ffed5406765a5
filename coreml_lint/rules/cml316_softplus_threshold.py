"""CML316 softplus-threshold: Core ML computes ``softplus`` without its ``threshold``.

What it does
    Flags a delegated ``aten.softplus`` whose ``threshold`` is low enough to matter
    (``nn.Softplus(beta=2.0, threshold=5.0)``, ``F.softplus(x, threshold=1.0)``): below
    about 7.3, where the two functions differ by more than 1e-4 relative, what verify's
    float64-judged pass tells from float32 rounding (it diverges at 7, agrees at 8). The
    default threshold (20) is never flagged.

Why it breaks
    torch's softplus returns ``x`` itself wherever ``beta * x > threshold``; coremltools
    reads the threshold and drops it, so Core ML computes ``log(1 + exp(beta * x)) / beta``
    there too: ``x + log(1 + exp(-beta * x)) / beta``, off by up to
    ``log(1 + exp(-threshold)) / |beta|``. At ``threshold=5`` that is 1.3e-3 relative, at 1
    it is 0.31, and at a threshold of 0 or below every input past it is off (``x`` against
    ``softplus(x)``: 0 against ``log(2) / beta``). It lowers without a word. A threshold is
    set so that the linear branch is used, so the inputs it concerns are the model's
    ordinary ones.

Example
    ``self.act = nn.Softplus(beta=2.0, threshold=5.0)``

Fix
    (a) write the threshold out: ``torch.where(beta * x > threshold, x,
    F.softplus(x, beta))`` (Core ML computes the ``where``; verified equal);
    (b) ``skip_ops_for_coreml_delegation=["aten.softplus.default"]`` (CPU softplus);
    ``coreml-lint lower`` writes (a).

References
    - https://github.com/apple/coremltools/pull/2725
      a stable softplus that also applies torch's threshold (open)
    - https://github.com/apple/coremltools/pull/2339
      softplus at any rank (merged; the threshold handling it first proposed is not in
      9.0's converter, which reads the threshold and drops it)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule

SOFTPLUS = "aten.softplus.default"
DEFAULT_THRESHOLD = 20.0
# The relative difference past the threshold that counts: what verify's float32 pass, judged
# against float64, tells from rounding (1e-4): measured, it diverges at threshold 6 and 7
# (1.3e-4 relative) and agrees at 8 and 9.
RELATIVE = 1e-4


def threshold_matters(threshold: float) -> bool:
    """Whether dropping ``threshold`` changes softplus by more than ``RELATIVE``: past it
    the difference relative to ``x`` is at most ``log1p(exp(-t)) / t`` (at ``beta * x = t``,
    whatever beta), and at a threshold of 0 or below the linear branch takes inputs where
    softplus is nowhere near ``x``."""
    return threshold <= 0 or math.log1p(math.exp(-threshold)) / threshold > RELATIVE


class SoftplusThreshold(Rule):
    code = "CML316"
    name = "softplus-threshold"
    outcome = Outcome.SILENT
    summary = "softplus's threshold is dropped: past it Core ML computes softplus, not x"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target != SOFTPLUS:
                continue
            beta = node.arg(1, "beta", 1.0)
            threshold = node.arg(2, "threshold", DEFAULT_THRESHOLD)
            if not isinstance(threshold, (int, float)) or not threshold_matters(threshold):
                continue
            yield ctx.finding(
                node,
                f"softplus(beta={beta:g}, threshold={threshold:g}) is delegated, but "
                "coremltools drops the threshold: where beta * x > threshold torch returns x, "
                "and Core ML computes softplus there too, x + log(1 + exp(-beta * x)) / beta, "
                f"{_gap(threshold, beta)}",
                # the module's own names: one source line may build several thresholds
                # (a ModuleList of blocks), whose findings a report shows as one
                fix="write the threshold out: torch.where(beta * x > threshold, x, "
                "F.softplus(x, beta))",
                partitioner=ctx.skip_advice(node),
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """``softplus(x, b, t)`` as ``where(b * x > t, x, softplus(x, b))``: Core ML
        computes the ``where``, and its softplus only where torch's does too. ``b * x`` is
        compared in float32, as torch's kernel compares it: in float16 it would pick the
        other branch near the threshold."""
        import torch

        from coreml_lint.rulekit.fx import aten, cast, emit, fake_mode, finish, val

        done = []
        mode = None
        for node in list(ep.graph.nodes):
            if node.target != aten.softplus.default:
                continue
            x = node.args[0]
            beta = _arg(node, 1, "beta", 1.0)
            threshold = _arg(node, 2, "threshold", DEFAULT_THRESHOLD)
            if not threshold_matters(threshold):
                continue
            mode = mode or fake_mode(ep)
            with ep.graph.inserting_before(node):
                wide = x if val(x).dtype == torch.float32 else cast(ep, x, torch.float32)
                scaled = emit(ep, mode, aten.mul.Scalar, (wide, beta))
                past = emit(ep, mode, aten.gt.Scalar, (scaled, threshold))
                below = emit(ep, mode, aten.softplus.default, (x, beta, DEFAULT_THRESHOLD))
            # the node itself becomes the where: a program output keeps its name
            node.target, node.args, node.kwargs = aten.where.self, (past, x, below), {}
            done.append(f"{node.name}: softplus's threshold {threshold:g} written as a where")
        return finish(ep), done


def _arg(node: Any, index: int, name: str, default: float) -> float:
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def _gap(threshold: float, beta: float) -> str:
    if threshold <= 0:
        return f"which is not x at all there (at x = 0, log(2) / beta = {math.log(2) / beta:.3g})"
    return f"off by up to {math.log1p(math.exp(-threshold)) / threshold:.1e} relative"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def _threshold_dropped(lowered: Any) -> bool:
    """MIL evidence: softplus is computed, and nothing selects the linear branch."""
    return "softplus" in lowered.mil and "select(" not in lowered.mil


@case("softplus-threshold-5", expect={"CML316"}, silent=_threshold_dropped)
def _() -> Any:
    model, _ = wrapped(nn.Softplus(beta=2.0, threshold=5.0))
    return model, (torch.randn(4, 12) * 4,)


@case("softplus-threshold-below-zero", expect={"CML316"}, silent=_threshold_dropped)
def _() -> Any:
    return module(lambda s, x: F.softplus(x, threshold=-1.0)), (torch.randn(2, 3, 8, 8),)


@case("softplus-default-threshold", expect=set())
def _() -> Any:
    model, _ = wrapped(nn.Softplus(beta=2.0))  # its threshold, 20, is never reached
    return model, (torch.randn(4, 12) * 4,)


@case("softplus-threshold-written-out", expect=set())
def _() -> Any:
    def forward(s: Any, x: Any) -> Any:
        return torch.where(2.0 * x > 5.0, x, F.softplus(x, 2.0))

    return module(forward), (torch.randn(4, 12) * 4,)

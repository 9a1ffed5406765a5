"""CAI105 coreai-bool-min-max: max/min/amax/amin/maximum/minimum on a bool tensor in Core AI.

What it does
    Flags an ``amax``, ``amin``, ``max``, ``min``, ``maximum`` or ``minimum`` whose tensor
    input is bool (typically a comparison result), in a program converted for Core AI.

Why it breaks
    coreai-torch emits ``coreai.reduce_max`` / ``reduce_min`` / ``maximum`` / ``minimum``
    on the bool tensor, and Core AI's verifier accepts only float and integer tensors, so
    conversion stops with ``RuntimeError: Failed to run the pre-compilation rewrite
    pipeline: ... 'coreai.reduce_max' op operand #0 must be CoreAI Tensor of ... but got
    'tensor<4x8xi1>'`` (measured with coreai-torch 0.4.3). ``any`` and ``all`` convert and
    compute exactly. Core ML has the same pitfall (CML105).

Example
    ``m = a > 0; m.amax(dim=1)``; ``torch.maximum(a > 0, b > 0)``.

Fix
    ``m.any(dim)`` for amax/max, ``m.all(dim)`` for amin/min, ``torch.logical_or`` /
    ``torch.logical_and`` for maximum/minimum (``--fix`` writes them: the same values), or
    cast to int32 first. ``coreml-lint lower --target coreai`` makes the same change in the
    program (CML105's rewrite) and verifies it on Core AI; ``max(dim)``/``min(dim)`` return
    indices too and have no bool twin, so it stops on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from coreml_lint.core.findings import Finding
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule
from coreml_lint.rules.cml105_bool_min_max import BOOL_TWINS, PAIRWISE, BoolMinMax
from coreml_lint.source.context import SourceContext

CRASH = r"'coreai\.[\w.]*(reduce_max|reduce_min|maximum|minimum)' op operand #0 must be"
# the Core AI op coreai-torch 0.4.3 emits for each (the pairwise ones broadcast first)
COREAI_OPS = {
    "amax": "reduce_max",
    "max": "reduce_max",
    "amin": "reduce_min",
    "min": "reduce_min",
    "maximum": "decomposable.broadcasting_maximum",
    "minimum": "decomposable.broadcasting_minimum",
}


class CoreAIBoolMinMax(BoolMinMax):
    """Core ML's bool-min-max (CML105) as Core AI meets it: every node converts, so every
    bool min/max does; the source check and its any/all fix are CML105's."""

    code = "CAI105"
    name = "coreai-bool-min-max"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    summary = "min/max family on a bool tensor: Core AI's reduce_max/maximum reject bool"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            base = node.op_base
            if base not in BOOL_TWINS or node.namespace != "aten":
                continue
            bools = [v for v in node.tensor_inputs() if ctx.dtype(v) == "bool"]
            if not bools:
                continue
            pairwise = PAIRWISE[base] if node.target.endswith(".other") else base
            replacement = BOOL_TWINS[pairwise][2]
            yield ctx.finding(
                node,
                f"{base} on bool tensor '{bools[0]}': Core AI conversion fails with "
                f"`'coreai.{COREAI_OPS[pairwise]}' op operand #0 must be CoreAI Tensor of "
                "... but got 'tensor<...xi1>'`",
                fix=f"use {replacement} on the bool tensor",
            )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for finding in super().check_source(ctx):
            yield replace(
                finding,
                message=finding.message.split(":", 1)[0]
                + ": Core AI's reduce_max/maximum accept only float and integer tensors, so "
                "conversion fails (`operand #0 must be ... but got 'tensor<...xi1>'`)",
            )

    # CML105's rewrite (the any/all/logical twin) answers Core AI's lowering too; its refusal
    # keeps a node on the CPU, which Core AI does not have
    refuse = Rule.refuse

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        """max(dim)/min(dim) of a bool tensor: no bool twin (they return indices too)."""
        if (finding.op or "").split(".")[-2:] in (["max", "dim"], ["min", "dim"]):
            return (
                f"{finding.message} (max(dim)/min(dim) return indices too: no bool twin; "
                "cast to int32 first in the model: `m.int().max(dim)`)"
            )
        return super().unanswered(finding, dequantize_on_cpu=dequantize_on_cpu)


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _bool_case(id: str, op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], bad: bool):
    @case(id, expect={"CAI105"} if bad else set(), crash=CRASH if bad else None)
    def _():
        return module(lambda s, a, b: op(a > 0, b > 0).float()), (
            torch.randn(4, 8),
            torch.randn(4, 8),
        )


_bool_case("coreai-bool-amax", lambda m, n: m.amax(dim=1), True)
_bool_case("coreai-bool-min-dim", lambda m, n: m.min(dim=1).values, True)
_bool_case("coreai-bool-maximum", lambda m, n: torch.maximum(m, n), True)
_bool_case("coreai-bool-minimum", lambda m, n: torch.minimum(m, n), True)
_bool_case("coreai-bool-max-other", lambda m, n: torch.max(m, n), True)
_bool_case("coreai-bool-any", lambda m, n: m.any(dim=1), False)
_bool_case("coreai-bool-logical-or", lambda m, n: torch.logical_or(m, n), False)

"""CAI312 coreai-avg-pool-ceil-mode: ``avg_pool(..., ceil_mode=True)`` fails Core AI
conversion.

What it does
    Flags ``avg_pool1d/2d`` with ``ceil_mode=True`` and the default
    ``count_include_pad=True`` (with ``count_include_pad=False`` and padding, CAI311 says
    what happens).

Why it breaks
    coreai-torch's avg_pool lowering indexes past its arguments when ``ceil_mode`` is set:
    conversion stops with ``IndexError: tuple index out of range`` (measured with
    coreai-torch 0.4.3, with or without padding, whether or not ``ceil_mode`` changes the
    output size).

Example
    ``F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)``.

Fix
    Pad the right/bottom edge yourself so the floor size equals the ceil size, or drop
    ``ceil_mode`` when the input size makes it change nothing. ``coreml-lint lower
    --target coreai`` rewrites the pool in the program (CAI311's exact rewrite: an unpadded,
    floor-mode pool of the input padded as far as torch's last window reaches, divided by
    the same pool of the mask of what torch counts) and verifies it on Core AI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule
from coreml_lint.rules.cai311_avg_pool_exclude_pad import exact_avg_pools

POOLS = {"avg_pool1d", "avg_pool2d"}  # measured; avg_pool3d is not


class CoreAIAvgPoolCeilMode(Rule):
    code = "CAI312"
    name = "coreai-avg-pool-ceil-mode"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.CRASH
    summary = "avg_pool with ceil_mode=True: Core AI conversion IndexError"
    rewrite_tolerance = 1e-2  # as CAI311's: the same rewrite

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            if node.namespace != "aten" or node.op_base not in POOLS:
                continue
            if node.arg(4, "ceil_mode", False) is not True:
                continue
            if node.arg(5, "count_include_pad", True) is not True:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} with ceil_mode=True: Core AI conversion fails with "
                "`IndexError: tuple index out of range`",
                fix="pad the input's far edge explicitly (F.pad) so the floor size is the "
                "ceil size, or drop ceil_mode where it changes nothing",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Each ceil_mode avg_pool counting the padding: CAI311's exact rewrite."""
        return exact_avg_pools(
            ep, lambda args: args["ceil_mode"] and args["count_include_pad"] and args["dims"] < 3
        )


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _pool_case(id: str, pool, shape, bad: bool) -> None:
    @case(id, expect={"CAI312"} if bad else set(), crash=r"^IndexError: " if bad else None)
    def _():
        return module(lambda s, x: pool(x)), (torch.randn(*shape),)


_pool_case(
    "coreai-avg-pool2d-ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (1, 3, 7, 7), True
)
_pool_case(
    "coreai-avg-pool2d-ceil-no-pad",
    lambda x: F.avg_pool2d(x, 3, 2, 0, ceil_mode=True),
    (1, 3, 8, 8),
    True,
)
_pool_case(
    "coreai-avg-pool1d-ceil", lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), (1, 3, 7), True
)
_pool_case("coreai-avg-pool2d-floor", lambda x: F.avg_pool2d(x, 3, 2, 1), (1, 3, 7, 7), False)

"""CAI311 coreai-avg-pool-exclude-pad: ``avg_pool(..., count_include_pad=False)`` with
padding computes wrong border windows in Core AI.

What it does
    Flags ``avg_pool1d/2d/3d`` with a nonzero ``padding`` and ``count_include_pad=False``.

Why it breaks
    Torch divides each border window by the number of real elements it covers; Core AI's
    conversion converts without an error and divides by the whole window, so every
    window that overlaps the padding is too small by that ratio (measured with coreai-torch
    0.4.3, float32: about half the output's scale wrong on the border of ``avg_pool2d(x,
    3, 2, 1, count_include_pad=False)``, exact inside; with ``ceil_mode=True`` too, or a
    ``ValueError`` when ``ceil_mode`` changes the output size). Without padding, or with
    the default ``count_include_pad=True``, the values agree.

Example
    ``F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)``;
    ``nn.AvgPool2d(3, 2, 1, count_include_pad=False)`` (timm's and ResNet-D's stems).

Fix
    Divide the padded sum by the count of real elements, both pools counting the padding
    (the same values, exactly):
    ``F.avg_pool2d(x, k, s, p) / F.avg_pool2d(torch.ones_like(x[:, :1]), k, s, p)``.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule

POOLS = {"avg_pool1d", "avg_pool2d", "avg_pool3d"}


class CoreAIAvgPoolExcludePad(Rule):
    code = "CAI311"
    name = "coreai-avg-pool-exclude-pad"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.SILENT
    summary = "avg_pool with padding and count_include_pad=False: wrong border windows"
    cannot_lower = "there is no Core AI lowering command yet: divide by a pooled count"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            if node.namespace != "aten" or node.op_base not in POOLS:
                continue
            padding = node.arg(3, "padding", 0)
            padded = any(padding) if isinstance(padding, (list, tuple)) else bool(padding)
            if not padded or node.arg(5, "count_include_pad", True) is not False:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} with padding {padding} and count_include_pad=False: Core AI "
                "divides the border windows by the whole window, not by the real elements "
                "(wrong values, no error)",
                fix=f"{node.op_base}(x, k, s, p) / {node.op_base}(torch.ones_like(x[:, :1]), "
                "k, s, p): the padded sum over the real count, exactly torch's values",
            )


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _pool_case(id: str, pool, shape, bad: bool) -> None:
    @case(
        id,
        expect={"CAI311"} if bad else set(),
        silent=(lambda error: error > 0.1) if bad else None,
    )
    def _():
        return module(lambda s, x: pool(x)), (torch.randn(*shape),)


_pool_case(
    "coreai-avg-pool2d-exclude-pad",
    lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    (1, 3, 8, 8),
    True,
)
_pool_case(
    "coreai-avg-pool1d-exclude-pad",
    lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
    (1, 3, 8),
    True,
)
_pool_case(
    "coreai-avg-pool3d-exclude-pad",
    lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
    (1, 2, 6, 6, 6),
    True,
)
_pool_case(
    "coreai-avg-pool2d-divided-count",  # the fix: exactly torch's values
    lambda x: F.avg_pool2d(x, 3, 2, 1) / F.avg_pool2d(torch.ones_like(x[:, :1]), 3, 2, 1),
    (1, 3, 8, 8),
    False,
)
_pool_case(
    "coreai-avg-pool2d-exclude-no-pad",
    lambda x: F.avg_pool2d(x, 3, 2, 0, count_include_pad=False),
    (1, 3, 9, 9),
    False,
)

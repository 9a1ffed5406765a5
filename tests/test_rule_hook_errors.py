"""A rule whose lowering hook raises is named where it raised, not skipped in silence: a
skipped refusal would leave the node on Core ML and fail far away, or mislower."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.lowering.partitioner import LoweringPlan, RuleHookError  # noqa: E402
from coreml_lint.rulekit.rule import Rule  # noqa: E402


class _RefusesBadly(Rule):
    code, name = "CML998", "refuses-badly"

    def refuse(self, node, settings):
        raise KeyError("val")


class _RefusesNothing(Rule):
    code, name = "CML997", "refuses-nothing"

    def refuse(self, node, settings):
        return None


def _node():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    return graph.call_function(torch.ops.aten.relu.default, (x,))


def test_a_refuse_hook_that_raises_names_the_rule_and_node():
    plan = LoweringPlan([_RefusesNothing(), _RefusesBadly()], PartitionerSettings())
    with pytest.raises(
        RuleHookError, match=r"internal error in CML998.s refuse hook on node relu\w*: KeyError"
    ):
        plan.refusal(_node())


def test_hooks_that_answer_are_asked_as_before():
    plan = LoweringPlan([_RefusesNothing()], PartitionerSettings())
    assert plan.refusal(_node()) is None

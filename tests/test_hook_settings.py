"""Every lowering hook is given the partitioner settings it answers for (issue 32): nothing
sets them on the rule behind its back (``refuse(node)`` used to read ``self.settings``,
which the lowering code assigned to each rule before asking)."""

from __future__ import annotations

import inspect

import pytest

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules

HOOKS = ("rewrite", "refuse", "adjust_settings", "return_buffer", "must_decompose")


@pytest.mark.parametrize("hook", [*HOOKS, "dequantize_on_cpu"])
def test_every_lowering_hook_takes_the_settings(hook):
    for rule in [Rule, *all_rules()]:
        parameters = inspect.signature(getattr(rule, hook)).parameters
        assert "settings" in parameters, f"{rule.__name__}.{hook}"
    assert not hasattr(Rule, "settings")  # no settings set on a rule to read later


def test_an_answer_that_depends_on_the_target_reads_the_settings_it_is_given():
    """A float16 leaky_relu fails below iOS17 only: CML313 refuses it at iOS15, not at 17."""
    torch = pytest.importorskip("torch")
    from coreml_lint.rules.cml313_activation_alpha_dtype import ActivationAlphaDtype

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.leaky_relu(x, 0.1)

    ep = torch.export.export(Model(), (torch.randn(2, 4, dtype=torch.float16),))
    node = next(n for n in ep.graph.nodes if "leaky_relu" in str(n.target))
    rule = ActivationAlphaDtype()
    ios15 = PartitionerSettings().changed(minimum_deployment_target=15)
    ios17 = PartitionerSettings().changed(minimum_deployment_target=17)
    assert rule.refuse(node, ios15) == "float16 activation with an fp32 constant in Core ML"
    assert rule.refuse(node, ios17) is None

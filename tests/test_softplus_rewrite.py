"""CML316's rewrite of a softplus whose threshold Core ML drops computes torch's values:
``where(beta * x > threshold, x, softplus(x, beta))``, the comparison in float32 as torch's
kernel makes it (in float16 it picks the other branch near the threshold), for an output of
the program too (fast: exports and runs eager, never lowers)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "dtype, beta, threshold",
    [
        (torch.float32, 2.0, 5.0),
        (torch.float32, -2.0, 1.0),
        (torch.float32, 1.0, -1.0),
        (torch.float16, 3.0, 1.0),
    ],
)
def test_the_written_out_threshold_is_torchs_softplus(dtype, beta, threshold):
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.rules.cml316_softplus_threshold import SoftplusThreshold

    class Act(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.softplus(x, beta=beta, threshold=threshold)

    # values around the threshold (0.33349609375 * 3 is past 1 in float32, not in float16)
    x = torch.cat([torch.linspace(-4, 4, 61), torch.tensor([0.33349609375, threshold / beta])])
    x = x.to(dtype).reshape(1, -1)
    ep = torch.export.export(Act(), (x,))
    expected = ep.module()(x)
    rewritten, done = SoftplusThreshold().rewrite(ep, PartitionerSettings())
    assert done and "written as a where" in done[0]
    targets = {str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"}
    assert "aten.where.self" in targets and "aten.gt.Scalar" in targets
    assert torch.equal(rewritten.module()(x), expected)


def test_the_default_threshold_is_left_alone():
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.rules.cml316_softplus_threshold import SoftplusThreshold, threshold_matters

    ep = torch.export.export(torch.nn.Softplus(beta=2.0), (torch.randn(2, 8),))
    _, done = SoftplusThreshold().rewrite(ep, PartitionerSettings())
    assert done == [] and not threshold_matters(20.0) and not threshold_matters(8.0)
    assert threshold_matters(7.0) and threshold_matters(0.0) and threshold_matters(-1.0)

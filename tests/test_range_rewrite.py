"""CML314's rewrite of an integer ``arange`` with float numbers keeps torch's values: torch
truncates the start and step for an integer dtype and counts with the floats, for each of the
three overloads export records (fast: exports and runs eager, never lowers)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "numbers",
    [(4.0,), (7.5,), (0.5, 7.5), (-3.0, 6.5), (0, 8, 2.5), (0.5, 9, 2.0), (9, -1.5, -2.5)],
)
def test_an_arange_of_floats_is_remade_of_ints_with_torchs_values(numbers):
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.rules.cml314_integer_result_made_float import IntegerResultMadeFloat

    size = len(torch.arange(*numbers, dtype=torch.long))

    class Frames(torch.nn.Module):
        def forward(self, x):
            return x.index_select(1, torch.arange(*numbers, dtype=torch.long).clamp(0, 15))

    x = torch.randn(2, 16)
    ep = torch.export.export(Frames(), (x,))
    expected = ep.module()(x)
    rewritten, done = IntegerResultMadeFloat().rewrite(ep, PartitionerSettings())
    assert done and all("made so Core ML keeps it integer" in d for d in done)
    ranges = [n for n in rewritten.graph.nodes if "arange" in str(n.target)]
    assert [n.target for n in ranges] == [torch.ops.aten.arange.start_step]
    assert all(isinstance(a, int) for a in ranges[0].args)
    assert torch.equal(rewritten.module()(x), expected) and expected.shape[1] == size


def test_an_integer_linspace_is_not_rewritten():
    """No integer form computes torch's integer ``linspace`` (float64 from truncated bounds)
    in Core ML: the rewrite leaves it, and ``lower`` keeps it on the CPU (``refuse``, which
    the oracle's lower test of ``linspace-long-index-select`` proves)."""
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.rules.cml314_integer_result_made_float import IntegerResultMadeFloat

    class Frames(torch.nn.Module):
        def forward(self, x):
            return x.index_select(1, torch.linspace(0, 15, 4, dtype=torch.long))

    ep = torch.export.export(Frames(), (torch.randn(2, 16),))
    _, done = IntegerResultMadeFloat().rewrite(ep, PartitionerSettings())
    assert done == []

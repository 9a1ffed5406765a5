"""CML317 on the real stack, at the small inputs its warning is about.

The rule's program cases (in its module) use inputs away from 0, where the stock lowering
verifies: the finding is a warning. Here the same ops get inputs down to 1e-7: the stock
MIL rounds next to 1 first (``log`` with ``epsilon=1``, ``exp`` then ``sub``), verify sees
the values depart there, and ``lower`` writes the forms whose rounding cancels, which
verify (judged against float64) accepts (the oracle tier). The forms themselves are
checked in eager here, at special values too.
"""

from __future__ import annotations

import re

import pytest


def _program():
    import torch

    class LogOneP(torch.nn.Module):
        def forward(self, x):
            log = torch.log1p(x)
            return log, torch.expm1(x)

    small = torch.logspace(-7, -2, 16)
    x = torch.cat([small, -small, torch.linspace(-3, 3, 16)]).reshape(3, 16)
    return torch.export.export(LogOneP(), (x,))


@pytest.mark.oracle
def test_the_stock_lowering_rounds_next_to_one_and_verify_sees_it():
    pytest.importorskip("coremltools")
    from oracle import lower

    from coreml_lint import lint_program
    from coreml_lint.verifier import verify

    ep = _program()
    lowered = lower(ep)
    assert lowered.ok, lowered.message
    assert re.search(r"= log\(x=%\w+, epsilon=1\.0", lowered.mil), lowered.mil
    expm1 = r"%(\w+): [^=]*= exp\(x=.*= sub\(x=%\1, y=1\.0"  # exp, then 1 taken off
    assert re.search(expm1, lowered.mil, re.S), lowered.mil
    report = verify(ep)
    assert report.status == "diverge", report.summary()
    assert {d.mil_op for d in report.divergences} == {"log", "sub"}
    warned = {f.node for f in lint_program(ep).findings if f.code == "CML317"}
    assert warned == {"log1p", "expm1"}


@pytest.mark.oracle
def test_lower_writes_forms_that_verify_at_small_inputs():
    pytest.importorskip("coremltools")
    from coreml_lint.lowering.run import lower

    result = lower(_program(), verify=True)
    report = result.report
    assert [r.partition(":")[0] for r in report.rewrites] == ["CML317", "CML317"]
    assert not report.dropped_rewrites and not report.refused
    assert report.verify is not None and report.verify.status == "agree", report.verify.summary()
    assert report.partitions_after == 1  # nothing moved to the CPU


def _rewritten(x, skip=()):
    """The program of ``_program``'s ops on ``x``, through CML317's rewrite."""
    import torch

    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.rules.cml317_log1p_expm1_rounded import Log1pExpm1Rounded

    class Both(torch.nn.Module):
        def forward(self, x):
            return torch.log1p(x), torch.expm1(x)

    ep = torch.export.export(Both(), (x,))
    settings = PartitionerSettings().changed(skip_ops_for_coreml_delegation=tuple(skip))
    return Log1pExpm1Rounded().rewrite(ep, settings)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_rewritten_forms_are_torch_s_functions_in_eager(dtype):
    """To a few units of the dtype, at special values too: -1, infinities, NaN, values
    whose exp overflows (``log1p(exp(x))`` of a large x), tiny and huge ones."""
    import torch

    dtype = getattr(torch, dtype)
    info = torch.finfo(dtype)
    special = [-1.0, float("inf"), float("-inf"), float("nan"), info.max, -info.max, info.tiny]
    small = torch.logspace(-7, -0.2, 40).tolist()
    x = torch.tensor([*special, *small, *(-v for v in small), 0.5, -0.5, 3.0, 90.0], dtype=dtype)
    ep, done = _rewritten(x)
    assert len(done) == 2 and not any(
        n.target in (torch.ops.aten.log1p.default, torch.ops.aten.expm1.default)
        for n in ep.graph.nodes
    )
    for got, want in zip(ep.module()(x), (torch.log1p(x), torch.expm1(x)), strict=True):
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        finite = want.isfinite()
        off = (got[finite].double() - want[finite].double()).abs()
        assert (off <= 4 * info.eps * want[finite].double().abs().clamp_min(info.tiny)).all()


def test_an_op_kept_on_the_cpu_is_not_rewritten():
    import torch

    ep, done = _rewritten(torch.randn(8), skip=["aten.log1p.default"])
    assert [d.split(":")[0] for d in done] == ["expm1"]
    assert any(n.target == torch.ops.aten.log1p.default for n in ep.graph.nodes)


def test_lower_keeps_the_forms_where_the_outputs_are_large():
    """Past |x| = 0.5 the forms are exp(x) - 1 and log(1 + x), a float32 unit or two from
    torch's own functions: at expm1(20) that is 32, far above the rule's 1e-5, yet the same
    fraction of the value. ``lower``'s eager check bounds it relatively there, so the rewrite
    is kept; a rewrite off by 1e-3 of its value is still refused."""
    import copy

    import torch

    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.eager import outputs_match
    from coreml_lint.rules.cml317_log1p_expm1_rounded import Log1pExpm1Rounded

    class Scaled(torch.nn.Module):
        def forward(self, x):
            return torch.expm1(x * 4), torch.log1p(x.abs() * 1000)

    x = torch.linspace(-1, 5, 200).reshape(4, 50)
    ep = torch.export.export(Scaled(), (x,))
    rule = Log1pExpm1Rounded()
    rewritten, done = rule.rewrite(copy.deepcopy(ep), PartitionerSettings())
    assert len(done) == 2
    assert outputs_match(ep, rewritten, ((x,), {}), rule.rewrite_tolerance)

    class Off(torch.nn.Module):
        def forward(self, x):
            return torch.expm1(x * 4) * (1 + 1e-3), torch.log1p(x.abs() * 1000)

    off = torch.export.export(Off(), (x,))
    assert not outputs_match(ep, off, ((x,), {}), rule.rewrite_tolerance)

"""CML317 on the real stack, at the small inputs its warning is about.

The rule's program cases (in its module) use inputs away from 0, where the stock lowering
verifies: the finding is a warning. Here the same ops get inputs down to 1e-7: the stock
MIL rounds next to 1 first (``log`` with ``epsilon=1``, ``exp`` then ``sub``), verify sees
the values depart there, and ``lower`` writes the forms whose rounding cancels, which
verify (judged against float64) accepts.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("coremltools")

pytestmark = pytest.mark.oracle


def _program():
    import torch

    class LogOneP(torch.nn.Module):
        def forward(self, x):
            log = torch.log1p(x)
            return log, torch.expm1(x)

    small = torch.logspace(-7, -2, 16)
    x = torch.cat([small, -small, torch.linspace(-3, 3, 16)]).reshape(3, 16)
    return torch.export.export(LogOneP(), (x,))


def test_the_stock_lowering_rounds_next_to_one_and_verify_sees_it():
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


def test_lower_writes_forms_that_verify_at_small_inputs():
    from coreml_lint.lowering.run import lower

    result = lower(_program(), verify=True)
    report = result.report
    assert [r.partition(":")[0] for r in report.rewrites] == ["CML317", "CML317"]
    assert not report.dropped_rewrites and not report.refused
    assert report.verify is not None and report.verify.status == "agree", report.verify.summary()
    assert report.partitions_after == 1  # nothing moved to the CPU

"""Oracle tests: lower every case with the *stock* CoreMLPartitioner and check reality.

A flagged model must really crash with the predicted error, or really lower to MIL with
the wrong-value signature; an unflagged model must lower. These need torch, executorch and
coremltools, take 0.3-3 s per lowering, and run in CI (in parallel with pytest-xdist).
"""

from __future__ import annotations

import re

import pytest
from cases import BY_ID, CASE_IDS

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_stock_lowering_behaves_as_predicted(case_id, export_case):
    from oracle import lower, run_with_portable_runtime

    case = BY_ID[case_id]
    lowered = lower(export_case(case_id), **case.settings)
    if case.crash:
        assert not lowered.ok, "predicted a crash, but the stock partitioner lowered it"
        assert re.search(case.crash, lowered.message, re.S), lowered.message
        return
    assert lowered.ok, f"{lowered.stage}: {lowered.message}"
    _placement_matches(case_id, lowered)
    if case.silent:
        assert case.silent(lowered), "no wrong-value signature in the MIL:\n" + lowered.mil
    if case.clean:
        assert case.clean(lowered), "the fixed form's MIL is not right:\n" + lowered.mil
    if case.runs_on_portable is not None:
        _model, inputs = case.make()
        if case.runs_on_portable:
            run_with_portable_runtime(lowered, inputs)
        else:
            with pytest.raises(RuntimeError):
                run_with_portable_runtime(lowered, inputs)


def _placement_matches(case_id, lowered):
    """The predicted partitions and CPU op kinds are the ones the stock partitioner made.

    Op kinds, not counts: ExecuTorch turns a scalar operand into a lifted constant plus a
    ``_to_dim_order_copy`` cast, which a skip list may also keep on the CPU; we do not
    model those extra casts."""
    from conftest import exported, settings_of

    from coreml_lint import lint_program
    from coreml_lint.core.config import LintConfig

    report = lint_program(exported(case_id), LintConfig(partitioner=settings_of(case_id)))
    predicted_cpu = {p.edge_name for p in report.placement.nodes.values() if p.where == "cpu"}
    assert len(report.placement.partitions) == lowered.delegate_calls
    assert predicted_cpu == set(lowered.edge_cpu_ops)


@pytest.mark.parametrize("case_id", [c for c in CASE_IDS if BY_ID[c].expect])
def test_advice_that_leaves_nothing_lowers(case_id):
    """A promise checked end to end: when the combined advice claims to avoid every error,
    the stock lowering with exactly those settings reaches a .pte."""
    from conftest import exported, settings_of
    from oracle import lower

    from coreml_lint import lint_program
    from coreml_lint.core.config import LintConfig

    advice = lint_program(exported(case_id), LintConfig(partitioner=settings_of(case_id))).advice
    if advice is None or advice.after:
        return  # no advice, or advice that says what it leaves: nothing promised to lower
    assert not advice.introduces and not advice.leaves
    s = advice.settings
    lowered = lower(
        exported(case_id),
        ios=s.minimum_deployment_target if s.minimum_deployment_target != 15 else None,
        skip=list(s.skip_ops_for_coreml_delegation) or None,
        take_over_mutable_buffer=s.take_over_mutable_buffer,
        take_over_constant_data=s.take_over_constant_data,
        lower_full_graph=s.lower_full_graph,
    )
    assert lowered.ok, f"advice {advice.code} claimed to avoid every error: {lowered.message}"

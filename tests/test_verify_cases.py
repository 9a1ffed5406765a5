"""verify alone, on the pitfall models of tests/cases.py: every silent mislowering diverges,
every clean case agrees in every check, a lowering crash is a result (exit 1).

No lint rule is consulted (``explain`` is not passed), so what is caught here is caught by
executing the MIL; but the last test, which asks the CLI which rule explains a divergence.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("coremltools")

from cases import BY_ID, CASES
from conftest import exported

from coreml_lint.verifier import verify

pytestmark = pytest.mark.oracle

# The silent wrong-value cases (their MIL signature is recorded in cases.py), plus the
# integer-state case whose wrong values only show above 2048.
SILENT = [c.id for c in CASES if c.silent is not None] + ["int-state-one-value-ios18"]
# A warning case with MIL evidence (``silent``) diverges on its inputs: not clean.
CLEAN = [c.id for c in CASES if not c.expect and c.crash is None and c.silent is None]


def _verify(case_id: str):
    settings = BY_ID[case_id].settings
    return verify(
        exported(case_id),
        minimum_deployment_target=settings.get("ios"),
        skip_ops_for_coreml_delegation=settings.get("skip"),
        take_over_mutable_buffer=settings.get("take_over_mutable_buffer", True),
        take_over_constant_data=settings.get("take_over_constant_data", True),
        lower_full_graph=settings.get("lower_full_graph", False),
    )


def test_the_tables_are_not_empty():
    assert {
        "gelu-tanh",
        "mha-bool-mask",
        "full-int-no-dtype",
        "zeros-int-dtype",
        "new-zeros-int",
        "int8-output",
        "int-state-ios18",
    } <= set(SILENT)
    assert any("clone" in case_id for case_id in SILENT)
    assert len(CLEAN) > 30


@pytest.mark.parametrize("case_id", SILENT)
def test_silent_case_diverges(case_id):
    report = _verify(case_id)
    assert report.status == "diverge", report.summary()
    assert report.exit_code == 1
    assert report.divergences and all(d.rule is None for d in report.divergences)


@pytest.mark.parametrize("case_id", CLEAN)
def test_clean_case_agrees(case_id):
    report = _verify(case_id)
    assert report.status == "agree", report.summary()
    assert report.exit_code == 0
    for partition in report.partitions:
        assert partition.interface.status == "agree"
        assert partition.semantic.status == "agree", partition.semantic.message
        assert partition.float16.status == "agree", partition.float16.message


def test_divergences_name_the_op_node_and_numbers():
    report = _verify("gelu-tanh")
    (divergence,) = report.divergences
    assert divergence.check == "semantic" and divergence.kind == "values"
    assert divergence.mil_op == "gelu" and divergence.node == "aten_gelu_default"
    assert divergence.target == "aten.gelu.default"
    assert divergence.source and re.search(r"\.py:\d+$", divergence.source)
    numbers = divergence.numbers
    assert 1e-5 < numbers["max_rel"] < 1e-3 and numbers["index"] is not None
    assert numbers["expected"] != numbers["actual"]
    # judged against float64: the element's own relative error, far above eager's own (the
    # example inputs come from the global RNG, so the element and its size vary with the
    # tests run before in the worker: eager's own error is compared, not fixed)
    assert numbers["rel_error"] > 1e-4 and numbers["over"] > 1
    assert numbers["own_rel"] < numbers["rel_error"] / 100
    assert "relative error" in divergence.message and "float32 ulps" in divergence.message


def test_integer_fill_above_2048_is_inexact_in_float16():
    report = _verify("full-int-no-dtype")
    kinds = {(d.check, d.kind) for d in report.divergences}
    assert ("float16", "integer") in kinds  # 3001 becomes 3000 in fp16
    # The int64 output comes back as float, which the runtime converts: not a divergence
    # by itself (the rounding above is).
    assert ("interface", "dtype") not in kinds


def test_returned_clone_is_the_input_var():
    report = _verify("output-clone-of-input")
    assert [d.kind for d in report.divergences] == ["output-is-input"]
    (divergence,) = report.divergences
    assert divergence.node == "dim_order_ops__clone_dim_order_default"
    assert divergence.source and re.search(r"\.py:\d+$", divergence.source)
    report = _verify("output-clone-of-output")
    assert [d.kind for d in report.divergences] == ["duplicate-output"]


def test_integer_state_held_in_fp16():
    report = _verify("int-state-ios18")
    assert any(d.kind == "dtype" and d.output == "state count" for d in report.divergences)


def test_a_lowering_crash_is_a_result():
    report = _verify("uint8-input")
    assert report.status == "lowering_crash" and report.exit_code == 1
    assert "uint8" in report.lowering_error and report.lowering_stage
    assert report.to_json()["lowering_error"] == report.lowering_error


def test_a_warning_come_true_explains_the_divergence(tmp_path, capsys):
    """CML310 warns at the line that fills a padding mask with -inf; the NaN rows show at
    the attention a line below it (the finding's ``shows_at``). verify's CLI names the
    warning as what explains them."""
    import torch

    from coreml_lint.cli.main import main

    path = tmp_path / "program.pt2"
    torch.export.save(exported("infinite-padding-mask"), path)
    assert main(["verify", "-q", "--isolated", str(path)]) == 1
    out = capsys.readouterr().out
    assert "explained by CML310" in out and "no rule explains it" not in out

"""Every pitfall model gets exactly the error codes the catalogue predicts; every clean or
fixed twin gets none. Fast: exports, never lowers (the oracle tests lower the same table)."""

from __future__ import annotations

import pytest
from cases import BY_ID, CASE_IDS

from coreml_lint import lint_program
from coreml_lint.core.config import LintConfig
from coreml_lint.core.findings import Severity


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_error_codes_match_the_catalogue(case_id, export_case, case_settings):
    case = BY_ID[case_id]
    report = lint_program(export_case(case_id), LintConfig(partitioner=case_settings(case_id)))
    errors = {f.code for f in report.findings if f.severity is Severity.ERROR}
    assert errors == case.expect, [f.message for f in report.findings]
    if case.warnings is not None:
        warnings = {f.code for f in report.findings if f.severity is Severity.WARNING}
        assert warnings == case.warnings


@pytest.mark.parametrize("case_id", [c for c in CASE_IDS if BY_ID[c].expect])
def test_findings_name_node_op_and_model_line(case_id, export_case, case_settings):
    report = lint_program(export_case(case_id), LintConfig(partitioner=case_settings(case_id)))
    for finding in report.findings:
        if finding.code not in BY_ID[case_id].expect:
            continue
        assert finding.message and finding.fix
        if finding.node is not None:
            assert finding.op and "." in finding.op
            assert finding.location is not None
            assert finding.location.path.endswith(".py"), finding.location

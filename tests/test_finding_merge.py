"""Findings of one rule at one source line are printed once (``engine.program._merge``), but
never an error behind a warning: a layer class used three times whose one trained PReLU
crashes while the two untrained ones convert is an error at that line."""

from __future__ import annotations

from coreml_lint.core.findings import Finding, Location, Outcome, Severity
from coreml_lint.engine.program import _merge


def _at_line(node: str, severity: Severity) -> Finding:
    return Finding(
        code="CML801",
        name="measured-op-behaviour",
        severity=severity,
        outcome=Outcome.CRASH,
        message=f"prelu {node}",
        file="m.pt2",
        node=node,
        location=Location(path="model.py", line=5),
    )


def test_an_error_is_not_merged_behind_a_warning_at_its_line():
    found = [
        _at_line("prelu", Severity.WARNING),
        _at_line("prelu_1", Severity.ERROR),
        _at_line("prelu_2", Severity.WARNING),
    ]
    merged = _merge(found)
    assert sorted((f.severity.value, f.count) for f in merged) == [("error", 1), ("warning", 2)]

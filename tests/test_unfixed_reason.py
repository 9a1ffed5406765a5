"""Why a program finding is left by --fix / --diff: the reason printed must be true."""

from __future__ import annotations

from pathlib import Path

from coreml_lint.checking.fix import unfixed_reason
from coreml_lint.core.findings import Finding, Location, Outcome, Severity


def _finding(code: str, path: Path, line: int) -> Finding:
    return Finding(
        code, "x", Severity.ERROR, Outcome.CRASH, "m", "p.pt2", location=Location(str(path), line)
    )


def test_a_rule_flagged_in_source_without_a_source_fix_says_it_has_none(tmp_path: Path) -> None:
    """CML201 has a source pattern but no transform: 'not the pattern its fix rewrites'
    would send the user looking for a pattern there is no fix for."""
    model = tmp_path / "model.py"
    model.write_text("self.c.add_(x)\n")
    reason = unfixed_reason(_finding("CML201", model, 1), set(), unsafe=False)
    assert reason == "CML201 has no source fix: change the model as its fix says"


def test_a_rule_with_a_source_fix_says_the_line_is_not_its_pattern(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("y = gelu(x)\n")
    reason = unfixed_reason(_finding("CML305", model, 1), set(), unsafe=False)
    assert reason.startswith("the source at line 1 is not the pattern CML305's source fix")

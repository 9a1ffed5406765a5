"""``coreml-lint lower --target coreai``: lint for Core AI, rewrite, lint again, convert with
coreai-torch, run the converted asset on Linux's Core AI runtime against eager, and keep the
asset only when it agrees.

The loop knows no rule, as ``lowering/run.py`` does not: the Core AI rules that fired are
asked for their ``rewrite`` (Core AI runs the whole program, so a rewrite is the only
answer; there is no CPU to refuse a node to). Each rewrite is kept only when the rewritten
program computes the same in eager, and the asset only when the program converted from it,
run by Core AI, computes what the program *as given* computes in eager
(``verifier/coreai.py`` with ``reference``). An error finding no rule answers stops the
command before anything is converted; a conversion crash or a divergence leaves nothing
written. Either way the report says why (``refused``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.config import LintConfig
from coreml_lint.core.findings import Finding, Severity
from coreml_lint.engine.exported import lint_exported_program
from coreml_lint.lowering.report import RewriteLog
from coreml_lint.lowering.run import (
    LoweringError,
    _rewrite_until_stable,
    stop_if_a_rule_failed,
    stop_if_unanswered,
)

Progress = Callable[[str], None]
TARGET = "coreai"


@dataclass
class CoreAILowerReport(RewriteLog):
    """What ``lower --target coreai`` did: the rewrites per rule, the verify of the converted
    asset, and whether the asset was written (``refused``: why not)."""

    findings_before: list[Finding]
    findings_after: list[Finding] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)  # "CODE: node: what was done"
    rejected_rewrites: list[str] = field(default_factory=list)
    rewritten_codes: list[str] = field(default_factory=list)
    acted: dict[str, list[str]] = field(default_factory=dict)
    verify: Any = None  # the VerifyReport of the converted asset
    written: bool = False
    refused: str = ""

    @property
    def exit_code(self) -> int:
        return 0 if self.written else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "target": TARGET,
            "written": self.written,
            "refused": self.refused or None,
            "findings_before": [f.to_json() for f in self.findings_before],
            "findings_after": [f.to_json() for f in self.findings_after],
            "rewrites": self.rewrites,
            "rejected_rewrites": self.rejected_rewrites,
            "acted": self.acted,
            "verify": self.verify.to_json() if self.verify is not None else None,
        }

    def render(self, output: str) -> str:
        head = f"wrote {output}" if self.written else f"NOT written: {output}"
        lines = [f"{head} (Core AI: the whole program, converted by coreai-torch)"]
        if not self.acted and self.verify is not None:
            lines.append("  no Core AI rule needed an answer: the program converted as it is")
        for code, actions in sorted(self.acted.items()):
            lines.extend(f"  {code}  {action}" for action in actions)
        lines.extend(f"  rejected   {change}" for change in self.rejected_rewrites)
        for finding in self.findings_before:
            if finding.severity is Severity.WARNING:
                lines.append(f"  warning {finding.code}: {finding.message}")
        if self.verify is not None:
            from coreml_lint.verifier.coreai import summary

            lines.extend("  " + line for line in summary(self.verify).splitlines())
        if self.refused:
            lines.append(f"  refused: {self.refused}")
        return "\n".join(lines)


def lower_coreai(
    exported_program: Any,
    output: Path,
    *,
    inputs: Any = None,
    progress: Progress | None = None,
) -> CoreAILowerReport:
    """Write ``exported_program``, with the Core AI rules' rewrites, as the Core AI asset
    ``output`` (a ``.aimodel`` folder), when the asset computes on Core AI what the program
    computes in eager on ``inputs`` (None: the program's example inputs, as ``verify``
    takes them). A refusal is the report's ``refused``, whether it comes before converting
    (an error finding no rule answers, one the rewrites left) or after (a crash, wrong
    values), so every output format reports both alike."""
    say = progress or (lambda message: None)
    config = LintConfig(target=TARGET)
    say("linting the program for Core AI")
    first = lint_exported_program(exported_program, config)
    report = CoreAILowerReport(first.findings)
    try:
        stop_if_a_rule_failed(first)
        stop_if_unanswered(first.findings)
        say("functionalizing (run_decompositions({}))")
        ep = exported_program.run_decompositions({})
        ep, second = _rewrite_until_stable(ep, first, config, report, say)
        report.findings_after = [f for f in second.findings if f.severity is Severity.ERROR]
        if report.findings_after:
            lines = "; ".join(f"{f.code}: {f.message}" for f in report.findings_after)
            raise LoweringError(f"not converted, the rewrites left: {lines}")
    except LoweringError as exc:  # refused before converting: the report says why
        report.refused = str(exc)
        return report
    _convert_and_verify(ep, exported_program, output, inputs, report, say)
    return report


def _convert_and_verify(
    ep: Any, original: Any, output: Path, inputs: Any, report: CoreAILowerReport, say: Progress
) -> None:
    """Convert ``ep`` into a folder beside ``output``, verify that very asset against the
    original's eager run, and move it to ``output`` only when it agrees."""
    from coreml_lint.verifier.coreai import verify_coreai

    output = Path(output)
    with tempfile.TemporaryDirectory(prefix=".coreml-lint-", dir=output.parent) as tmp:
        report.verify = verify_coreai(
            ep, inputs=inputs, progress=say, reference=original, directory=Path(tmp)
        )
        status = report.verify.status
        if status != "agree":
            report.refused = _why_not(report.verify)
            return
        say(f"writing {output}")
        if output.is_dir():
            shutil.rmtree(output)
        elif output.exists():
            output.unlink()
        Path(tmp, "model.aimodel").rename(output)
        report.written = True


def _why_not(verify: Any) -> str:
    """Why the converted asset is not written, in one line."""
    if verify.status == "lowering_crash":
        return f"{verify.lowering_stage} failed: {verify.lowering_error}"  # names Core AI
    if verify.status == "diverge":
        wrong = ", ".join(sorted({d.output for d in verify.divergences}))
        return f"the converted program computes other values than eager ({wrong})"
    reasons = "; ".join(verify.not_verified) or "the run could not be judged"
    return f"could not verify the converted program: {reasons}"

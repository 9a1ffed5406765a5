"""``verify``'s results in the usual finding format (CML901, CML902), so every output format
(full, json, github, sarif, html) renders them like lint findings."""

from __future__ import annotations

from coreml_lint.core.findings import Finding, Location, crash_predictions, predicted_fix
from coreml_lint.rules.cml901_mil_divergence import MilDivergence
from coreml_lint.rules.cml902_lowering_crash import LoweringCrash
from coreml_lint.verifier.report import Divergence, VerifyReport


def findings_of(
    report: VerifyReport, file: str, lint: list[Finding] | None = None
) -> list[Finding]:
    """One finding per divergence, and one for a lowering crash, naming the rules of the
    program's ``lint`` findings that predicted it (:func:`crash_predictions`, as ``lower``
    asks), when the lint is given."""
    found = [_divergence(d, file) for d in report.divergences]
    if report.lowering_error:
        first = report.lowering_error.strip().splitlines()[0][:300]
        if lint is None:
            fix = "see the lint findings of this program for a rule that predicted it"
        else:
            fix = predicted_fix(
                crash_predictions(lint, report.lowering_error),
                "no rule predicted it: keep the failing op on the CPU "
                "(skip_ops_for_coreml_delegation) or compute it another way",
            )
        found.append(
            LoweringCrash.make_finding(
                f"lowering crashed in {report.lowering_stage}: {first}", file=file, fix=fix
            )
        )
    return found


def _divergence(d: Divergence, file: str) -> Finding:
    where = f" (first at MIL op {d.mil_op} `{d.mil_var}`)" if d.mil_op else ""
    fix = (
        f"explained by {d.rule}: see `coreml-lint rule {d.rule}`"
        if d.rule
        else "no rule explains it: keep the node on the CPU (skip_ops_for_coreml_delegation) "
        "or compute it another way, and verify again"
    )
    return MilDivergence.make_finding(
        f"partition {d.partition} [{d.check}] {d.output}: {d.message}{where}",
        file=file,
        node=d.node,
        op=d.target,
        location=_location(d),
        fix=fix,
        extra={"check": d.check, "kind": d.kind, "numbers": d.numbers, "rule": d.rule},
    )


def _location(d: Divergence) -> Location | None:
    if not d.source or ":" not in d.source:
        return None
    path, _, line = d.source.rpartition(":")
    if not line.isdigit():
        return None
    return Location(path, int(line), None, d.code)

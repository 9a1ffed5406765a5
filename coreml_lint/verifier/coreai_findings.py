"""``verify --target coreai``'s results as findings (CAI901, CAI902), so every output format
renders them like lint findings; a Core AI lint finding at the same node or source line
explains them."""

from __future__ import annotations

import re
from collections.abc import Callable

from coreml_lint.core.findings import Finding, Location, Severity
from coreml_lint.rules.cai901_coreai_divergence import CoreAIDivergence
from coreml_lint.rules.cai902_coreai_crash import CoreAICrash
from coreml_lint.verifier.coreai import crash_location
from coreml_lint.verifier.report import Divergence, VerifyReport


def rule_for_node(findings: list[Finding]) -> Callable[[str], str | None]:
    """``explain``: the Core AI lint rule with an error finding on that node."""
    by_node = {f.node: f.code for f in findings if f.node and f.severity is Severity.ERROR}
    return lambda name: by_node.get(name) or by_node.get(re.sub(r"_\d+$", "", name))


def findings_of(report: VerifyReport, file: str, lint: list[Finding]) -> list[Finding]:
    """One finding per divergence, and one for a crash; each names the lint rule that
    predicted it when one flagged the same source line."""
    by_line = {
        (f.location.path, f.location.line): f.code
        for f in lint
        if f.location is not None and f.severity is Severity.ERROR
    }
    found = [_divergence(d, file, by_line) for d in report.divergences]
    if report.lowering_error:
        path, line = crash_location(report.lowering_error)
        rule = by_line.get((path, line)) if path else None
        found.append(
            CoreAICrash.make_finding(
                f"crashed in {report.lowering_stage}: {report.lowering_error[:400]}",
                file=file,
                location=Location(path, line) if path and line else None,
                fix=f"predicted by {rule}: see `coreml-lint rule {rule}`"
                if rule
                else "no Core AI rule predicted it: `coreml-lint --target coreai` lists those "
                "that did",
                extra={"rule": rule},
            )
        )
    return found


def _divergence(d: Divergence, file: str, by_line: dict[tuple[str, int], str]) -> Finding:
    location = None
    if d.source and ":" in d.source:
        path, _, line = d.source.rpartition(":")
        if line.isdigit():
            location = Location(path, int(line), None, d.code)
            d.rule = d.rule or by_line.get((path, int(line)))
    fix = (
        f"explained by {d.rule}: see `coreml-lint rule {d.rule}`"
        if d.rule
        else "no Core AI rule explains it: compute the value another way and verify again"
    )
    return CoreAIDivergence.make_finding(
        f"[{d.check}] {d.output}: {d.message}",
        file=file,
        node=d.node,
        op=d.target,
        location=location,
        fix=fix,
        extra={"check": d.check, "kind": d.kind, "numbers": d.numbers, "rule": d.rule},
    )

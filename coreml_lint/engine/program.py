"""Run the program rules over a graph: canonicalize, place, check, merge, suppress, advise.

The whole path is torch-free; ``lint_pt2`` reads an archive, ``lint_graph`` takes a graph
from anywhere (the in-memory ``ExportedProgram`` adapter in ``engine/exported.py`` feeds it
too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.findings import Finding, Severity
from coreml_lint.core.noqa import file_is_exempt, is_suppressed, line_at
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.engine.advice import Advice, combined_advice
from coreml_lint.program.canonical import canonicalize
from coreml_lint.program.graph import Graph
from coreml_lint.program.placement import Placement, predict_placement
from coreml_lint.program.pt2 import read_pt2
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules


@dataclass
class ProgramReport:
    """The result of linting one exported method."""

    graph: Graph
    placement: Placement
    findings: list[Finding]
    config: LintConfig
    suppressed: int = 0
    advice: Advice | None = None


def lint_pt2(path: str | Path, config: LintConfig | None = None) -> list[ProgramReport]:
    """Every method of the archive; several methods are linted as one program's."""
    return lint_methods(read_pt2(path), config)


def lint_methods(graphs: list[Graph], config: LintConfig | None = None) -> list[ProgramReport]:
    """Lint each method, then, when there are several, what they do together (the rules'
    ``check_methods``: one multifunction Core ML model per partition position). A finding
    about the methods together is reported with the method it names (else the first)."""
    config = config or LintConfig()
    reports = [lint_graph(graph, config) for graph in graphs]
    by_method = {r.graph.method: r for r in reports}
    for finding in method_findings(reports, config):
        by_method.get(finding.extra.get("method"), reports[0]).findings.append(finding)
    return reports


def method_findings(reports: list[ProgramReport], config: LintConfig) -> list[Finding]:
    """The rules' findings on several linted methods together (none for one method)."""
    if len(reports) < 2:
        return []
    contexts = {r.graph.method: ProgramContext(r.graph, r.placement) for r in reports}
    found: list[Finding] = []
    for rule in all_rules():
        if not config.is_selected(rule.code, reports[0].graph.source):
            continue
        for ctx in contexts.values():
            ctx.rule = rule
        found.extend(rule().check_methods(contexts))
    return found


def lint_graph(
    graph: Graph, config: LintConfig | None = None, *, advise: bool = True
) -> ProgramReport:
    config = config or LintConfig()
    canonical = graph if graph.meta.get("canonical") else canonicalize(graph)
    placement = predict_placement(canonical, config.partitioner)
    findings, suppressed = _suppress(_merge(raw_findings(placement, config)))
    report = ProgramReport(canonical, placement, findings, config, suppressed)
    if advise:

        def relint(settings: PartitionerSettings) -> list[Finding]:
            again = replace(config, partitioner=settings)
            return lint_graph(canonical, again, advise=False).findings

        report.advice = combined_advice(findings, config.partitioner, relint)
    return report


def raw_findings(placement: Placement, config: LintConfig) -> list[Finding]:
    """Every selected rule's findings on a placed canonical graph, before merging and noqa."""
    canonical = placement.graph
    ctx = ProgramContext(canonical, placement)
    found: list[Finding] = []
    for rule in all_rules():
        if not config.is_selected(rule.code, canonical.source):
            continue
        ctx.rule = rule
        found.extend(_checked(rule, ctx, canonical))
    return _deferred(found)


def _deferred(found: list[Finding]) -> list[Finding]:
    """Drop a deferring rule's finding on a node another rule reports an error on."""
    deferring = {rule.code for rule in all_rules() if rule.defers}
    if not deferring:
        return found
    claimed = {
        f.node
        for f in found
        if f.code not in deferring and f.node is not None and f.severity is Severity.ERROR
    }
    return [f for f in found if f.code not in deferring or f.node not in claimed]


def _checked(rule: type[Rule], ctx: ProgramContext, graph: Graph) -> list[Finding]:
    """A rule reads arguments where the op's schema puts them. A graph whose arguments are
    not where the schema says (a hand-edited or damaged archive) must end in one line naming
    the file, not a traceback; the rule is named so a real bug can be reported."""
    try:
        return list(rule().check(ctx))
    except Exception as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise InputError(
            f"{graph.source}: malformed exported program: {rule.code} cannot read it ({detail}); "
            "if torch.export wrote this file, please report it"
        ) from None


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and source line: a bf16 model must not print 400 lines."""
    merged: dict[tuple[Any, ...], Finding] = {}
    for finding in findings:
        loc = finding.location
        key = (
            (finding.code, loc.path, loc.line)
            if loc
            else (finding.code, finding.node, finding.message)
        )
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = finding
    return list(merged.values())


def _source_lines(path: str) -> tuple[str, ...] | None:
    try:
        return tuple(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())
    except (OSError, ValueError):
        return None


def _suppress(findings: list[Finding]) -> tuple[list[Finding], int]:
    """Drop findings whose model source line (or file) carries a noqa comment."""
    kept, suppressed = [], 0
    sources: dict[str, tuple[str, ...] | None] = {}
    for finding in findings:
        loc = finding.location
        if loc is not None and loc.path not in sources:
            sources[loc.path] = _source_lines(loc.path)
        lines = sources[loc.path] if loc else None
        if (
            lines is not None
            and loc is not None
            and (file_is_exempt(lines) or is_suppressed(finding.code, line_at(lines, loc.line)))
        ):
            suppressed += 1
            continue
        kept.append(finding)
    return kept, suppressed

"""Run the program rules over a graph: canonicalize, place, check, merge, suppress, advise.

The whole path is torch-free; ``lint_pt2`` reads an archive, ``lint_graph`` takes a graph
from anywhere (the in-memory ``ExportedProgram`` adapter in ``engine/exported.py`` feeds it
too).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coreml_lint.core.config import LintConfig
from coreml_lint.core.findings import Finding, Severity
from coreml_lint.core.noqa import file_is_exempt, is_suppressed, line_at
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.engine.advice import Advice, check_finding_advice, combined_advice
from coreml_lint.program.canonical import canonicalize
from coreml_lint.program.graph import Graph
from coreml_lint.program.placement import Placement, predict_placement
from coreml_lint.program.pt2 import read_pt2
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules


@dataclass(frozen=True)
class RuleFailure:
    """A rule that raised while checking a program: a bug in the rule, or an archive whose
    arguments are not where the op's schema puts them. The other rules' findings stand."""

    code: str
    name: str
    error: str  # "KeyError: 'x'", one line
    traceback: str

    def describe(self, source: str) -> str:
        return (
            f"{source}: internal error in {self.code} ({self.name}): {self.error}; the other "
            "rules' findings are reported (--verbose shows the traceback; if torch.export "
            "wrote this file, please report it)"
        )


@dataclass
class ProgramReport:
    """The result of linting one exported method. ``internal_errors``: the rules that raised
    (their findings are missing; every other rule's are here)."""

    graph: Graph
    placement: Placement
    findings: list[Finding]
    config: LintConfig
    suppressed: int = 0
    advice: Advice | None = None
    internal_errors: list[RuleFailure] = field(default_factory=list)


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
    failures = reports[0].internal_errors if reports else []
    for finding in method_findings(reports, config, failures):
        by_method.get(finding.extra.get("method"), reports[0]).findings.append(finding)
    return reports


def method_findings(
    reports: list[ProgramReport], config: LintConfig, failures: list[RuleFailure] | None = None
) -> list[Finding]:
    """The rules' findings on several linted methods together (none for one method); a
    rule that raises is recorded in ``failures``, as :func:`raw_findings` does."""
    if len(reports) < 2:
        return []
    contexts = {r.graph.method: ProgramContext(r.graph, r.placement) for r in reports}
    found: list[Finding] = []
    for rule in all_rules(config.target):
        if not config.is_selected(rule.code, reports[0].graph.source):
            continue
        for ctx in contexts.values():
            ctx.rule = rule
        try:
            checker = rule()
            found.extend(_lower_hint(checker, f) for f in checker.check_methods(contexts))
        except Exception as exc:
            import traceback

            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            if failures is not None:
                failures.append(RuleFailure(rule.code, rule.name, detail, traceback.format_exc()))
    return found


def lint_graph(
    graph: Graph, config: LintConfig | None = None, *, advise: bool = True
) -> ProgramReport:
    config = config or LintConfig()
    canonical = graph if graph.meta.get("canonical") else canonicalize(graph)
    placement = predict_placement(canonical, config.partitioner)
    failures: list[RuleFailure] = []
    findings, suppressed = _suppress(_merge(raw_findings(placement, config, failures)))
    report = ProgramReport(canonical, placement, findings, config, suppressed)
    report.internal_errors = failures
    if advise and config.target == "coreml":  # the advice is CoreMLPartitioner settings
        linted: dict[PartitionerSettings, list[Finding]] = {}

        def relint(settings: PartitionerSettings) -> list[Finding]:
            if settings not in linted:
                again = replace(config, partitioner=settings)
                linted[settings] = lint_graph(canonical, again, advise=False).findings
            return linted[settings]

        check_finding_advice(findings, config.partitioner, relint)
        report.advice = combined_advice(findings, config.partitioner, relint)
    return report


def raw_findings(
    placement: Placement, config: LintConfig, failures: list[RuleFailure] | None = None
) -> list[Finding]:
    """Every selected rule's findings on a placed canonical graph, before merging and noqa.
    A rule that raises adds a :class:`RuleFailure` to ``failures`` and finds nothing."""
    canonical = placement.graph
    ctx = ProgramContext(canonical, placement)
    rules = all_rules(config.target)
    selected = {rule.code for rule in rules if config.is_selected(rule.code, canonical.source)}
    # A node a named rule covers is that rule's, also when the rule is ignored: a deferring
    # rule (the measured table's CML801) must not report it again, or ignoring the named
    # rule would not ignore its finding. So the named rules run whenever one that defers to
    # them does; only the selected rules' findings (and failures) are kept.
    claims = any(rule.defers and rule.code in selected for rule in rules)
    found: list[Finding] = []
    for rule in rules:
        if rule.code not in selected and (rule.defers or not claims):
            continue
        ctx.rule = rule
        wanted = failures if failures is not None and rule.code in selected else []
        found.extend(_checked(rule, ctx, wanted))
    return [f for f in _deferred(found, config.target) if f.code in selected]


def _deferred(found: list[Finding], target: str = "coreml") -> list[Finding]:
    """Drop a deferring rule's finding on a node another rule reports an error on, or a
    finding that explains the measured outcome the deferring rule reports there
    (``Finding.explains``) (selected or not: see :func:`raw_findings`)."""
    deferring = {rule.code for rule in all_rules(target) if rule.defers}
    if not deferring:
        return found
    errors = {
        f.node
        for f in found
        if f.code not in deferring and f.node is not None and f.severity is Severity.ERROR
    }
    explained = {
        (f.node, outcome)
        for f in found
        if f.code not in deferring and f.node is not None
        for outcome in f.explains
    }

    def left_to_another(f: Finding) -> bool:
        return f.node in errors or (f.node, f.extra.get("measured")) in explained

    return [f for f in found if f.code not in deferring or not left_to_another(f)]


def _checked(rule: type[Rule], ctx: ProgramContext, failures: list[RuleFailure]) -> list[Finding]:
    """A rule's findings; a rule that raises is recorded and named, never blamed on the file
    as a whole, and never allowed to take the other rules' findings with it."""
    try:
        checker = rule()
        return [_lower_hint(checker, finding) for finding in checker.check(ctx)]
    except Exception as exc:
        import traceback

        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        failures.append(RuleFailure(rule.code, rule.name, detail, traceback.format_exc()))
        return []


def _lower_hint(rule: Rule, finding: Finding) -> Finding:
    """A finding says ``lower`` answers it (``lower_fixes``, computed from the rule's hooks)
    only when ``lower`` would: not when the rule's :meth:`Rule.unanswered` stops ``lower``
    on this very finding (a bool ``max(dim)``, which has no bool twin)."""
    if finding.lower_fixes and rule.unanswered(finding) is not None:
        finding.lower_fixes = False
    return finding


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per rule, severity and source line: a bf16 model must not print 400
    lines, and an error at a line is never hidden behind a warning of the same rule there
    (three PReLUs of one layer class, one of them trained: its crash is the error)."""
    merged: dict[tuple[Any, ...], Finding] = {}
    for finding in findings:
        loc = finding.location
        key = (
            (finding.code, finding.severity, loc.path, loc.line)
            if loc
            else (finding.code, finding.severity, finding.node, finding.message)
        )
        if key in merged:
            merged[key].count += 1
            merged[key].merged.append(finding)
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

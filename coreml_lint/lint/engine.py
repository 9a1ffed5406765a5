"""Run the program rules over a graph: canonicalize, place, check, suppress, merge.

The whole path is torch-free; ``lint_pt2`` reads an archive, ``lint_graph`` takes a graph
from anywhere (the in-memory ``ExportedProgram`` adapter feeds it too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coreml_lint.checks import all_rules
from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.config import LintConfig
from coreml_lint.lint.errors import InputError
from coreml_lint.lint.findings import Finding, Severity
from coreml_lint.program.canonical import canonicalize
from coreml_lint.program.graph import Graph
from coreml_lint.program.placement import Placement, predict_placement
from coreml_lint.program.pt2 import read_pt2

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"#\s*coreml-lint:\s*noqa\b", re.I)


@dataclass
class ProgramReport:
    """The result of linting one exported method."""

    graph: Graph
    placement: Placement
    findings: list[Finding]
    suppressed: int = 0
    advice: dict[str, Any] = field(default_factory=dict)


def lint_pt2(path: str | Path, config: LintConfig | None = None) -> list[ProgramReport]:
    return [lint_graph(graph, config) for graph in read_pt2(path)]


def lint_graph(
    graph: Graph, config: LintConfig | None = None, *, advise: bool = True
) -> ProgramReport:
    config = config or LintConfig()
    canonical = graph if graph.meta.get("canonical") else canonicalize(graph)
    placement = predict_placement(canonical, config.partitioner)
    ctx = ProgramContext(canonical, placement)
    raw: list[Finding] = []
    for rule in all_rules():
        if not config.is_selected(rule.code, graph.source):
            continue
        ctx.rule = rule
        raw.extend(_checked(rule, ctx, graph))
    findings, suppressed = _suppress(_merge(raw))
    report = ProgramReport(canonical, placement, findings, suppressed)
    if advise:
        report.advice = combined_advice(canonical, config, findings)
    return report


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


def is_suppressed(code: str, line: str | None) -> bool:
    if line is None:
        return False
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    if not codes:
        return True  # a bare noqa comment silences every rule on that line
    return code.upper() in {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def _suppress(findings: list[Finding]) -> tuple[list[Finding], int]:
    kept, suppressed = [], 0
    sources: dict[str, tuple[str, ...] | None] = {}
    for finding in findings:
        loc = finding.location
        if loc is not None and loc.path not in sources:
            sources[loc.path] = _source_lines(loc.path)
        lines = sources[loc.path] if loc else None
        if lines is not None and loc is not None:
            if any(_FILE_NOQA.search(line) for line in lines[:20]):
                suppressed += 1
                continue
            current = lines[loc.line - 1] if 0 < loc.line <= len(lines) else None
            if is_suppressed(finding.code, current):
                suppressed += 1
                continue
        kept.append(finding)
    return kept, suppressed


def combined_advice(graph: Graph, config: LintConfig, findings: list[Finding]) -> dict[str, Any]:
    """Merge every finding's partitioner advice and check it by linting again with it.

    Advice from single findings can conflict (a skip entry may leave an op without a CPU
    kernel), so the merged settings are only offered together with what they leave.
    """
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if not any(f.partitioner for f in errors):
        return {}
    base = config.partitioner
    skip = list(base.skip_ops_for_coreml_delegation)
    target = base.minimum_deployment_target
    mutable, full_graph = base.take_over_mutable_buffer, base.lower_full_graph
    for finding in errors:
        options = finding.partitioner or {}
        skip.extend(options.get("skip_ops_for_coreml_delegation", []))
        target = max(target, options.get("minimum_deployment_target", target))
        mutable = mutable and options.get("take_over_mutable_buffer", True)
        full_graph = full_graph and options.get("lower_full_graph", True)
    advised = replace(
        base,
        skip_ops_for_coreml_delegation=tuple(dict.fromkeys(skip)),
        minimum_deployment_target=target,
        take_over_mutable_buffer=mutable,
        lower_full_graph=full_graph,
    )
    if advised == base:
        return {}
    after = lint_graph(graph, replace(config, partitioner=advised), advise=False)
    remaining = [f for f in after.findings if f.severity is Severity.ERROR]
    return {
        "code": advised.to_code(),
        "errors_before": len(errors),
        "errors_after": len(remaining),
        "remaining": sorted({f.code for f in remaining}),
    }

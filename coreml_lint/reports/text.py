"""Render findings for people: full (default, with the model line), concise, statistics;
and the program-level blocks (placement, combined advice)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from coreml_lint.core.findings import Finding, partitioner_code
from coreml_lint.engine.advice import not_enough_sentence


def where(finding: Finding) -> str:
    loc = finding.location
    if loc is None:
        return finding.file
    return f"{loc.path}:{loc.line}" + (f":{loc.column}" if loc.column else "")


def _headline(finding: Finding) -> str:
    count = f" (x{finding.count})" if finding.count > 1 else ""
    return (
        f"{where(finding)}: {finding.code} [{finding.severity.value}, {finding.outcome.value}] "
        f"{finding.message}{count}"
    )


def render_full(findings: Iterable[Finding]) -> str:
    blocks = []
    for f in findings:
        lines = [_headline(f)]
        if f.location and f.location.source_line:
            width = len(str(f.location.line))
            lines += [
                f"  {' ' * width} |",
                f"  {f.location.line} | {f.location.source_line}",
                f"  {' ' * width} |",
            ]
        if f.node:
            lines.append(f"  = node: {f.node} ({f.op}) in {f.file}")
        if f.fix:
            lines.append(f"  = fix: {f.fix}")
        if f.partitioner:
            unchecked = " (not checked)" if f.extra.get("partitioner_unchecked") else ""
            lines.append(f"  = or partitioner: {partitioner_code(f.partitioner)}{unchecked}")
        elif f.extra.get("partitioner_not_enough"):
            lines.append(f"  = {not_enough_sentence(f.extra['partitioner_not_enough'])}")
        if f.node and f.lower_fixes:
            command = "lower --target coreai" if f.code.startswith("CAI") else "lower"
            lines.append(f"  = or lower: `coreml-lint {command}` answers it in the program")
        if f.extra.get("not_fixed"):
            lines.append(f"  = not fixed: {f.extra['not_fixed']}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_concise(findings: Iterable[Finding]) -> str:
    """One line per finding. A program's finding points to a model source line that
    several programs may share (a prefill and a decode, two exports of one model): its line
    ends with the program it comes from, as the full format's ``= node: ... in`` line says."""
    return "\n".join(_headline(f) + _program_of(f) for f in findings)


def _program_of(finding: Finding) -> str:
    if finding.node is None or finding.location is None or not finding.file:
        return ""
    return f" (in {finding.file})"


def render_statistics(findings: Iterable[Finding]) -> str:
    """One line per rule (ruff's ``--statistics``), errors and warnings counted apart."""
    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    severities: dict[str, Counter[str]] = {}
    for f in findings:
        counts[f.code] += 1
        names[f.code] = f.name
        severities.setdefault(f.code, Counter())[f.severity.value] += 1
    lines = []
    for code, n in counts.most_common():
        split = ", ".join(f"{k} {v}" for k, v in sorted(severities[code].items()))
        lines.append(f"{n:5d}  {code}  {names[code]} ({split})")
    return "\n".join(lines)


def render_advice(source: str, advice: Any) -> str:
    """The combined partitioner advice with its honest counts (and its checked outcome)."""
    lines = [
        f"{source}: partitioner settings that {advice.headline()}, without changing the model:",
        f"    {advice.code}",
    ]
    if advice.checked is not None:
        lines.append(f"    checked with the stock lowering: {advice.checked['outcome']}")
    return "\n".join(lines)


def render_checked_advice(source: str, advice: Any) -> str:
    """The concise form of checked advice: one line, so a run that paid for a lowering
    (``--check-advice``) says what it learned in every text format."""
    return (
        f"{source}: advice {advice.code} would {advice.headline()}; checked with the stock "
        f"lowering: {advice.checked['outcome']}"
    )

"""Render findings: full (default), concise, json, github, sarif; and the placement summary."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from coreml_lint import __version__
from coreml_lint.lint.findings import Finding, partitioner_code

FORMATS = ("full", "concise", "json", "github", "sarif")


def _where(finding: Finding) -> str:
    loc = finding.location
    if loc is None:
        return finding.file
    return f"{loc.path}:{loc.line}" + (f":{loc.column}" if loc.column else "")


def _headline(finding: Finding) -> str:
    count = f" (x{finding.count})" if finding.count > 1 else ""
    return (
        f"{_where(finding)}: {finding.code} [{finding.severity.value}, {finding.outcome.value}] "
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
            lines.append(f"  = or partitioner: {partitioner_code(f.partitioner)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_concise(findings: Iterable[Finding]) -> str:
    return "\n".join(_headline(f) for f in findings)


def render_json(findings: list[Finding], summaries: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "version": __version__,
            "findings": [f.to_json() for f in findings],
            "programs": summaries,
        },
        indent=2,
    )


def _escape_github(text: str, *, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(findings: Iterable[Finding]) -> str:
    out = []
    for f in findings:
        level = {"error": "error", "warning": "warning"}.get(f.severity.value, "notice")
        loc = f.location
        props = [f"file={_escape_github(loc.path if loc else f.file, property_value=True)}"]
        if loc:
            props.append(f"line={loc.line}")
        props.append(f"title={_escape_github(f.code + ' ' + f.name, property_value=True)}")
        message = f.message + (f" Fix: {f.fix}" if f.fix else "")
        out.append(f"::{level} {','.join(props)}::{_escape_github(message)}")
    return "\n".join(out)


def render_sarif(findings: list[Finding], rules: Iterable[Any]) -> str:
    rule_list = list(rules)
    results = []
    for f in findings:
        loc = f.location
        physical: dict[str, Any] = {
            "artifactLocation": {"uri": loc.path if loc else f.file},
        }
        if loc:
            physical["region"] = {"startLine": loc.line}
        results.append(
            {
                "ruleId": f.code,
                "level": {"error": "error", "warning": "warning"}.get(f.severity.value, "note"),
                "message": {"text": f.message},
                "locations": [{"physicalLocation": physical}],
            }
        )
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "coreml-lint",
                        "version": __version__,
                        "rules": [
                            {
                                "id": r.code,
                                "name": r.name,
                                "shortDescription": {"text": r.summary},
                                "fullDescription": {"text": r.documentation()},
                            }
                            for r in rule_list
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2)


def render_statistics(findings: Iterable[Finding]) -> str:
    counts = Counter((f.code, f.name, f.severity.value) for f in findings)
    return "\n".join(
        f"{n:5d}  {code}  [{severity}] {name}" for (code, name, severity), n in counts.most_common()
    )


def render_placement(summary: dict[str, Any], source: str) -> str:
    lines = [
        f"{source} [{summary['method']}] with {summary['settings']}:",
        f"  Core ML: {summary['coreml_node_count']} nodes in "
        f"{len(summary['partitions'])} partition(s); CPU: {summary['cpu_node_count']} nodes",
    ]
    for part in summary["partitions"]:
        lines.append(
            f"  partition {part['id']}: {part['nodes']} nodes, inputs {part['inputs'] or '[]'}, "
            f"outputs {len(part['outputs'])}, states {part['states'] or '[]'}"
        )
    for op, entry in summary["cpu_ops"].items():
        lines.append(f"  cpu  {entry['count']:4d} x {op}: {entry['reason']}")
    for op, count in summary["coreml_ops"].items():
        lines.append(f"  coreml {count:4d} x {op}")
    return "\n".join(lines)

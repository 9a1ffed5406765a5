"""Render findings for machines: json, GitHub annotations, SARIF. Paths inside the project
are shown relative to its root, so annotations attach to the pull request's files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from coreml_lint.core.files import display_path
from coreml_lint.core.findings import Finding
from coreml_lint.core.version import __version__


def relative(findings: Iterable[Finding], root: Path) -> list[Finding]:
    """Copies of ``findings`` whose file and model-source paths are relative to ``root``
    when they lie inside it."""
    out = []
    for f in findings:
        loc = f.location
        if loc is not None:
            loc = replace(loc, path=display_path(loc.path, root))
        out.append(replace(f, file=display_path(f.file, root), location=loc))
    return out


def render_json(findings: list[Finding], programs: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "version": __version__,
            "findings": [f.to_json() for f in findings],
            "programs": programs,
        },
        indent=2,
        default=str,
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
    results = []
    for f in findings:
        loc = f.location
        physical: dict[str, Any] = {"artifactLocation": {"uri": loc.path if loc else f.file}}
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
    driver = {
        "name": "coreml-lint",
        "version": __version__,
        "rules": [
            {
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.documentation()},
            }
            for r in rules
        ],
    }
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    return json.dumps(document, indent=2)

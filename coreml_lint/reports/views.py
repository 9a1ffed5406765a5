"""What each command hands the output formats (``registry.py``): one view per report kind,
the command's results with everything a format may show, so a format decides only how."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.core.findings import Finding


@dataclass
class CheckView:
    """``coreml-lint check``: findings (paths as the project sees them), the linted programs
    ``(file, ProgramReport)``, and the text blocks only the command can compose."""

    findings: list[Finding]
    reports: list[tuple[Path, Any]]
    programs_json: list[dict[str, Any]]
    summary: list[str]
    advice_blocks: list[str]
    show_placement: bool
    errors: list[str] = field(default_factory=list)  # why this run cannot be shown
    target: str = "coreml"  # whose rules ran (``--target``): SARIF lists those rules


@dataclass
class VerifyView:
    """``coreml-lint verify`` (either target): the verify report, the program's lint, the
    report's findings (``found`` as made, ``findings`` relative) and its summary text."""

    program: Path
    report: Any
    lint: Any
    found: list[Finding]
    findings: list[Finding]
    summary: str
    rules: list[Any]
    status: Callable[[], dict[int, dict[str, str]]]  # per partition, for the HTML page


@dataclass
class LowerView:
    """``coreml-lint lower``: the lowering report, the ``.pte`` written, and what the HTML
    page needs to lint the program again (its config, the verify status per partition)."""

    program: Path
    output: Path
    report: Any
    config: Any
    status: Callable[[], dict[int, dict[str, str]] | None]  # per partition, for the HTML page

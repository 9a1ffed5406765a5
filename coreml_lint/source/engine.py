"""Run the rules' source checks over Python files, parsing only files that can match."""

from __future__ import annotations

import ast
import warnings
from functools import cache
from pathlib import Path

from coreml_lint.checks import all_rules
from coreml_lint.checks.base import Rule
from coreml_lint.lint.config import LintConfig
from coreml_lint.lint.engine import is_suppressed
from coreml_lint.lint.errors import InputError
from coreml_lint.lint.findings import Finding
from coreml_lint.source.context import SourceContext

MAX_SOURCE_BYTES = 16 * 1024 * 1024
_FILE_NOQA = "# coreml-lint: noqa"


@cache
def _source_rules() -> tuple[type[Rule], ...]:
    return tuple(r for r in all_rules() if r.source_triggers)


def read_source(path: str | Path) -> str:
    """The file's text, or an InputError naming the file and the problem."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise InputError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes; not linted")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def lint_source(text: str, path: str, config: LintConfig | None = None) -> list[Finding]:
    """Findings of every selected source rule on one file's text."""
    config = config or LintConfig()
    rules = [
        r
        for r in _source_rules()
        if config.is_selected(r.code, path) and any(t in text for t in r.source_triggers)
    ]
    if not rules or ("torch" not in text and "executorch" not in text):
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not ours to tell
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        raise InputError(f"{where}: syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise InputError(f"{path}: cannot parse: {type(exc).__name__}") from None
    ctx = SourceContext(path, text, tree, config=config)
    findings: list[Finding] = []
    for rule in rules:
        ctx.rule = rule
        findings.extend(f for f in rule().check_source(ctx) if config.is_selected(f.code, path))
    if _FILE_NOQA in "\n".join(ctx.lines[:20]):
        return []
    kept = []
    for finding in findings:
        loc = finding.location
        line = ctx.lines[loc.line - 1] if loc and 0 < loc.line <= len(ctx.lines) else None
        if not is_suppressed(finding.code, line):
            kept.append(finding)
    return sorted(kept, key=lambda f: (f.location.line, f.location.column or 0, f.code))


def lint_source_file(path: str | Path, config: LintConfig | None = None) -> list[Finding]:
    return lint_source(read_source(path), str(path), config)

"""Run the rules' source checks over Python files, parsing only files that can match."""

from __future__ import annotations

import ast
import warnings
from functools import cache, partial
from pathlib import Path

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.findings import Finding
from coreml_lint.core.noqa import file_is_exempt, is_suppressed, line_at
from coreml_lint.core.parallel import parallel_map
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules
from coreml_lint.rules.cml001_unparsable_source import unparsable_source
from coreml_lint.source.context import SourceContext

MAX_SOURCE_BYTES = 16 * 1024 * 1024


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
    """Findings of every selected source rule on one file's text. A file that does not
    parse is one finding (CML001), as in ruff: the rest of a run goes on."""
    config = config or LintConfig()
    rules = [
        r
        for r in _source_rules()
        if config.is_selected(r.code, path) and any(t in text for t in r.source_triggers)
    ]
    if not rules or ("torch" not in text and "executorch" not in text):
        return []
    lines = text.splitlines()
    if file_is_exempt(lines):
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not ours to tell
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        unparsable = unparsable_source(text, path, exc)
        return [unparsable] if config.is_selected(unparsable.code, path) else []
    ctx = SourceContext(path, text, tree, config=config)
    findings: list[Finding] = []
    for rule in rules:
        ctx.rule = rule
        findings.extend(f for f in rule().check_source(ctx) if config.is_selected(f.code, path))
    kept = [
        f
        for f in findings
        if not (f.location and is_suppressed(f.code, line_at(ctx.lines, f.location.line)))
    ]
    return sorted(kept, key=lambda f: (f.location.line, f.location.column or 0, f.code))


def lint_source_file(path: str | Path, config: LintConfig | None = None) -> list[Finding]:
    return lint_source(read_source(path), str(path), config)


def lint_file_safely(path: Path, config: LintConfig) -> tuple[list[Finding], str | None]:
    """One file's findings, or the one-line error that kept it from being linted."""
    try:
        return lint_source_file(path, config), None
    except InputError as exc:
        return [], str(exc)
    except Exception as exc:  # one bad file must not stop the run
        return [], f"{path}: internal error: {type(exc).__name__}: {exc}"


def lint_files(paths: list[Path], config: LintConfig) -> list[tuple[list[Finding], str | None]]:
    """Every file's findings (or error), on every core when there are many files."""
    return parallel_map(partial(lint_file_safely, config=config), paths)

"""Run the rules' source checks over Python files, parsing only files that can match."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.findings import Finding
from coreml_lint.core.noqa import FILE_NOQA_LINES, file_is_exempt, is_suppressed, line_at
from coreml_lint.core.parallel import parallel_map
from coreml_lint.program.gcpause import gc_paused
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules
from coreml_lint.rules.cml001_unparsable_source import unparsable_source
from coreml_lint.source.context import SourceContext

MAX_SOURCE_BYTES = 16 * 1024 * 1024


@cache
def _source_rules(target: str = "coreml") -> tuple[type[Rule], ...]:
    return tuple(r for r in all_rules(target) if r.source_triggers)


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


def lint_source(
    text: str, path: str, config: LintConfig | None = None, tree: ast.Module | None = None
) -> list[Finding]:
    """Findings of every selected source rule on one file's text (``tree``: the text
    already parsed, if it was). A file that does not parse is one finding (CML001), as in
    ruff: the rest of a run goes on."""
    # The parse and the walk build millions of small acyclic objects: the cyclic collector
    # stays off until they are freed (it would walk them all, again and again, for nothing).
    with gc_paused():
        return lint_source_context(text, path, config, tree)[0]


def lint_source_context(
    text: str, path: str, config: LintConfig | None = None, tree: ast.Module | None = None
) -> tuple[list[Finding], SourceContext | None]:
    """``lint_source``, and the parsed file its findings came from (None when the file was
    not parsed): the fixer rewrites the calls it already knows instead of parsing again.
    ``tree``: ``text`` already parsed by ``ast`` (the fixer's check of a fixed file).
    Call it with the cyclic collector paused (``gc_paused``) until the context is dropped.

    Every file that mentions torch or executorch is parsed (a model file that does not
    parse is a finding, CML001, as in ruff), and walked and checked only by the rules whose
    triggers (``coreml_lint.source.triggers``) say it can hold their pattern."""
    config = config or LintConfig()
    if "torch" not in text and "executorch" not in text:
        return [], None
    if file_is_exempt(_head_lines(text)):
        return [], None
    selected = _selection(config, path)
    rules_of_target = _source_rules(config.target)
    mentioned = [r for r in rules_of_target if selected(r.code) and _mentions(r, text)]
    rules = [r for r in mentioned if _triggered(r, text)]
    try:
        if tree is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes: not ours
                tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        unparsable = unparsable_source(text, path, exc)
        return ([unparsable] if config.is_selected(unparsable.code, path) else []), None
    if not rules:
        return [], None
    ctx = SourceContext(path, text, tree, config=config)
    findings: list[Finding] = []
    for rule in rules:
        ctx.rule = rule
        findings.extend(f for f in rule().check_source(ctx) if selected(f.code))
    kept = [
        f
        for f in findings
        if not (f.location and is_suppressed(f.code, line_at(ctx.lines, f.location.line)))
    ]
    kept.sort(key=lambda f: (f.location.line, f.location.column or 0, f.code))
    return kept, ctx


def _selection(config: LintConfig, path: str) -> Callable[[str], bool]:
    """``config.is_selected(code, path)``, worked out once per code for this file."""
    known: dict[str, bool] = {}

    def selected(code: str) -> bool:
        if code not in known:
            known[code] = config.is_selected(code, path)
        return known[code]

    return selected


def _mentions(rule: type[Rule], text: str) -> bool:
    """Whether the file contains one of the substrings the rule's triggers are about (a
    trigger object names them in ``substrings``)."""
    return any(
        t in text if isinstance(t, str) else any(s in text for s in t.substrings)
        for t in rule.source_triggers
    )


def _triggered(rule: type[Rule], text: str) -> bool:
    """Whether one of the rule's triggers, a substring or an object with ``search(text)``,
    occurs in the file."""
    return any(t in text if isinstance(t, str) else t.search(text) for t in rule.source_triggers)


def _head_lines(text: str) -> list[str]:
    """The lines ``file_is_exempt`` reads, without splitting the whole file."""
    head = text[:8192].splitlines()
    return head if len(head) > FILE_NOQA_LINES else text.splitlines()


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

"""``export`` in a check run (``coreml-lint check --export``): the declared programs'
findings join the run's program findings, so fixes, output formats and exit codes treat
them as a ``.pt2``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.findings import Finding

if TYPE_CHECKING:
    from coreml_lint.checking.run import CheckRun

NO_PROGRAMS = (
    "--export: no programs declared; add to pyproject.toml's [tool.coreml-lint] "
    'programs = ["models/export.py:make_programs"] or [[tool.coreml-lint.program]] tables'
)


def changed_files(paths: tuple[str, ...]) -> list[Path] | None:
    """The files a commit changes (the hook passes them), or None for "every program":
    no paths, or a folder among them."""
    if not paths or any(Path(p).is_dir() for p in paths):
        return None
    return [Path(p) for p in paths if p.endswith(".py")]


def export_programs(run: CheckRun, paths: tuple[str, ...]) -> list[Finding]:
    """Export (or take from the cache) the programs ``paths`` concern, lint them, and
    record their reports on ``run``."""
    from coreml_lint.exporting.run import run_exports

    if not run.config.programs:
        run.errors.append(NO_PROGRAMS)
        return []
    try:
        done = run_exports(run.config, changed_files(paths))
    except InputError as exc:
        run.errors.append(str(exc))
        return []
    for label, report in done.reports:  # its findings are gathered below, by model line
        run.take_report(Path(label), report)
    run.archives.update({Path(label): path for label, path in done.archives.items()})
    run.export_traced = done.traced
    run.export_summary = _summary(done)
    run.exported_programs = len(done.reports)
    return done.findings


def _summary(done: Any) -> str:
    parts = []
    if done.exported:
        parts.append(f"exported {', '.join(done.exported)}")
    if done.hits:
        parts.append(f"unchanged, from the cache: {', '.join(done.hits)}")
    if done.skipped:
        parts.append(f"not built from the files given: {', '.join(done.skipped)}")
    return "--export: " + ("; ".join(parts) or "nothing to do")


def merged(
    source: list[Finding], program: list[Finding], traced: set[tuple[Path, int]] = frozenset()
) -> list[Finding]:
    """Source findings and program findings, one per (code, file, line): the program's
    finding is kept (the program is the evidence), with the source finding's fix. On a line
    an exported program ran (``traced``), a rule that checks programs is answered by the
    program: its source finding there is dropped when the program has none (the program was
    linted with its own declared ``ios``, the source with the project's)."""
    at_program = {_line_key(f) for f in program} - {None}
    kept, twins = [], {}
    for finding in source:
        key = _line_key(finding)
        if key in at_program:
            twins[key] = finding
        elif key is None or (key[1], key[2]) not in traced or not _checks_programs(key[0]):
            kept.append(finding)
    for finding in program:
        twin = twins.get(_line_key(finding))
        if twin is not None and finding.edit is None:
            finding.edit = twin.edit
    return kept + program


def _checks_programs(code: str) -> bool:
    from coreml_lint.rulekit.rule import Rule
    from coreml_lint.rules import rule_by_code

    rule = rule_by_code(code)
    return rule is not None and rule.check is not Rule.check


def _line_key(finding: Finding) -> tuple[str, Path, int] | None:
    loc = finding.location
    return (finding.code, Path(loc.path).resolve(), loc.line) if loc else None

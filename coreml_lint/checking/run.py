"""One check run: what it read, found, fixed and failed on.

A run reads the programs first, so the model lines their findings point to can be fixed in
the same single pass over each source file as the source rules' own findings. It prints
nothing: what it says as it goes (warnings, notes, ``--measure``'s progress, tracebacks
with ``verbose``) goes to ``say``, and its results stay on the run for the caller to render.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.checking.paths import PROGRAM_SUFFIXES, SOURCE_SUFFIXES, collect_paths
from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.files import project_root
from coreml_lint.core.findings import Finding
from coreml_lint.engine.program import ProgramReport, lint_pt2
from coreml_lint.engine.source import lint_files

NO_FILES = "warning: no .py or .pt2 files found under the given path(s)"


def to_stderr(message: str) -> None:
    """Where a run's words go unless the caller says otherwise: standard error, as the
    command line prints them (looked up at each call, so a captured stream gets them)."""
    print(message, file=sys.stderr)


@dataclass
class CheckRun:
    """One check run (``coreml-lint check``, :func:`coreml_lint.check`): the options, then,
    after :meth:`run`, what it read, found, fixed and failed on."""

    config: LintConfig
    fix: bool = False
    diff: bool = False
    unsafe: bool = False
    verbose: bool = False  # say the traceback of an internal error
    measure: bool = False  # measure what the op table lacks first (``--measure``)
    methods: bool = False  # the .pt2 files given are one program's methods
    export: bool = False  # also lint the declared programs (``checking/export.py``)
    say: Callable[[str], None] = field(default=to_stderr, repr=False)
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reports: list[tuple[Path, ProgramReport]] = field(default_factory=list)
    fix_results: list[Any] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)  # where fixes may write
    export_summary: str | None = None
    exported_programs: int = 0
    archives: dict[Path, Path] = field(default_factory=dict)  # an --export label: its .pt2
    export_traced: set[tuple[Path, int]] = field(default_factory=set)  # lines programs ran

    @property
    def fixing(self) -> bool:
        return self.fix or self.diff

    def run(self, paths: tuple[str, ...]) -> None:
        """Lint (and fix) the files given and found under the folders given."""
        self.files, self.errors = collect_paths(paths)
        if paths and not self.files and not self.errors and not self.export:
            self.say(NO_FILES)
        self.roots = [project_root(), *(Path(p).resolve() for p in paths)]
        if self.measure:
            from coreml_lint.checking.measure import measure_programs

            self.errors += measure_programs(self.files, self.config, self.say)
        program_findings = self._lint_programs(paths)
        sources = [f for f in self.files if f.suffix in SOURCE_SUFFIXES]
        if self.fixing:
            from coreml_lint.checking.fix import fix_sources

            fix_sources(self, sources, program_findings)  # what is left, of both kinds
            of_programs = {id(f) for f in program_findings}
            program_findings = [f for f in self.findings if id(f) in of_programs]
            self.findings = [f for f in self.findings if id(f) not in of_programs]
        else:
            for found, error in lint_files(sources, self.config):
                self.findings.extend(found)
                if error:
                    self.errors.append(error)
        if self.export:  # a source finding and a program finding on one line are one
            from coreml_lint.checking.export import merged

            self.findings = merged(self.findings, program_findings, self.export_traced)
        else:
            self.findings.extend(program_findings)

    def _lint_programs(self, paths: tuple[str, ...] = ()) -> list[Finding]:
        if self.methods:
            return self._lint_methods()
        found: list[Finding] = []
        if self.export:
            from coreml_lint.checking.export import export_programs

            found.extend(export_programs(self, paths))
        for file in self.files:
            if file.suffix not in PROGRAM_SUFFIXES:
                continue
            try:
                reports = lint_pt2(file, self.config)
            except InputError as exc:
                self.errors.append(str(exc))
                continue
            except Exception as exc:  # an internal error must not hide the other files
                if self.verbose:
                    import traceback

                    self.say(traceback.format_exc().rstrip("\n"))
                self.errors.append(f"{file}: internal error: {type(exc).__name__}: {exc}")
                continue
            for report in reports:
                found.extend(self.take_report(file, report))
        return found

    def take_report(self, file: Path, report: ProgramReport) -> list[Finding]:
        """Keep a linted program's report; a rule that raised on it is an error of the run
        (its traceback with ``verbose``). Returns the report's findings."""
        self.reports.append((file, report))
        for failure in report.internal_errors:
            if self.verbose:
                self.say(failure.traceback)
            self.errors.append(failure.describe(str(file)))
        return report.findings

    def _lint_methods(self) -> list[Finding]:
        """``methods``: the ``.pt2`` files given are the methods of one program, lowered
        together (each named after its file, or after its model in a multi-model archive)."""
        from coreml_lint.engine.program import lint_methods
        from coreml_lint.program.methods import read_methods

        programs = [f for f in self.files if f.suffix in PROGRAM_SUFFIXES]
        try:
            graphs = read_methods(programs)
        except InputError as exc:
            self.errors.append(str(exc))
            return []
        found: list[Finding] = []
        owner = {graph.source: Path(graph.source) for graph in graphs}
        for report in lint_methods(graphs, self.config):
            found.extend(self.take_report(owner[report.graph.source], report))
        return found

    def check_advice(self) -> None:
        """Lower each program that has advice with exactly those settings, and record on its
        advice what the stock lowering really does (``--check-advice``; needs torch,
        executorch and coremltools)."""
        try:
            from coreml_lint.lowering.check import lower_with_stock_partitioner
        except ImportError as exc:
            self.errors.append(f"--check-advice needs torch, executorch and coremltools ({exc})")
            return
        for file, report in self.reports:
            if report.advice is not None:
                archive = self.archives.get(file, file)  # --export's programs: its cache
                report.advice.checked = lower_with_stock_partitioner(
                    archive, report.advice.settings
                )
            else:
                self.say(f"note: {file}: no partitioner advice to check (nothing lowered)")

    def exit_code(self, exit_non_zero_on_fix: bool = False) -> int:
        """0 clean, 1 findings (or, with ``--diff``, fixes to make; with
        ``exit_non_zero_on_fix``, fixes made), 2 errors."""
        changed = any(r.changed for r in self.fix_results)
        if self.errors:
            return 2
        if self.findings or (self.diff and changed) or (exit_non_zero_on_fix and changed):
            return 1
        return 0

"""``coreml-lint check`` (the default command): lint ``.pt2`` programs and model sources,
and fix the sources.

A run reads the programs first, so the model lines their findings point to can be fixed
in the same single pass over each source file as the source rules' own findings. Fixes
never write outside the paths given and the project root.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from coreml_lint.cli.options import build_config, settings_changes, settings_options
from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.core.files import is_within, project_root, unwritable
from coreml_lint.core.findings import Finding, Severity
from coreml_lint.engine.program import ProgramReport, lint_pt2
from coreml_lint.engine.source import lint_files
from coreml_lint.reports.registry import FormatChoice

PROGRAM_SUFFIXES = (".pt2",)
SOURCE_SUFFIXES = (".py",)
# Folders never searched when walking a directory (files named explicitly are always linted).
EXCLUDED_DIRS = {
    ".git",
    ".hg",
    ".venv",
    "venv",
    "__pycache__",
    "node_modules",
    "build",
    "dist",
    "site-packages",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".coreml-lint-cache",  # --export's saved programs (coreml_lint/exporting/cache.py)
}


def collect_paths(paths: tuple[str, ...]) -> tuple[list[Path], list[str]]:
    """Files to lint, and one-line errors for paths that do not exist."""
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.suffix in (*PROGRAM_SUFFIXES, *SOURCE_SUFFIXES)
                    and not EXCLUDED_DIRS.intersection(p.relative_to(path).parts[:-1])
                    and p.is_file()
                )
            )
        elif path.exists():
            files.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors


@dataclass
class CheckRun:
    """One ``coreml-lint check`` invocation: what it read, found, fixed and failed on."""

    config: LintConfig
    fix: bool = False
    diff: bool = False
    unsafe: bool = False
    verbose: bool = False
    measure: bool = False  # measure what the op table lacks first (``--measure``)
    methods: bool = False  # the .pt2 files given are one program's methods
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reports: list[tuple[Path, ProgramReport]] = field(default_factory=list)
    fix_results: list[Any] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)  # where fixes may write
    export: bool = False  # --export: lint the declared programs too (cli/export.py)
    export_summary: str | None = None
    exported_programs: int = 0
    archives: dict[Path, Path] = field(default_factory=dict)  # an --export label: its .pt2
    export_traced: set[tuple[Path, int]] = field(default_factory=set)  # lines programs ran

    @property
    def fixing(self) -> bool:
        return self.fix or self.diff

    def run(self, paths: tuple[str, ...]) -> None:
        self.files, self.errors = collect_paths(paths)
        if paths and not self.files and not self.errors and not self.export:
            click.echo("warning: no .py or .pt2 files found under the given path(s)", err=True)
        self.roots = [project_root(), *(Path(p).resolve() for p in paths)]
        if self.measure:
            from coreml_lint.cli.measure import measure_programs

            self.errors += measure_programs(self.files, self.config)
        program_findings = self._lint_programs(paths)
        sources = [f for f in self.files if f.suffix in SOURCE_SUFFIXES]
        if self.fixing:
            self._fix_sources(sources, program_findings)  # what is left, of both kinds
            of_programs = {id(f) for f in program_findings}
            program_findings = [f for f in self.findings if id(f) in of_programs]
            self.findings = [f for f in self.findings if id(f) not in of_programs]
        else:
            for found, error in lint_files(sources, self.config):
                self.findings.extend(found)
                if error:
                    self.errors.append(error)
        if self.export:  # a source finding and a program finding on one line are one
            from coreml_lint.cli.export import merged

            self.findings = merged(self.findings, program_findings, self.export_traced)
        else:
            self.findings.extend(program_findings)

    def _lint_programs(self, paths: tuple[str, ...] = ()) -> list[Finding]:
        if self.methods:
            return self._lint_methods()
        found: list[Finding] = []
        if self.export:
            from coreml_lint.cli.export import export_programs

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

                    traceback.print_exc()
                self.errors.append(f"{file}: internal error: {type(exc).__name__}: {exc}")
                continue
            for report in reports:
                found.extend(self.take_report(file, report))
        return found

    def take_report(self, file: Path, report: ProgramReport) -> list[Finding]:
        """Keep a linted program's report; a rule that raised on it is an error of the run
        (its traceback with ``--verbose``). Returns the report's findings."""
        self.reports.append((file, report))
        for failure in report.internal_errors:
            if self.verbose:
                click.echo(failure.traceback, err=True)
            self.errors.append(failure.describe(str(file)))
        return report.findings

    def _lint_methods(self) -> list[Finding]:
        """``--methods``: the ``.pt2`` files given are the methods of one program, lowered
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

    def _fix_sources(self, sources: list[Path], program_findings: list[Finding]) -> None:
        """Fix every source file once: the ones given (all their findings) and the ones
        program findings point to inside the project (their rules place the fix with what
        the program knows, or the rule's own source check at the finding's line does)."""
        from coreml_lint.fixers.relocate import relocate
        from coreml_lint.fixers.session import FixSession

        for note in relocate(program_findings, self.roots[0]):  # a .pt2 made elsewhere
            echo(note, err=True)
        pointed = self._program_targets(program_findings)
        given = {path.resolve() for path in sources}
        jobs: list[tuple[Path, Any, tuple[Finding, ...]]] = []
        for path in sources:
            lines, guided = pointed.get(path.resolve(), (None, []))
            jobs.append((path, None, tuple(guided)))
        for path, (lines, guided) in pointed.items():
            if path not in given:
                jobs.append((path, lines, tuple(guided)))
        session = FixSession(self.config, unsafe=self.unsafe, write=not self.diff)
        fixed: set[int] = set()
        at_line: set[tuple[Path, str, int]] = set()
        unsafe_at: set[tuple[Path, str, int]] = set()  # a source fix there needs --unsafe-fixes
        for (path, lines, guided), outcome in zip(jobs, session.fix_files(jobs), strict=True):
            if outcome.error:
                self.errors.append(outcome.error)
            unsafe_at.update(
                (path.resolve(), f.code, f.location.line)
                for f in outcome.findings
                if f.edit is not None and not f.edit.safe and f.location is not None
            )
            if outcome.result is not None:
                self.fix_results.append(outcome.result)
                resolved = path.resolve()
                at_line.update((resolved, f.rule, f.line) for f in outcome.result.applied)
            if lines is None:
                self.findings.extend(outcome.findings)
            for finding, state in zip(guided, outcome.guided, strict=False):
                if state == "fixed":
                    fixed.add(id(finding))
                elif state is not None:
                    finding.extra["not_fixed"] = state
        for finding in program_findings:
            done = _all_fixed(finding, fixed, at_line)  # also when --diff: the reason
            if not done and not finding.extra.get("not_fixed"):
                finding.extra["not_fixed"] = unfixed_reason(finding, unsafe_at, self.unsafe)
            if self.diff or not done:
                self.findings.append(finding)

    def _program_targets(
        self, program_findings: list[Finding]
    ) -> dict[Path, tuple[set[tuple[str, int]], list[Finding]]]:
        """Per model file inside the project: the (code, line) pairs program findings point
        to, and those findings."""
        from coreml_lint.rulekit.context import changed_since_export

        pointed: dict[Path, tuple[set[tuple[str, int]], list[Finding]]] = {}
        texts: dict[Path, list[str] | None] = {}
        for finding in program_findings:
            loc = finding.location
            if loc is None or not loc.path.endswith(".py") or not Path(loc.path).is_file():
                continue
            if not is_within(loc.path, self.roots):
                finding.extra["not_fixed"] = "its model source is outside the project"
                continue
            path = Path(loc.path).resolve()
            if path not in texts:
                texts[path] = _read_lines(path)
            stale = changed_since_export(finding, texts[path])
            if stale:  # nothing is guessed on a line that is not the exported code
                finding.extra["not_fixed"] = stale
                continue
            lines, guided = pointed.setdefault(Path(loc.path).resolve(), (set(), []))
            lines.add((finding.code, loc.line))
            guided.extend([finding, *finding.merged])  # each node's modules, placed apart
        return pointed

    def exit_code(self, exit_non_zero_on_fix: bool) -> int:
        changed = any(r.changed for r in self.fix_results)
        if self.errors:
            return 2
        if self.findings or (self.diff and changed) or (exit_non_zero_on_fix and changed):
            return 1
        return 0


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def _all_fixed(finding: Finding, fixed: set[int], at_line: set[tuple[Path, str, int]]) -> bool:
    """Whether the fix reached every node a (merged) program finding stands for: each was
    placed by its rule, or the rule's source check fixed its line. When one was not, the
    finding says why."""
    loc = finding.location
    if loc is not None and (Path(loc.path).resolve(), finding.code, loc.line) in at_line:
        return True
    parts = [finding, *finding.merged]
    missed = [part for part in parts if id(part) not in fixed]
    if missed and "not_fixed" not in finding.extra:
        reason = next((p.extra["not_fixed"] for p in missed if "not_fixed" in p.extra), None)
        if reason is not None:
            finding.extra["not_fixed"] = reason
    return not missed


def unfixed_reason(finding: Finding, unsafe_at: set[tuple[Path, str, int]], unsafe: bool) -> str:
    """Why a program finding that no fix placed is left (every one gets a reason)."""
    from coreml_lint.rules import rule_by_code

    loc = finding.location
    if loc is None:
        return "it points to no model source line"
    if not loc.path.endswith(".py") or not Path(loc.path).is_file():
        return f"its model source {loc.path} is not a Python file on disk"
    if (Path(loc.path).resolve(), finding.code, loc.line) in unsafe_at and not unsafe:
        return "the fix may change numerics: --unsafe-fixes"
    rule = rule_by_code(finding.code)
    if rule is None or not rule.fixes_source():  # flagged in source, maybe, not fixed
        return f"{finding.code} has no source fix: change the model as its fix says"
    return (
        f"the source at line {loc.line} is not the pattern {finding.code}'s source fix "
        "rewrites: change it as the finding's fix says"
    )


def summary_lines(run: CheckRun) -> list[str]:
    """What happened, in one or two lines: fixes made, findings left and why."""
    lines = []
    fixed = sum(len(r.applied) for r in run.fix_results)
    if run.fix and fixed:
        lines.append(f"Fixed {fixed} finding(s) in {len(run.fix_results)} file(s).")
    if run.findings:
        errors = sum(1 for f in run.findings if f.severity is Severity.ERROR)
        where = f"{len(run.files)} file(s)"
        if run.export:
            where += f" and {run.exported_programs} exported program(s)"
        line = f"Found {len(run.findings)} finding(s) ({errors} error(s)) in {where}"
        safe = sum(1 for f in run.findings if f.edit is not None and f.edit.safe)
        unsafe = sum(1 for f in run.findings if f.edit is not None and not f.edit.safe)
        if not run.fixing and (safe or unsafe):
            line += f"; {safe} fixable with --fix" if safe else ""
            line += f"; {unsafe} more with --unsafe-fixes" if unsafe else ""
        elif run.fix and unsafe and not run.unsafe:
            line += f"; {unsafe} left need --unsafe-fixes"
        unplaced = [f for f in run.findings if f.edit is None]
        reasoned = sum(1 for f in unplaced if f.extra.get("not_fixed"))
        if run.fix and reasoned:
            line += f"; {reasoned} not fixed (the reason is under each)"
        if run.fix and len(unplaced) > reasoned:
            line += f"; {len(unplaced) - reasoned} have no source fix (see each finding's fix)"
        lines.append(line + ".")
    elif not run.errors and not (run.fix and fixed and run.reports):
        lines.append("All checks passed!")
    if run.fix and fixed and run.reports:
        lines.append("The .pt2 is the program as exported: export again and lint it to check.")
    return lines


def echo(text: str, *, err: bool = False) -> None:
    if text:
        click.echo(text, err=err)


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def show_diffs(run: CheckRun) -> None:
    """``--diff``: the unified diffs on stdout, the count on stderr, nothing else."""
    for result in run.fix_results:
        click.echo(result.diff(), nl=False)
    would = sum(len(r.applied) for r in run.fix_results)
    echo(f"Would fix {would} finding(s) in {len(run.fix_results)} file(s).", err=True)
    for finding in run.findings:
        reason = finding.extra.get("not_fixed")
        if reason and finding.location is not None:
            where = f"{finding.location.path}:{finding.location.line}"
            echo(f"{where}: {finding.code} not fixed: {reason}", err=True)


def rendered(run: CheckRun, output_format: str, statistics: bool, show_placement: bool) -> str:
    """The run's results in ``output_format`` (paths as the project sees them); a format that
    cannot show this run says why in ``run.errors``."""
    from coreml_lint.reports import registry, text
    from coreml_lint.reports.machine import relative
    from coreml_lint.reports.views import CheckView

    root = project_root()
    findings = relative(run.findings, root)
    if statistics:
        return text.render_statistics(findings)
    view = CheckView(
        findings=findings,
        reports=run.reports,
        programs_json=program_json(run, root),
        summary=summary_lines(run),
        advice_blocks=[advice_block(run, file, report) for file, report in run.reports],
        show_placement=show_placement,
        errors=run.errors,
        target=run.config.target,
    )
    return registry.render(output_format, "check", view)


def advice_block(run: CheckRun, file: Path, report: ProgramReport) -> str:
    """A program's combined partitioner advice, unless ``--fix`` fixed every error it was
    about in the source: the advice is for the program as exported, and after a source fix
    the next export is a different program (lint that one)."""
    from coreml_lint.reports import text

    if report.advice is None:
        return ""
    left = {id(f) for f in run.findings}
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    fixed = [f for f in errors if id(f) not in left]
    if run.fix and fixed and len(fixed) == len(errors):
        return ""
    block = "\n" + text.render_advice(str(file), report.advice)
    if run.fix and fixed:
        block += (
            f"\n    (for {file.name} as exported; {len(fixed)} of its error(s) were fixed in "
            "the source: export again and lint the new program)"
        )
    return block


def program_json(run: CheckRun, root: Path) -> list[dict[str, Any]]:
    """Per linted method: its placement summary and its combined advice."""
    from coreml_lint.core.files import display_path

    programs = []
    for file, report in run.reports:
        summary = report.placement.summary()
        summary["source"] = display_path(str(file), root)
        summary["advice"] = report.advice.to_json() if report.advice else None
        programs.append(summary)
    return programs


@click.command("check")
@click.argument("paths", nargs=-1)
@click.option("--output-format", type=FormatChoice("check"), default="full", show_default=True)
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to FILE instead of stdout (e.g. the html page).",
)
@click.option("--select", multiple=True, help="Codes or prefixes to enable (ALL, CML1, CML305).")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of findings.")
@click.option("--show-placement", is_flag=True, help="Print the predicted Core ML / CPU placement.")
@click.option(
    "--methods",
    is_flag=True,
    help="The .pt2 files given are the methods of one program, lowered together "
    "(prefill.pt2 decode.pt2): also check what they do together.",
)
@settings_options
@click.option(
    "--check-advice",
    is_flag=True,
    help="Lower each program with the advised settings (stock partitioner) and report the "
    "real outcome (needs torch, executorch, coremltools).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="pyproject.toml to read [tool.coreml-lint] from (default: the nearest one).",
)
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--fix", is_flag=True, help="Apply safe fixes to model source files.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change numerics.")
@click.option("--diff", is_flag=True, help="Print the fixes as unified diffs; write nothing.")
@click.option(
    "--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied (for CI)."
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show tracebacks of internal errors (and, with --check-advice, the libraries' own "
    "warnings and progress bars).",
)
@click.option(
    "--measure",
    is_flag=True,
    help="Measure, as the sweep does, every Core ML node whose key the op table lacks (needs "
    "torch, executorch, coremltools); cached per stack version in ~/.cache/coreml-lint.",
)
@click.option(
    "--export",
    is_flag=True,
    help="Export the programs declared in [tool.coreml-lint] (cached by content) and lint "
    "them too; with PATHS, only those built from the files given (needs torch).",
)
@click.option(
    "--target-coremltools",
    metavar="VERSION",
    help="The coremltools version you lower with, when not the installed one (CML801 uses "
    "the op-behaviour table measured on it, and says when none was).",
)
@click.option(
    "--target-executorch",
    metavar="VERSION",
    help="The executorch version you lower with, when not the installed one.",
)
@click.option(
    "--target",
    "backend",
    type=click.Choice(("coreml", "coreai")),
    default="coreml",
    show_default=True,
    help="Whose pitfalls to find: Core ML through ExecuTorch (CMLnnn), or Core AI (CAInnn).",
)
def check_command(paths: tuple[str, ...], **options: Any) -> None:
    """Lint exported programs (.pt2) and model sources (.py), files or folders."""
    if not paths and not options["export"]:
        fail("give a file or folder to lint (or --export for the declared programs)")
    from coreml_lint.program.behaviour import declare_versions

    declare_versions(
        coremltools=options.pop("target_coremltools"), executorch=options.pop("target_executorch")
    )
    problem = unwritable(options["output_path"]) if options["output_path"] else None
    if problem:
        fail(problem)
    if options["check_advice"]:
        _refuse_silent_check(options)
        _refuse_without_heavy_install("--check-advice")
    settings = settings_changes(options)
    try:
        config = build_config(
            options["config_path"],
            options["isolated"],
            options["select"],
            options["ignore"],
            settings,
        )
    except InputError as exc:
        fail(str(exc))
        return
    config = _with_backend(config, options.pop("backend"), options, settings)
    run = CheckRun(
        config,
        fix=options["fix"],
        diff=options["diff"],
        unsafe=options["unsafe_fixes"],
        verbose=options["verbose"],
        measure=options["measure"],
        methods=options["methods"],
        export=options["export"],
    )
    run.run(paths)
    if options["check_advice"]:
        check_advice(run)
    if run.diff:
        show_diffs(run)
    else:
        body = rendered(
            run, options["output_format"], options["statistics"], options["show_placement"]
        )
        if options["output_path"] and body:
            from coreml_lint.core.files import write_atomically

            write_atomically(options["output_path"], body + "\n", keep_mode=False)
        else:
            echo(body)
    for message in run.errors:
        click.echo(f"error: {message}", err=True)
    if run.export_summary:
        click.echo(run.export_summary, err=True)
    _version_note(run)
    sys.exit(run.exit_code(options["exit_non_zero_on_fix"]))


def _with_backend(config: Any, backend: str, options: dict[str, Any], settings: Any) -> Any:
    """``--target coreai``: Core AI's rules instead of Core ML's; what only Core ML has
    (partitioner settings, advice, the op table) is refused in one line."""
    if backend == "coreml":
        return config
    from dataclasses import replace

    core_ml_only = [f"--{k.replace('_', '-')}" for k in ("check_advice", "measure") if options[k]]
    core_ml_only += list(settings)
    if core_ml_only:
        fail(f"{', '.join(core_ml_only)}: Core ML only, not with --target coreai")
    return replace(config, target="coreai")


def _refuse_silent_check(options: dict[str, Any]) -> None:
    """``--check-advice`` pays for a lowering: refuse, before paying, an output that would
    not show what it found (a format says whether it shows it: ``reports/registry.py``)."""
    from coreml_lint.reports.registry import advice_names

    showing = advice_names()
    silent = (
        "--statistics"
        if options["statistics"]
        else "--diff"
        if options["diff"]
        else options["output_format"]
        if options["output_format"] not in showing
        else None
    )
    if silent:
        listed = ", ".join(showing[:-1]) + f" and {showing[-1]}" if len(showing) > 1 else showing[0]
        fail(f"--check-advice reports in the {listed} formats, not {silent}")


def _refuse_without_heavy_install(flag: str) -> None:
    """A flag that lowers needs the heavy install: say so in one line, before linting (a
    missing package is not the outcome of a lowering)."""
    from coreml_lint.cli.heavy import HEAVY, INSTALL_HINT, heavy_modules_missing

    missing = heavy_modules_missing()
    if missing:
        fail(f"{flag} needs {HEAVY} ({missing} not installed): {INSTALL_HINT}")


def _version_note(run: CheckRun) -> None:
    """Say when the measured op behaviour is of other versions than the ones targeted."""
    from coreml_lint.program.behaviour import version_note

    note = version_note() if run.reports and run.config.is_selected("CML801") else None
    if note:
        click.echo(f"note: {note}", err=True)


def check_advice(run: CheckRun) -> None:
    """Lower each program that has advice with exactly those settings, and record what the
    stock lowering really does (``--check-advice``)."""
    from coreml_lint.cli.heavy import quiet_libraries

    quiet_libraries(run.verbose)  # before they are imported: their import speaks too
    try:
        from coreml_lint.lowering.check import lower_with_stock_partitioner
    except ImportError as exc:
        run.errors.append(f"--check-advice needs torch, executorch and coremltools ({exc})")
        return
    for file, report in run.reports:
        if report.advice is not None:
            archive = run.archives.get(file, file)  # --export's programs are in its cache
            report.advice.checked = lower_with_stock_partitioner(archive, report.advice.settings)
        else:
            click.echo(f"note: {file}: no partitioner advice to check (nothing lowered)", err=True)

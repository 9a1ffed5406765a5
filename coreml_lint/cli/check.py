"""``coreml-lint check`` (the default command): lint ``.pt2`` programs and model sources,
and fix the sources.

This module parses the options and prints; the run itself (lint, fix, ``--export``,
``--measure``, ``--check-advice``) is ``coreml_lint/checking/run.py``'s ``CheckRun``, the same
one the Python API runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from coreml_lint.checking.run import CheckRun
from coreml_lint.cli.options import build_config, settings_changes, settings_options
from coreml_lint.core.errors import InputError
from coreml_lint.core.files import project_root, unwritable
from coreml_lint.core.findings import Severity
from coreml_lint.engine.program import ProgramReport
from coreml_lint.reports.registry import FormatChoice


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
    """Per linted method: its placement summary and its combined advice (Core ML's: for
    ``--target coreai``, which has neither partitions nor partitioner settings, only the
    method and the target)."""
    from coreml_lint.core.files import display_path

    programs = []
    for file, report in run.reports:
        source = display_path(str(file), root)
        if report.config.target != "coreml":
            programs.append({"method": report.graph.method, "target": report.config.target})
            programs[-1]["source"] = source
            continue
        summary = report.placement.summary()
        summary["source"] = source
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
    from coreml_lint.measured.versions import declare_versions

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
        say=_say,
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
    from coreml_lint.measured.versions import version_note

    note = version_note() if run.reports and run.config.is_selected("CML801") else None
    if note:
        click.echo(f"note: {note}", err=True)


def check_advice(run: CheckRun) -> None:
    """``--check-advice``: the run lowers each program with its advice; the command quiets
    the libraries' own output first (a library user keeps their logging as it is)."""
    from coreml_lint.cli.heavy import quiet_libraries

    quiet_libraries(run.verbose)  # before they are imported: their import speaks too
    run.check_advice()


def _say(message: str) -> None:
    """What the run says as it goes: a line on standard error."""
    click.echo(message, err=True)

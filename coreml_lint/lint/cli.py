"""The ``coreml-lint`` command line, with the conventions users know from ruff.

Exit codes: 0 clean, 1 findings, 2 usage error / unreadable input / internal error (one
line each, no traceback unless ``--verbose``).
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from coreml_lint import __version__
from coreml_lint.checks import all_rules, rule_by_code
from coreml_lint.fixers.session import FixSession
from coreml_lint.lint.config import LintConfig, find_pyproject, load_config
from coreml_lint.lint.errors import InputError
from coreml_lint.lint.findings import Finding

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
}


class _DefaultToCheck(click.Group):
    """``coreml-lint PATH`` means ``coreml-lint check PATH``, as ``ruff PATH`` once did."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="coreml-lint")
def main_group() -> None:
    """Find what crashes or silently mislowers in ExecuTorch's Core ML backend."""


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


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


@main_group.command("check")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--output-format",
    type=click.Choice(["full", "concise", "json", "github", "sarif"]),
    default="full",
    show_default=True,
)
@click.option("--select", multiple=True, help="Codes or prefixes to enable (ALL, CML1, CML305).")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of findings.")
@click.option("--show-placement", is_flag=True, help="Print the predicted Core ML / CPU placement.")
@click.option("--ios", type=click.IntRange(15, 18), help="minimum_deployment_target (iOS major).")
@click.option("--skip-op", "skip_ops", multiple=True, help="skip_ops_for_coreml_delegation entry.")
@click.option("--take-over-mutable-buffer/--no-take-over-mutable-buffer", default=None)
@click.option("--take-over-constant-data/--no-take-over-constant-data", default=None)
@click.option("--lower-full-graph/--no-lower-full-graph", default=None)
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
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors.")
def check_command(
    paths: tuple[str, ...],
    output_format: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    statistics: bool,
    show_placement: bool,
    ios: int | None,
    skip_ops: tuple[str, ...],
    take_over_mutable_buffer: bool | None,
    take_over_constant_data: bool | None,
    lower_full_graph: bool | None,
    config_path: Path | None,
    isolated: bool,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    exit_non_zero_on_fix: bool,
    verbose: bool,
) -> None:
    """Lint exported programs (.pt2) and model sources (.py), files or folders."""
    from coreml_lint.lint.engine import lint_pt2
    from coreml_lint.lint.reports import (
        render_concise,
        render_full,
        render_github,
        render_json,
        render_placement,
        render_sarif,
        render_statistics,
    )

    try:
        config = _config(
            config_path,
            isolated,
            select,
            ignore,
            ios,
            skip_ops,
            take_over_mutable_buffer,
            take_over_constant_data,
            lower_full_graph,
        )
    except InputError as exc:
        _fail(str(exc))
    files, errors = collect_paths(paths)
    findings: list[Finding] = []
    summaries: list[dict[str, Any]] = []
    advice_lines: list[str] = []
    fixer = FixSession(config, apply=fix or diff, unsafe=unsafe_fixes, write=not diff)
    findings.extend(fixer.source_files([f for f in files if f.suffix in SOURCE_SUFFIXES]))
    for file in files:
        if file.suffix in SOURCE_SUFFIXES:
            continue
        try:
            reports = lint_pt2(file, config)
        except InputError as exc:
            errors.append(str(exc))
            continue
        except Exception as exc:  # an internal error must not hide the other files' results
            if verbose:
                traceback.print_exc()
            errors.append(f"{file}: internal error: {type(exc).__name__}: {exc}")
            continue
        for report in reports:
            findings.extend(fixer.program_findings(report.findings))
            summary = report.placement.summary()
            summary["source"] = str(file)
            summaries.append(summary)
            if show_placement and output_format in ("full", "concise"):
                click.echo(render_placement(summary, str(file)))
            if report.advice:
                advice_lines.append(_advice_text(str(file), report.advice))

    errors.extend(fixer.errors)
    if diff:
        for result in fixer.results:
            click.echo(result.diff(), nl=False)
    if diff:
        text = ""  # --diff shows what --fix would change, nothing else
    elif statistics:
        text = render_statistics(findings)
    elif output_format == "json":
        text = render_json(findings, summaries)
    elif output_format == "github":
        text = render_github(findings)
    elif output_format == "sarif":
        text = render_sarif(findings, all_rules())
    elif output_format == "concise":
        text = render_concise(findings)
    else:
        text = render_full(findings)
    if text:
        click.echo(text)
    if diff:
        would = sum(len(r.applied) for r in fixer.results)
        click.echo(f"Would fix {would} finding(s) in {len(fixer.results)} file(s).", err=True)
    elif output_format in ("full", "concise") and not statistics:
        for line in advice_lines:
            click.echo(line)
        fixed = sum(len(r.applied) for r in fixer.results)
        if fixed and not diff:
            click.echo(f"Fixed {fixed} finding(s) in {len(fixer.results)} file(s).")
        if findings:
            n_errors = sum(1 for f in findings if f.severity.value == "error")
            fixable = sum(1 for f in findings if f.extra.get("edit") is not None)
            hint = ""
            if fixable and not (fix or diff):
                hint = f" {fixable} fixable with --fix (some need --unsafe-fixes)."
            click.echo(
                f"Found {len(findings)} finding(s) ({n_errors} error(s)) in {len(files)} file(s)."
                + hint
            )
        elif not errors:
            click.echo("All checks passed!")
    for message in errors:
        click.echo(f"error: {message}", err=True)
    changed = any(r.changed for r in fixer.results)
    if errors:
        sys.exit(2)
    if findings or (diff and changed) or (exit_non_zero_on_fix and changed):
        sys.exit(1)
    sys.exit(0)


def _advice_text(source: str, advice: dict[str, Any]) -> str:
    tail = (
        "avoids every error"
        if not advice["remaining"]
        else f"leaves {advice['errors_after']} error(s): {', '.join(advice['remaining'])}"
    )
    return (
        f"\n{source}: partitioner settings that avoid {advice['errors_before']} error(s) "
        f"without changing the model ({tail}):\n    {advice['code']}"
    )


def _config(
    config_path: Path | None,
    isolated: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    ios: int | None,
    skip_ops: tuple[str, ...],
    take_over_mutable_buffer: bool | None,
    take_over_constant_data: bool | None,
    lower_full_graph: bool | None,
) -> LintConfig:
    config = LintConfig() if isolated else load_config(config_path or find_pyproject(Path.cwd()))
    if select:
        config = replace(config, select=_split(select))
    if ignore:
        config = replace(config, ignore=(*config.ignore, *_split(ignore)))
    changes: dict[str, Any] = {}
    if ios is not None:
        changes["minimum_deployment_target"] = ios
    if skip_ops:
        changes["skip_ops_for_coreml_delegation"] = _split(skip_ops)
    for key, value in (
        ("take_over_mutable_buffer", take_over_mutable_buffer),
        ("take_over_constant_data", take_over_constant_data),
        ("lower_full_graph", lower_full_graph),
    ):
        if value is not None:
            changes[key] = value
    if changes:
        config = config.with_partitioner(**changes)
    _check_codes(config)
    return config


def _check_codes(config: LintConfig) -> None:
    codes = [r.code for r in all_rules()]
    for selector in (*config.select, *config.ignore):
        s = selector.upper()
        if s != "ALL" and not any(code.startswith(s) for code in codes):
            raise InputError(f"unknown rule selector {selector!r} (see `coreml-lint rules`)")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@main_group.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Print a rule's documentation."""
    rule = rule_by_code(code)
    if rule is None:
        _fail(f"unknown rule {code!r} (see `coreml-lint rules`)")
    assert rule is not None
    click.echo(f"# {rule.code} {rule.name} [{rule.severity.value}, {rule.outcome.value}]\n")
    click.echo(rule.documentation().strip())
    click.echo(f"\nApplies to: {rule.applies_to}")


@main_group.command("rules")
def rules_command() -> None:
    """List every rule."""
    for rule in all_rules():
        click.echo(f"{rule.code}  {rule.name:28} [{rule.severity.value}] {rule.summary}")


def main(argv: list[str] | None = None) -> int:
    try:
        main_group.main(args=argv, prog_name="coreml-lint", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 2
    except Exception as exc:  # never a traceback for users; --verbose shows it
        if "-v" in (argv or sys.argv) or "--verbose" in (argv or sys.argv):
            traceback.print_exc()
        click.echo(f"error: internal error: {type(exc).__name__}: {exc}", err=True)
        return 2
    return 0


@main_group.command("lower")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--ios", type=click.IntRange(15, 18), help="minimum_deployment_target (iOS major).")
@click.option("--skip-op", "skip_ops", multiple=True, help="skip_ops_for_coreml_delegation entry.")
@click.option("--take-over-mutable-buffer/--no-take-over-mutable-buffer", default=True)
@click.option("--take-over-constant-data/--no-take-over-constant-data", default=True)
@click.option("--lower-full-graph", is_flag=True)
@click.option("--compute-precision", type=click.Choice(["float16", "float32"]), default="float16")
@click.option(
    "--compute-units",
    type=click.Choice(["all", "cpu_only", "cpu_and_gpu", "cpu_and_ne"]),
    default="all",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def lower_command(
    program: Path,
    output: Path,
    ios: int | None,
    skip_ops: tuple[str, ...],
    take_over_mutable_buffer: bool,
    take_over_constant_data: bool,
    lower_full_graph: bool,
    compute_precision: str,
    compute_units: str,
    as_json: bool,
    quiet: bool,
) -> None:
    """Lower a .pt2 to a .pte with the fixes applied, and prove the result."""
    import json
    import logging
    import os
    import time
    import warnings

    # The libraries below log warnings (some with tracebacks) and progress bars of their own;
    # this command reports in its own words.
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.disable(logging.CRITICAL)
    warnings.filterwarnings("ignore")

    from coreml_lint.lowering.cli_support import load_program, render_report, write_pte

    start = time.perf_counter()

    def progress(message: str) -> None:
        if not quiet:
            click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    try:
        progress(f"loading {program}")
        exported = load_program(program)
        from coreml_lint.lowering.run import LoweringError, lower

        try:
            result = lower(
                exported,
                minimum_deployment_target=ios,
                skip_ops_for_coreml_delegation=list(_split(skip_ops)),
                take_over_mutable_buffer=take_over_mutable_buffer,
                take_over_constant_data=take_over_constant_data,
                lower_full_graph=lower_full_graph,
                compute_precision=compute_precision,
                compute_units=compute_units,
                progress=progress,
            )
        except LoweringError as exc:
            _fail(f"{program}: {exc}")
        progress(f"writing {output}")
        write_pte(output, result.buffer)
    except InputError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(result.report.to_json(), indent=2, default=str))
    else:
        click.echo(render_report(result.report, str(output)))
    sys.exit(1 if result.report.mil_problems else 0)

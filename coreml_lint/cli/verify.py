"""``coreml-lint verify``: run every Core ML partition's MIL on Linux against eager."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from coreml_lint.cli.check import echo, fail
from coreml_lint.cli.heavy import (
    HEAVY,
    INSTALL_HINT,
    damaged_archive,
    heavy_modules_missing,
    partition_status,
    quiet_libraries,
)
from coreml_lint.cli.options import (
    build_config,
    import_option,
    settings_changes,
    settings_options,
)
from coreml_lint.core.errors import InputError
from coreml_lint.core.files import unwritable
from coreml_lint.reports.registry import FormatChoice

TARGETS = ("coreml", "coreai")


@click.command("verify")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@settings_options
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="torch.save of a tuple of the program's inputs (loaded with weights_only=True); "
    "default: the program's own example inputs saved in the .pt2, else seeded random "
    "inputs shaped like the program's.",
)
@click.option("--output-format", type=FormatChoice("verify"), default="full", show_default=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to FILE.",
)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default="coreml",
    show_default=True,
    help="coreai: convert the whole program with coreai-torch, run it on Core AI's runtime "
    "and compare with eager (needs the coreai extra; partitioner settings do not apply).",
)
@import_option
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show the traceback of a failure, and the libraries' own warnings and progress bars.",
)
def verify_command(program: Path, **options: Any) -> None:
    """Lower PROGRAM with the stock CoreMLPartitioner and check every Core ML partition's
    MIL against eager (exit 0: all agree, 1: a divergence or a lowering crash, 2: could
    not run)."""
    target = options.pop("target")
    missing = heavy_modules_missing() if target == "coreml" else None
    if missing:
        fail(f"`coreml-lint verify` needs {HEAVY} ({missing} not installed): {INSTALL_HINT}")
    damaged = damaged_archive((program,))
    if damaged:
        fail(damaged)  # before anything is read with torch, lowered or written
    changes = settings_changes(options)
    if target == "coreai" and changes:
        fail(f"partitioner settings ({', '.join(changes)}) apply to Core ML, not --target coreai")
    try:
        config = build_config(options["config_path"], options["isolated"], settings=changes)
    except InputError as exc:
        fail(str(exc))
        return
    problem = unwritable(options["output"]) if options["output"] else None
    if problem:
        fail(problem)  # before a lowering that may take minutes
    quiet_libraries(options["verbose"])
    start = time.perf_counter()

    def progress(message: str) -> None:
        if not options["quiet"]:
            click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    if target == "coreai":  # the whole program on Core AI (cli/verify_coreai.py)
        from dataclasses import replace

        from coreml_lint.cli.verify_coreai import run_coreai

        config = replace(config, target="coreai")
        report, lint, found = run_coreai(program, config, options, progress)
        _render(program, report, lint, options, found)
        sys.exit(report.exit_code)
    report, lint = _run(program, config, options, progress)
    _render(program, report, lint, options)
    code = report.exit_code
    if options["inputs_path"] is None and options["output_format"] in ("full", "concise"):
        code = max(code, _other_sizes(program, config, options, progress))
    sys.exit(code)


def _other_sizes(program: Path, config: Any, options: dict[str, Any], progress: Any) -> int:
    """A dynamic program verified again with every dynamic dim at the smallest and at the
    largest size its constraints allow (``verifier/sizes.py``); the worst exit code."""
    from coreml_lint.lowering.files import load_program
    from coreml_lint.verifier import verify
    from coreml_lint.verifier.sizes import describe, edge_inputs, is_dynamic

    exported = load_program(program, options["imports"])
    if not is_dynamic(exported):
        return 0
    sizes, notes = edge_inputs(exported)
    for note in notes:
        echo(f"note: {note}")
    code = 0
    for label, inputs in sizes.items():
        progress(f"verifying at the {label} sizes the constraints allow ({describe(inputs)})")
        report = verify(
            load_program(program, options["imports"]),
            settings=config.partitioner,
            inputs=tuple(inputs),
            progress=progress,
        )
        echo(f"at the {label} sizes ({describe(inputs)}): {report.summary()}")
        code = max(code, report.exit_code)
    return code


def _run(program: Path, config: Any, options: dict[str, Any], progress: Any) -> tuple[Any, Any]:
    from coreml_lint.engine.program import lint_pt2
    from coreml_lint.lowering.files import load_program
    from coreml_lint.verifier import verify

    try:
        (lint,) = lint_pt2(program, config)[:1]
        progress(f"loading {program}")
        exported = load_program(program, options["imports"])
    except InputError as exc:
        fail(str(exc))
    explain = rule_for_edge_node(lint.findings)
    settings = config.partitioner
    report = verify(
        exported,
        settings=settings,
        inputs=options["inputs_path"],
        progress=progress,
        explain=explain,
    )
    explain_by_line(report, lint.findings)
    return report, lint


def explain_by_line(report: Any, findings: list[Any]) -> None:
    """A divergence no rule flagged by op is explained by a finding at its model source
    line (an add that a wrong fill on the same line feeds), or one whose wrong value shows
    there (an -inf mask filled on one line, whose NaN rows come out of the attention on
    the next): an error, or a warning that predicts a silent wrong value
    (:func:`value_explanations`). Never a finding merely upstream of it: verify locates the
    first op that departs, so what comes before it agrees with eager."""
    from coreml_lint.core.findings import rules_by_line, value_explanations

    by_line = rules_by_line(value_explanations(findings))
    for divergence in report.divergences:
        path, _, line = (divergence.source or "").rpartition(":")
        if divergence.rule is None and line.isdigit():
            divergence.rule = by_line.get((path, int(line)))


def rule_for_edge_node(findings: list[Any]) -> Any:
    """``explain`` for verify: the lint rule that flagged a node of the diverging node's op.
    The edge graph names a node after its op (``aten_gelu_default``, ``aten_gelu_default_1``),
    the linter after the exported program (``gelu``), so they meet at the op."""
    import re

    by_op: dict[str, str] = {}
    for finding in findings:
        if finding.op:
            by_op.setdefault(finding.op.replace(".", "_"), finding.code)
    return lambda name: by_op.get(re.sub(r"_\d+$", "", name))


def _render(
    program: Path, report: Any, lint: Any, options: dict[str, Any], found: Any = None
) -> None:
    """``found``: the report's findings when they are not Core ML's (``--target coreai``)."""
    from coreml_lint.core.files import project_root, write_atomically
    from coreml_lint.reports import machine, registry
    from coreml_lint.reports.views import VerifyView
    from coreml_lint.rules import all_rules
    from coreml_lint.verifier.findings import findings_of

    found = findings_of(report, str(program), lint.findings) if found is None else found
    view = VerifyView(
        program=program,
        report=report,
        lint=lint,
        found=found,
        findings=machine.relative(found, project_root()),
        summary=_summary(report),
        rules=list(all_rules(report.settings.get("target", "coreml"))),
        status=lambda: partition_status(report),
    )
    body = registry.render(options["output_format"], "verify", view)
    if options["output"]:
        write_atomically(options["output"], body + "\n", keep_mode=False)
    else:
        echo(body)


def _summary(report: Any) -> str:
    if report.settings.get("target") == "coreai":
        from coreml_lint.verifier.coreai import summary

        return summary(report)
    return report.summary()

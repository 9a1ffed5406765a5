"""``coreml-lint migrate``: the migration view of one program (``verifier/migration.py``):
Core ML at each deployment target and Core AI, side by side, each really run."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from coreml_lint.cli.check import echo, fail
from coreml_lint.cli.heavy import HEAVY, INSTALL_HINT, heavy_modules_missing, quiet_libraries
from coreml_lint.cli.options import import_option
from coreml_lint.core.errors import InputError
from coreml_lint.core.settings import SUPPORTED_IOS
from coreml_lint.reports.registry import FormatChoice


@click.command("migrate")
@click.argument("program", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--ios",
    "targets",
    multiple=True,
    type=click.IntRange(min(SUPPORTED_IOS), max(SUPPORTED_IOS)),
    help="Core ML deployment targets to show (repeatable; default: 15 to 18).",
)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="torch.save of a tuple of the program's inputs (default: its own example inputs).",
)
@click.option("--output-format", type=FormatChoice("migrate"), default="full")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@import_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def migrate_command(program: Path, **options: Any) -> None:
    """What Core ML (iOS15-iOS18, stock CoreMLPartitioner) and Core AI each really do with
    PROGRAM: crashes, wrong values, what runs where (exit 0: every target runs it correctly,
    1: one does not)."""
    from coreml_lint.coreai_stack import coreai_missing
    from coreml_lint.lowering.files import load_program
    from coreml_lint.verifier.migration import migrate

    missing = heavy_modules_missing() or coreai_missing()
    if missing:
        fail(
            f"`coreml-lint migrate` needs {HEAVY} and Core AI ({missing} not installed): "
            f'{INSTALL_HINT} and pip install "coreml-lint[coreai]"'
        )
    quiet_libraries()
    start = time.perf_counter()

    def progress(message: str) -> None:
        if not options["quiet"]:
            click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    try:
        load_program(program, options["imports"])  # a bad archive: one line, before any run
    except InputError as exc:
        fail(str(exc))
    view = migrate(
        lambda: load_program(program, options["imports"]),
        str(program),
        inputs=options["inputs_path"],
        targets=tuple(sorted(set(options["targets"]))) or SUPPORTED_IOS,
        progress=progress,
    )
    from coreml_lint.reports.registry import render

    body = render(options["output_format"], "migrate", view)
    if options["output"]:
        from coreml_lint.core.files import write_atomically

        write_atomically(options["output"], body + "\n", keep_mode=False)
    else:
        echo(body)
    failing = [c for c in view.columns if c.status != "agree"]
    sys.exit(1 if failing else 0)

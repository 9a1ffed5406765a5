"""``coreml-lint lower --target coreai``: the program, with the Core AI rules' rewrites, as
a Core AI asset (``.aimodel`` folder), written only when it runs on Linux's Core AI runtime
and agrees with eager (``lowering/coreai.py``). ``lower`` parses the options; this module
refuses the ones that are Core ML's, runs the lowering and renders its report.

Exit codes: 0 written and verified, 1 refused (a finding no rule answers, a conversion
crash, wrong values, or a run that could not be judged: nothing written), 2 bad input.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from coreml_lint.cli.check import fail

INSTALL_HINT = 'pip install "coreml-lint[coreai]" "torch==2.13.0" (Python 3.11 or newer)'
FORMATS = ("full", "json")
# lower's options that set up Core ML's lowering (the partitioner settings are checked apart)
COREML_ONLY = ("compute_precision", "compute_units", "dequantize_on_cpu", "report_path")


def lower_coreai_command(
    programs: tuple[Path, ...], output: Path, options: dict[str, Any], fmt: str, changes: Any
) -> NoReturn:
    """Refuse what does not apply, lower, print the report, exit 0 (written) or 1."""
    from coreml_lint.cli.heavy import damaged_archive, quiet_libraries
    from coreml_lint.core.files import unwritable
    from coreml_lint.coreai_stack import coreai_missing

    _refuse_coreml_options(programs, options, fmt, changes)
    missing = coreai_missing()
    if missing:
        fail(f"`coreml-lint lower --target coreai` needs {missing}: {INSTALL_HINT}")
    damaged = damaged_archive(programs)
    if damaged:
        fail(damaged)
    problem = unwritable(output) or _not_an_asset(output)
    if problem:
        fail(problem)  # before a conversion that may take a while
    quiet_libraries(options["verbose"])
    start = time.perf_counter()

    def progress(message: str) -> None:
        if not options["quiet"]:
            click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    report = _run(programs[0], output, options, progress)
    from coreml_lint.reports import registry
    from coreml_lint.reports.views import LowerView

    view = LowerView(programs[0], output, report, None, lambda: None)
    click.echo(registry.render(fmt, "lower", view))
    sys.exit(report.exit_code)


def _refuse_coreml_options(
    programs: tuple[Path, ...], options: dict[str, Any], fmt: str, changes: Any
) -> None:
    if len(programs) > 1:
        fail("--target coreai lowers one program (one .pt2 holding one program)")
    given = [name for name in COREML_ONLY if _given(name, options)]
    if changes or given:
        names = [*changes, *(f"--{n.replace('_path', '').replace('_', '-')}" for n in given)]
        fail(f"{', '.join(names)} apply to Core ML, not --target coreai")
    if fmt not in FORMATS:
        fail(f"--output-format {fmt} is not supported with --target coreai (use full or json)")


def _given(name: str, options: dict[str, Any]) -> bool:
    """Whether the user gave the option (not its default)."""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT) and options.get(name) not in (None, False)


def _not_an_asset(output: Path) -> str | None:
    """An existing ``output`` is replaced only when it is a Core AI asset folder."""
    if output.exists() and not (output.is_dir() and (output / "metadata.json").is_file()):
        return f"{output}: exists and is not a Core AI asset (.aimodel folder): not replaced"
    return None


def _run(program: Path, output: Path, options: dict[str, Any], progress: Any) -> Any:
    from coreml_lint.core.errors import InputError
    from coreml_lint.lowering.coreai import lower_coreai
    from coreml_lint.lowering.files import load_program

    try:
        progress(f"loading {program}")
        exported = load_program(program, options["imports"])
        inputs = _given_inputs(exported, options["inputs_path"])
        return lower_coreai(exported, output, inputs=inputs, progress=progress)
    except InputError as exc:
        fail(str(exc))


def _given_inputs(exported: Any, path: Path | None) -> Any:
    """``--inputs`` read and checked against the program before anything is converted."""
    if path is None:
        return None
    from coreml_lint.verifier.inputs import check_given_inputs, load_inputs

    try:
        given = list(load_inputs(path))
        check_given_inputs(exported, given)
    except ValueError as exc:
        fail(f"--inputs: {exc}")
    return tuple(given)

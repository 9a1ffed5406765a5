"""``coreml-lint lower``: a ``.pt2`` to a ``.pte`` with every rule's lowering answer applied."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from coreml_lint.cli.check import fail
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


@click.command("lower")
@click.argument(
    "programs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="The .pte to write (--target coreai: the .aimodel folder).",
)
@click.option(
    "--target",
    type=click.Choice(("coreml", "coreai")),
    default="coreml",
    show_default=True,
    help="coreai: convert with coreai-torch, with the Core AI rules' rewrites, and write the "
    ".aimodel only when it runs on Core AI's runtime and agrees with eager (needs the coreai "
    "extra; partitioner settings do not apply).",
)
@settings_options
@click.option("--compute-precision", type=click.Choice(["float16", "float32"]), default="float16")
@click.option(
    "--compute-units",
    type=click.Choice(["all", "cpu_only", "cpu_and_gpu", "cpu_and_ne"]),
    default="all",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="pyproject.toml to read [tool.coreml-lint] settings from (default: the nearest one).",
)
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option(
    "--verify",
    "verify_result",
    is_flag=True,
    help="Run every Core ML delegate of the result on Linux against its eager module.",
)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="torch.save of a tuple of the program's inputs, for --verify (weights_only); "
    "default: the program's own example inputs saved in the .pt2, as verify takes them.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write an HTML page of the lowering: what was rewritten, refused and delegated.",
)
@click.option(
    "--dequantize-on-cpu",
    is_flag=True,
    help="Where the target cannot keep quantized weights quantized, dequantize them on the "
    "CPU (ExecuTorch kernels; Core ML then computes with float weights).",
)
@import_option
@click.option(
    "--output-format",
    type=FormatChoice("lower"),
    help="How to print the report (default: full; --json is --output-format json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show the traceback of a failure, and the libraries' own warnings and progress bars.",
)
def lower_command(programs: tuple[Path, ...], output: Path, **options: Any) -> None:
    """Lower a .pt2 to a .pte with the fixes applied, and prove the result.

    Several .pt2 (prefill.pt2 decode.pt2), or one holding several programs, are the methods
    of one program: they are lowered together into one .pte (one method per file, named
    after it), the Core ML delegates sharing their weights."""
    program = programs[0]
    fmt = _output_format(options)
    if options.pop("target") == "coreai":  # cli/lower_coreai.py: the Core AI asset
        from coreml_lint.cli.lower_coreai import lower_coreai_command

        lower_coreai_command(programs, output, options, fmt, settings_changes(options))
    if output.is_dir():
        fail(f"{output}: is a folder (give the .pte file to write)")
    missing = heavy_modules_missing()
    if missing:
        fail(f"`coreml-lint lower` needs {HEAVY} ({missing} not installed): {INSTALL_HINT}")
    damaged = damaged_archive(programs)
    if damaged:
        fail(damaged)  # before anything is read with torch, lowered or written
    several = _several_methods(programs)
    settings = settings_changes(options)
    try:
        config = build_config(options["config_path"], options["isolated"], settings=settings)
    except InputError as exc:
        fail(str(exc))
        return
    for target in (output, options["report_path"]):
        problem = unwritable(target) if target else None
        if problem:
            fail(problem)  # before a lowering that may take minutes
    quiet_libraries(options["verbose"])
    start = time.perf_counter()

    def progress(message: str) -> None:
        if not options["quiet"]:
            click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    if several:
        for flag in ("inputs_path", "report_path", "dequantize_on_cpu"):
            if options[flag]:
                fail(
                    f"--{flag.replace('_result', '').replace('_path', '').replace('_', '-')} "
                    "is not supported with several methods yet"
                )
        if fmt == "html":  # the page is one program's (as --report)
            fail("--output-format html is not supported with several methods yet")
        result = _lower_methods(programs, output, config.partitioner, options, progress)
    else:
        result = _lower(program, output, config.partitioner, options, progress)
    _print_report(program, output, config, result.report, fmt, options["report_path"])
    report = result.report
    verdict = report.verify.exit_code if report.verify is not None else 0
    if verdict == 2:  # --verify could not judge the result: say so in the exit code too
        sys.exit(2)
    sys.exit(1 if report.mil_problems or report.findings_after or verdict == 1 else 0)


def _several_methods(programs: tuple[Path, ...]) -> bool:
    """Whether the programs given are the methods of one program (several files, or one
    archive holding several programs)."""
    if len(programs) > 1:
        return True
    from coreml_lint.program.pt2 import read_pt2

    try:
        return len(read_pt2(programs[0])) > 1
    except InputError as exc:
        fail(str(exc))
    return False


def _lower_methods(
    programs: tuple[Path, ...], output: Path, settings: Any, options: dict[str, Any], progress: Any
) -> Any:
    from coreml_lint.lowering.files import load_methods
    from coreml_lint.lowering.methods import lower_methods

    def run() -> Any:
        progress(f"loading {len(programs)} file(s) as one program's methods")
        exported = load_methods(list(programs), options["imports"])
        return lower_methods(exported, **_lowering_options(settings, options, progress))

    return _lowered(", ".join(map(str, programs)), output, options, progress, run)


def _lowering_options(settings: Any, options: dict[str, Any], progress: Any) -> dict[str, Any]:
    """What every ``lower`` call takes from the command line."""
    return {
        "settings": settings,
        "compute_precision": options["compute_precision"],
        "compute_units": options["compute_units"],
        "progress": progress,
        "verify": options["verify_result"],
    }


def _lowered(label: str, output: Path, options: dict[str, Any], progress: Any, run: Any) -> Any:
    """``run()`` (load and lower), then the ``.pte`` written; a failure is one line."""
    from coreml_lint.lowering.files import write_pte
    from coreml_lint.lowering.run import LoweringError

    try:
        result = run()
        progress(f"writing {output}")
        write_pte(output, result.buffer)
        return result
    except LoweringError as exc:
        if options["verbose"]:
            import traceback

            traceback.print_exception(exc.__cause__ or exc)
        fail(f"{label}: {exc}")
    except InputError as exc:
        fail(str(exc))
    raise AssertionError("unreachable")


def _output_format(options: dict[str, Any]) -> str:
    """``--output-format``, or ``--json`` (its older spelling); both disagreeing is refused."""
    fmt, as_json = options.pop("output_format"), options.pop("as_json")
    if as_json and fmt not in (None, "json"):
        fail(f"--json and --output-format {fmt}: give one")
    return "json" if as_json else fmt or "full"


def _print_report(
    program: Path, output: Path, config: Any, report: Any, fmt: str, page: Path | None
) -> None:
    """The report in ``fmt`` on stdout, and ``--report``'s HTML page of the lowering (the
    program as linted, with what lower did to it)."""
    from coreml_lint.core.files import write_atomically
    from coreml_lint.reports import registry
    from coreml_lint.reports.views import LowerView

    view = LowerView(
        program=program,
        output=output,
        report=report,
        config=config,
        status=lambda: partition_status(report.verify) if report.verify is not None else None,
    )
    if page:
        write_atomically(page, registry.render("html", "lower", view) + "\n", keep_mode=False)
    click.echo(registry.render(fmt, "lower", view))


def _given_inputs(exported: Any, options: dict[str, Any]) -> Any:
    """``--inputs`` read and checked against the program before anything is lowered: a
    file that cannot feed it is one line, not a verify that could not run afterwards."""
    if not options["inputs_path"]:
        return None
    from coreml_lint.verifier.inputs import check_given_inputs, load_inputs

    try:
        given = list(load_inputs(options["inputs_path"]))
        check_given_inputs(exported, given)
    except ValueError as exc:
        fail(f"--inputs: {exc}")
    return tuple(given)


def _lower(
    program: Path, output: Path, settings: Any, options: dict[str, Any], progress: Any
) -> Any:
    from coreml_lint.lowering.files import load_program
    from coreml_lint.lowering.run import lower

    def run() -> Any:
        progress(f"loading {program}")
        exported = load_program(program, options["imports"])
        return lower(
            exported,
            **_lowering_options(settings, options, progress),
            verify_inputs=_given_inputs(exported, options),
            dequantize_on_cpu=options["dequantize_on_cpu"],
        )

    return _lowered(str(program), output, options, progress, run)

"""coreml-lint: find what crashes or silently mislowers in ExecuTorch's Core ML backend.

The public Python API:

- :func:`lint_program` lints an in-memory ``torch.export.ExportedProgram`` (needs torch);
- :func:`lint_pt2` lints a ``.pt2`` archive without importing torch;
- :func:`check` runs what ``coreml-lint check`` runs over files and folders (lint, and
  optionally fix, export the declared programs, measure), and returns the run;
- :func:`lower` lowers to an ExecuTorch program with every fix applied (needs torch,
  executorch, coremltools);
- :func:`verify` lowers with the stock partitioner and runs every Core ML partition's MIL
  on Linux against its eager module (needs the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coreml_lint.core.version import __version__

if TYPE_CHECKING:
    from collections.abc import Iterable
    from os import PathLike

    from coreml_lint.checking.run import CheckRun
    from coreml_lint.core.config import LintConfig
    from coreml_lint.engine.program import ProgramReport


def lint_program(exported_program: Any, config: Any = None, **partitioner: Any) -> ProgramReport:
    """Lint an ``ExportedProgram``; keyword arguments are ``CoreMLPartitioner`` settings."""
    from coreml_lint.engine.exported import lint_exported_program

    return lint_exported_program(exported_program, config, **partitioner)


def lower(exported_program: Any, **settings: Any) -> Any:
    """Lower with the fixes applied; use instead of ``to_edge_transform_and_lower(ep,
    partitioner=[CoreMLPartitioner(...)]).to_executorch()``. Keyword arguments are the
    partitioner's settings (see :func:`coreml_lint.lowering.run.lower`)."""
    from coreml_lint.lowering.run import lower as _lower

    return _lower(exported_program, **settings)


def verify(exported_program: Any, **settings: Any) -> Any:
    """Check every Core ML partition of the stock lowering against eager; keyword
    arguments are the partitioner's settings plus ``inputs``, ``progress``, ``explain``
    (see :func:`coreml_lint.verifier.verify`). Lowering consumes the program."""
    from coreml_lint.verifier import verify as _verify

    return _verify(exported_program, **settings)


def lint_pt2(path: Any, config: Any = None) -> list[ProgramReport]:
    """Lint every method of a ``.pt2`` archive (torch-free)."""
    from coreml_lint.engine.program import lint_pt2 as _lint_pt2

    return _lint_pt2(path, config)


def check(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    config: LintConfig | None = None,
    **options: Any,
) -> CheckRun:
    """Run ``coreml-lint check`` on files and folders (a path or a list of them), without its
    argument parsing and printing: the returned run holds ``findings``, ``errors``,
    ``reports``, ``fix_results`` and ``exit_code()``. ``config`` is a ``LintConfig`` (default:
    every rule, stock settings); keyword arguments are the run's options (``fix``, ``diff``,
    ``unsafe``, ``methods``, ``export``, ``measure``, ``verbose``, and ``say``, a callable
    for the lines it says as it goes, standard error by default). torch-free unless
    ``export`` or ``measure`` needs it."""
    import os

    from coreml_lint.checking.run import CheckRun
    from coreml_lint.core.config import LintConfig

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    run = CheckRun(config if config is not None else LintConfig(), **options)
    run.run(tuple(os.fspath(p) for p in given))
    return run


__all__ = ["__version__", "check", "lint_program", "lint_pt2", "lower", "verify"]

"""coreml-lint: find what crashes or silently mislowers in ExecuTorch's Core ML backend.

The public Python API:

- :func:`lint_program` lints an in-memory ``torch.export.ExportedProgram`` (needs torch);
- :func:`lint_pt2` lints a ``.pt2`` archive without importing torch;
- :func:`lower` lowers to an ExecuTorch program with every fix applied (needs torch,
  executorch, coremltools);
- :func:`verify` lowers with the stock partitioner and runs every Core ML partition's MIL
  on Linux against its eager module (needs the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coreml_lint.core.version import __version__

if TYPE_CHECKING:
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


__all__ = ["__version__", "lint_program", "lint_pt2", "lower", "verify"]

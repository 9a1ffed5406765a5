"""CML002 export-failed: a declared program that ``torch.export`` (or building it) refused.

What it does
    ``coreml-lint --export`` (and the ``coreml-lint-export`` pre-commit hook) builds the
    programs a project declares in ``[tool.coreml-lint]`` and exports them with
    ``torch.export.export``. When that fails, the failure is one finding: torch.export's own
    message, at the innermost line of the project's code the error came through (the
    model's ``forward``, the factory or the module file), instead of a traceback.

Why it breaks
    A program that does not export is never lowered: nothing of it reaches Core ML, and no
    other rule can look at it. The finding must not read as "clean".

Example
    ``if x.sum() > 0:`` in ``forward`` (control flow on a tensor's value) fails with
    torch.export's data-dependent-guard error; the finding points at that line.

Fix
    Follow torch.export's message: ``torch.cond`` for value-dependent branches, a
    ``dynamic-shapes`` entry that matches the model, or inputs the model accepts.

References
    None: the finding is about the input program, not the stack.
"""

from __future__ import annotations

from coreml_lint.core.findings import Finding, Location, Outcome
from coreml_lint.rulekit.rule import Rule


class ExportFailed(Rule):
    code = "CML002"
    name = "export-failed"
    outcome = Outcome.NOT_LINTED
    summary = "a declared program that torch.export refused: nothing of it is linted"
    cannot_lower = "a program that does not export is not a program; there is nothing to lower"


def export_failed(
    program: str, stage: str, error: str, location: Location | None, file: str
) -> Finding:
    """The finding for ``program`` whose ``stage`` (building, exporting) raised ``error``
    (``ExceptionType: first lines of its message``)."""
    return ExportFailed.make_finding(
        f"{program}: {stage} failed: {error}",
        file=file,
        location=location,
        fix="follow torch.export's message at this line, then run `coreml-lint --export` again",
    )

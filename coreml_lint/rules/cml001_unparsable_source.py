"""CML001 unparsable-source: a model source file that does not parse, so nothing in it is linted.

What it does
    Reports a Python file that the running interpreter cannot parse, as one finding at the
    line of the error; every other file of the run is still linted (as ruff does). When the
    file parses with a newer Python grammar (libcst knows the grammars up to Python 3.14),
    the finding says so: the file is fine for the Python it was written for, and
    coreml-lint needs to run on that Python to lint it.

Why it breaks
    Nothing breaks at lowering, but a file that is not linted has no findings, which must not
    read as "clean".

Example
    ``def f[T](x): ...`` (Python 3.12 syntax) linted with coreml-lint running on Python 3.11.

Fix
    Fix the syntax error, or run coreml-lint with the Python version the file is written for.

References
    None: the finding is about the input file, not the stack.
"""

from __future__ import annotations

import sys

from coreml_lint.core.findings import Finding, Location, Outcome, Severity
from coreml_lint.rulekit.rule import Rule


class UnparsableSource(Rule):
    code = "CML001"
    name = "unparsable-source"
    outcome = Outcome.NOT_LINTED
    other_severities = (Severity.WARNING,)
    summary = "model source that does not parse: nothing in it is linted"
    cannot_lower = "a source file that does not parse is not a program; there is nothing to lower"


def unparsable_source(text: str, path: str, error: BaseException) -> Finding:
    """The finding for ``text`` that ``ast.parse`` refused with ``error``."""
    line = getattr(error, "lineno", None) or 1
    column = getattr(error, "offset", None)
    detail = getattr(error, "msg", None) or type(error).__name__
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    newer = _parses_with_newer_grammar(text)
    if newer:
        message = (
            f"uses syntax newer than Python {running}, which runs coreml-lint ({detail}): "
            "not linted"
        )
        fix = "run coreml-lint with the Python version this file is written for"
    else:
        message = f"syntax error: {detail}: not linted"
        fix = "fix the syntax error"
    lines = text.splitlines()
    source_line = lines[line - 1].strip() if 0 < line <= len(lines) else None
    return UnparsableSource.make_finding(
        message,
        severity=Severity.WARNING if newer else Severity.ERROR,
        file=path,
        location=Location(path, line, column, source_line),
        fix=fix,
    )


def _parses_with_newer_grammar(text: str) -> bool:
    import libcst

    try:
        libcst.parse_module(text)
    except Exception:
        return False
    return True

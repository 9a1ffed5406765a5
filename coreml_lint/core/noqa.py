"""Suppression comments, read the same way for model sources and for ``.pt2`` findings.

``# noqa`` or ``# noqa: CML305, CML301`` on a line silences findings on that line (ruff's
syntax, case-insensitive); ``# coreml-lint: noqa`` in the first lines of a file silences
the whole file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"#\s*coreml-lint:\s*noqa\b", re.I)
FILE_NOQA_LINES = 20  # how far into a file the file-level comment is looked for


def is_suppressed(code: str, line: str | None) -> bool:
    """Whether ``line`` carries a noqa comment that covers ``code``."""
    if line is None:
        return False
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    if not codes:
        return True  # a bare noqa comment silences every rule on that line
    return code.upper() in {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def file_is_exempt(lines: Sequence[str]) -> bool:
    """Whether the file opts out of coreml-lint as a whole."""
    return any(_FILE_NOQA.search(line) for line in lines[:FILE_NOQA_LINES])


def line_at(lines: Sequence[str], number: int) -> str | None:
    """The 1-based line ``number``, or None when the file is shorter."""
    return lines[number - 1] if 0 < number <= len(lines) else None

"""What the commands that need the heavy install (``lower``, ``verify``) share: the check that
it is there, quieting its libraries, and ``verify``'s verdict per partition for the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.core.version import HEAVY_INSTALL

HEAVY = "torch, executorch and coremltools"
INSTALL_HINT = HEAVY_INSTALL


def quiet_libraries(verbose: bool = False) -> None:
    """The libraries below log warnings (some with tracebacks), version complaints and
    progress bars of their own; a command that imports them (``lower``, ``verify``,
    ``--check-advice``) reports in its own words. ``--verbose`` lets them speak."""
    import logging
    import os
    import warnings

    if verbose:
        return
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.disable(logging.CRITICAL)
    warnings.filterwarnings("ignore")


def damaged_archive(programs: tuple[Path, ...] | list[Path]) -> str | None:
    """Why one of the ``.pt2`` a command is about to load cannot be trusted (not an archive,
    or a member failing its CRC check), or None. ``lower`` and ``verify`` ask first: a
    damaged archive loads without complaint and lowers its damaged weights."""
    from coreml_lint.core.errors import InputError
    from coreml_lint.program.pt2 import check_integrity

    for program in programs:
        try:
            check_integrity(program)
        except InputError as exc:
            return str(exc)
    return None


def heavy_modules_missing() -> str | None:
    import importlib.util

    missing = [m for m in ("torch", "executorch", "coremltools") if not importlib.util.find_spec(m)]
    return ", ".join(missing) or None


def partition_status(report: Any) -> dict[int, dict[str, str]]:
    """Per partition: agrees / diverges / not verified, for the HTML page."""
    words = {"agree": "agrees", "diverge": "diverges"}
    status = {}
    for part in report.partitions:
        detail = "; ".join(
            f"{name}: {result.status}"
            for name, result in (
                ("float32", part.semantic),
                ("float16", part.float16),
                ("interface", part.interface),
            )
        )
        status[part.index] = {"status": words.get(part.status, "not verified"), "detail": detail}
    return status

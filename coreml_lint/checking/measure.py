"""``measure`` in a check run (``check --measure``): before linting, measure the Core ML
nodes of each program whose key the shipped op table lacks (``sweep/ondemand.py``), then let
CML801 answer from them. Progress goes to the run's ``say``, each line as ``measure: ...``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from coreml_lint.checking.paths import PROGRAM_SUFFIXES
from coreml_lint.core.config import LintConfig
from coreml_lint.core.version import HEAVY_INSTALL
from coreml_lint.measured.stack import cache_folder
from coreml_lint.measured.table import use_local_measurements
from coreml_lint.measured.versions import active_table
from coreml_lint.program.canonical import canonicalize
from coreml_lint.program.placement import predict_placement
from coreml_lint.program.pt2 import read_pt2


def measure_programs(
    files: list[Path], config: LintConfig, say: Callable[[str], None]
) -> list[str]:
    """Measure what the table lacks in every program file; the errors to report (one line
    each). Nothing heavy is imported when every wanted key is cached."""
    from coreml_lint.sweep.ondemand import wanted

    if not any(f.suffix in PROGRAM_SUFFIXES for f in files):
        return []  # model sources: nothing to measure
    table = active_table()
    if table is None:
        return ["--measure: no op table ships with this install"]
    found = []
    for file in files:
        if file.suffix not in PROGRAM_SUFFIXES:
            continue
        try:
            for graph in read_pt2(file):
                canonical = canonicalize(graph)
                placement = predict_placement(canonical, config.partitioner)
                found += wanted(canonical, placement, table)
        except Exception:  # an unreadable program: the lint itself reports it, in one line
            continue
    use_local_measurements(True)
    return _measure(found, lambda message: say(f"measure: {message}"))


def _measure(found: list, say: Callable[[str], None]) -> list[str]:
    from coreml_lint.sweep.ondemand import cached_ids, measure_wanted, quiet

    todo = [w for w in found if "why" not in w.case and w.case["id"] not in cached_ids()]
    if todo:
        try:
            with quiet():
                import coremltools  # noqa: F401
                import executorch  # noqa: F401
                import torch  # noqa: F401
        except ImportError as exc:
            return [f"--measure needs torch, executorch and coremltools ({exc}): {HEAVY_INSTALL}"]
    summary = measure_wanted(found, say)
    use_local_measurements(True)  # read the table afresh
    outcomes = [r["outcome"] for _, r in summary.measured]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in sorted(set(outcomes)))
    say(
        f"{len(found)} key(s) the op table has not measured: {len(summary.measured)} measured "
        f"now{f' ({counts})' if counts else ''}, {summary.cached} cached in {cache_folder()}"
        + (f", {len(summary.unmeasurable)} not measurable" if summary.unmeasurable else "")
        + (
            f"; {len(summary.elsewhere)} measured under another key than the node's (not used)"
            if summary.elsewhere
            else ""
        )
    )
    return []

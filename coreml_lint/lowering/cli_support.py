"""Loading, writing and reporting for ``coreml-lint lower``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.lint.errors import InputError


def load_program(path: Path) -> Any:
    """``torch.export.load``, after the light reader has vetted the archive."""
    import torch

    from coreml_lint.program.pt2 import read_pt2

    read_pt2(path)  # one clear line for a corrupt or foreign archive, before torch sees it
    # Custom-op libraries that exported programs commonly reference; torch.export.load needs
    # them registered before it can deserialize their nodes.
    import torch.ao.quantization.fx._decomposed

    try:
        return torch.export.load(path)
    except Exception as exc:
        raise InputError(f"{path}: torch.export.load failed: {type(exc).__name__}: {exc}") from None


def write_pte(path: Path, data: bytes) -> None:
    """Write the program in one rename: a failed run leaves no partial .pte."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render_report(report: Any, output: str) -> str:
    lines = [f"wrote {output}"]
    lines.append(
        f"  Core ML: {report.partitions_after} delegate(s), {report.coreml_ops_after} edge op(s) "
        f"(the stock partitioner: {report.partitions_before} partition(s), "
        f"{report.coreml_ops_before} op(s), with {len(report.findings_before)} finding(s))"
    )
    for change in report.rewrites:
        lines.append(f"  rewritten  {change}")
    for change in report.rejected_rewrites:
        lines.append(f"  rejected   {change}")
    for node, why in sorted(report.refused.items()):
        lines.append(f"  cpu        {node}: {why}")
    for buffer, why in sorted(report.returned_buffers.items()):
        lines.append(f"  executorch {buffer}: {why}")
    for key, value in report.settings.items():
        lines.append(f"  setting    {key} = {value}")
    if report.cpu_ops_after:
        lines.append(f"  CPU ops: {', '.join(sorted(set(report.cpu_ops_after)))}")
    for problem in report.mil_problems:
        lines.append(f"  MIL PROBLEM {problem}")
    for finding in report.findings_after:
        lines.append(f"  unresolved {finding.code}: {finding.message}")
    if report.suggestions:
        lines.append("  to keep more on Core ML, change the model source:")
        lines.extend(f"    {s}" for s in report.suggestions)
    return "\n".join(lines)

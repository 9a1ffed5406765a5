"""``--check-advice``: lower a program with the stock ``CoreMLPartitioner`` and exactly the
advised settings, through ``to_executorch()``, and say what really happened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.lowering.files import load_program


def lower_with_stock_partitioner(path: Path, settings: PartitionerSettings) -> dict[str, Any]:
    """``{"outcome": "lowers to a .pte"}``, or the stage and first line of the failure."""
    from coreml_lint.stack import lower_stock

    try:
        program = load_program(path)
    except Exception as exc:  # reported as the outcome, as a lowering failure is
        return _failed("torch.export.load", exc)
    lowering = lower_stock(program, settings)
    if lowering.error is not None:
        return _failed(lowering.stage, lowering.error)
    return {"outcome": "lowers to a .pte", "lowers": True}


def _failed(stage: str, exc: BaseException) -> dict[str, Any]:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return {"outcome": f"fails in {stage}: {type(exc).__name__}: {first}", "lowers": False}

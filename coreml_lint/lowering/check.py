"""``--check-advice``: lower a program with the stock ``CoreMLPartitioner`` and exactly the
advised settings, through ``to_executorch()``, and say what really happened."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.lowering.files import load_program


def stock_partitioner(settings: PartitionerSettings) -> Any:
    """The stock ``CoreMLPartitioner`` with ``settings``, as a user would write it."""
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    ios = settings.minimum_deployment_target
    specs = (
        CoreMLBackend.generate_compile_specs(
            minimum_deployment_target=getattr(ct.target, f"iOS{ios}")
        )
        if ios != 15
        else None
    )
    return CoreMLPartitioner(compile_specs=specs, **settings.partitioner_kwargs())


def lower_with_stock_partitioner(path: Path, settings: PartitionerSettings) -> dict[str, Any]:
    """``{"outcome": "lowers to a .pte"}``, or the stage and first line of the failure."""
    from executorch.exir import to_edge_transform_and_lower

    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    stage = "torch.export.load"
    try:
        program = load_program(path)
        stage = "to_edge_transform_and_lower"
        edge = to_edge_transform_and_lower(program, partitioner=[stock_partitioner(settings)])
        stage = "to_executorch"
        edge.to_executorch()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return {"outcome": f"fails in {stage}: {type(exc).__name__}: {first}", "lowers": False}
    finally:
        logging.disable(level)
    return {"outcome": "lowers to a .pte", "lowers": True}

"""The stock ``CoreMLPartitioner`` and its compile specs, built from ``PartitionerSettings``
exactly as a user would write them."""

from __future__ import annotations

from typing import Any

from coreml_lint.core.settings import DEFAULT_IOS, PartitionerSettings


def compile_specs(
    settings: PartitionerSettings,
    *,
    precision: str | None = None,
    units: str | None = None,
) -> list[Any] | None:
    """``CoreMLBackend.generate_compile_specs`` for ``settings``' target (and a compute
    precision / unit when given). None when everything is the backend's default, so the
    stock partitioner is built with no specs at all, as most users build it."""
    if settings.minimum_deployment_target == DEFAULT_IOS and precision is None and units is None:
        return None
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    ios = settings.minimum_deployment_target
    chosen: dict[str, Any] = {
        "minimum_deployment_target": getattr(ct.target, f"iOS{ios}") if ios != DEFAULT_IOS else None
    }
    if precision is not None:
        chosen["compute_precision"] = getattr(ct.precision, precision.upper())
    if units is not None:
        chosen["compute_unit"] = getattr(ct.ComputeUnit, units.upper())
    return CoreMLBackend.generate_compile_specs(**chosen)


def stock_partitioner(settings: PartitionerSettings | None = None) -> Any:
    """The stock ``CoreMLPartitioner`` with ``settings`` (the defaults when None)."""
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    settings = settings or PartitionerSettings()
    return CoreMLPartitioner(compile_specs=compile_specs(settings), **settings.partitioner_kwargs())

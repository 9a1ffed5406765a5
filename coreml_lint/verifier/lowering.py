"""Lowering with the stock ``CoreMLPartitioner`` (capturing each delegate's MlModel), and the
float32 conversion of a partition for the semantic pass.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.lowering.mil import capture_models

capture_mlmodels = capture_models  # the one wrapper of CoreMLBackend._convert_to_mlmodel


@dataclass
class Lowering:
    """The result of the stock lowering: a crash is a result, not an exception."""

    edge: Any = None  # EdgeProgramManager
    program: Any = None  # ExecutorchProgramManager
    mlmodels: list[Any] = field(default_factory=list)  # in conversion (= partition) order
    error: BaseException | None = None
    stage: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if self.error else ""


def partitioner(**settings: Any) -> Any:
    """The stock ``CoreMLPartitioner`` with these settings (``PartitionerSettings`` fields;
    None for a default)."""
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.check import stock_partitioner

    chosen = {k: v for k, v in settings.items() if v is not None}
    return stock_partitioner(PartitionerSettings().changed(**chosen))


def lower_stock(ep: Any, **settings: Any) -> Lowering:
    """``to_edge_transform_and_lower`` + ``to_executorch`` with the stock partitioner."""
    from executorch.exir import to_edge_transform_and_lower

    result = Lowering()
    logging.disable(logging.WARNING)
    try:
        with capture_models(result.mlmodels):
            start = time.perf_counter()
            try:
                result.edge = to_edge_transform_and_lower(ep, partitioner=[partitioner(**settings)])
            except Exception as exc:
                result.error, result.stage = exc, "to_edge_transform_and_lower"
                return result
            finally:
                result.timings["lower"] = time.perf_counter() - start
            start = time.perf_counter()
            try:
                result.program = result.edge.to_executorch()
            except Exception as exc:
                result.error, result.stage = exc, "to_executorch"
            finally:
                result.timings["to_executorch"] = time.perf_counter() - start
        return result
    finally:
        logging.disable(logging.NOTSET)


def convert_float32(original_module: Any, compile_specs: list[Any]) -> Any:
    """The partition converted as ``CoreMLBackend`` converts it, but at FLOAT32 compute
    precision, and kept as an in-memory MIL program (no proto, no weight files)."""
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.compiler import coreml_preprocess as pre

    target = CoreMLBackend.min_deployment_target_from_compile_specs(compile_specs)
    pipeline = CoreMLBackend.pass_pipeline_from_compile_specs(compile_specs)
    enumerated = CoreMLBackend.enumerated_shapes_from_compile_specs(compile_specs)
    program = copy.deepcopy(original_module)
    inputs = pre._get_ct_inputs(program, enumerated) if enumerated is not None else None
    logging.disable(logging.WARNING)
    try:
        return ct.convert(
            model=program,
            source="pytorch",
            convert_to="milinternal",
            pass_pipeline=pipeline,
            compute_precision=ct.precision.FLOAT32,
            minimum_deployment_target=target,
            inputs=inputs,
        )
    finally:
        logging.disable(logging.NOTSET)

"""A partition converted again at float32 compute precision, for ``verify``'s semantic pass:
differences there are wrong semantics, not float16 rounding."""

from __future__ import annotations

import copy
import logging
from typing import Any


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

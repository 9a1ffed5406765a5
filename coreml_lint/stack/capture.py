"""The one wrapper of ``CoreMLBackend._convert_to_mlmodel``: every Core ML model the backend
converts during a lowering, in conversion (= partition) order.

The MlModel holds the MIL program (``_mil_program``) and the I/O spec; it is built with
``skip_model_load=True``, which is how Core ML programs are inspected on Linux.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def capture_mlmodels(into: list[Any]) -> Iterator[None]:
    """Append each MlModel ``CoreMLBackend`` converts inside the block to ``into``."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    original = CoreMLBackend._convert_to_mlmodel

    def wrapped(edge_program: Any, compile_specs: Any, skip_model_load: bool = True) -> Any:
        model = original(edge_program, compile_specs, skip_model_load=skip_model_load)
        into.append(model)
        return model

    CoreMLBackend._convert_to_mlmodel = staticmethod(wrapped)
    try:
        yield
    finally:
        CoreMLBackend._convert_to_mlmodel = staticmethod(original)

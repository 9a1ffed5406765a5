"""The one room that touches the real stack: torch, executorch and coremltools.

Everything that lowers with the stock ``CoreMLPartitioner``, captures the Core ML models the
backend converts, converts a partition again at float32, or generates a table from the
installed releases lives here. The verifier, ``lower``, ``--check-advice``, the sweep and the
tests share this small API; the light layers (``program``, ``source``, ``rules``, ``engine``)
never import it and read only the artifacts it writes (``program/data/*.json``).

Nothing here imports a heavy package at module level: importing ``coreml_lint.stack`` is
free, and each function imports what it needs.
"""

from coreml_lint.stack.capture import capture_mlmodels
from coreml_lint.stack.delegates import DelegateView, describe_mlmodel
from coreml_lint.stack.float32 import convert_float32
from coreml_lint.stack.lowering import Lowering, lower_program, lower_stock
from coreml_lint.stack.partitioner import compile_specs, stock_partitioner

__all__ = [
    "DelegateView",
    "Lowering",
    "capture_mlmodels",
    "compile_specs",
    "convert_float32",
    "describe_mlmodel",
    "lower_program",
    "lower_stock",
    "stock_partitioner",
]

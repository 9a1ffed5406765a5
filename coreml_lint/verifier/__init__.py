"""``coreml-lint verify``: execute every Core ML partition's MIL on Linux and compare it with
the partition's eager module.

The heavy path: importing this package is cheap (torch, executorch and coremltools are
imported when a function runs). :func:`verify` lowers with the stock partitioner and then
verifies; :func:`verify_lowered` verifies an already-lowered program with the MlModels
captured by :func:`capture_mlmodels` during its lowering.
"""

from __future__ import annotations

from coreml_lint.stack import capture_mlmodels
from coreml_lint.verifier.api import verify, verify_lowered
from coreml_lint.verifier.report import Divergence, PartitionResult, PassResult, VerifyReport

__all__ = [
    "Divergence",
    "PartitionResult",
    "PassResult",
    "VerifyReport",
    "capture_mlmodels",
    "verify",
    "verify_lowered",
]

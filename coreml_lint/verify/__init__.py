"""``coreml-lint verify``: execute every Core ML partition's MIL on Linux and compare it with
the partition's eager module.

The heavy path: importing this package is cheap, but its functions need torch, executorch
and coremltools. See :func:`verify` (lower with the stock partitioner, then verify) and
:func:`verify_lowered` (verify an already-lowered program with the captured MlModels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coreml_lint.verify.report import VerifyReport

__all__ = ["VerifyReport", "capture_mlmodels", "verify", "verify_lowered"]


def verify(exported_program: Any, **options: Any) -> VerifyReport:
    """See :func:`coreml_lint.verify.api.verify`."""
    from coreml_lint.verify.api import verify as _verify

    return _verify(exported_program, **options)


def verify_lowered(edge_program: Any, mlmodels: list[Any], **options: Any) -> VerifyReport:
    """See :func:`coreml_lint.verify.api.verify_lowered`."""
    from coreml_lint.verify.api import verify_lowered as _verify_lowered

    return _verify_lowered(edge_program, mlmodels, **options)


def capture_mlmodels(into: list[Any]) -> Any:
    """Context manager recording each MlModel ``CoreMLBackend`` converts (for
    :func:`verify_lowered`)."""
    from coreml_lint.verify.lowering import capture_mlmodels as _capture

    return _capture(into)


def __getattr__(name: str) -> Any:
    if name == "VerifyReport":
        from coreml_lint.verify.report import VerifyReport

        return VerifyReport
    raise AttributeError(name)

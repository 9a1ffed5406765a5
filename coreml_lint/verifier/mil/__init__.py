"""A reference interpreter for the MIL programs coremltools produces (numpy only).

See :mod:`coreml_lint.verifier.mil.program` for execution and
:mod:`coreml_lint.verifier.mil.registry` for the op table.
"""

from __future__ import annotations

_LOADED = False


def load_kernels() -> None:
    """Import the kernel modules once (each registers its ops in the op table)."""
    global _LOADED
    if _LOADED:
        return
    from coreml_lint.verifier.mil import (  # noqa: F401
        inferred,
        k_conv,
        k_elementwise,
        k_index,
        k_misc,
        k_norm,
        k_pool,
        k_recurrent,
        k_resize,
        k_sample,
        k_tensor,
    )

    _LOADED = True

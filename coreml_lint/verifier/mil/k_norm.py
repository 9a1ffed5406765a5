"""``batch_norm`` and ``instance_norm`` (no value_inference in coremltools).

Both normalise per channel (dimension 1); batch_norm with the stored statistics,
instance_norm with each sample's own statistics over the spatial dims (biased variance,
as torch's instance_norm).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, kernel


def _per_channel(value: Any, rank: int) -> np.ndarray:
    return np.asarray(value, dtype=np.float64).reshape((1, -1) + (1,) * (rank - 2))


@kernel("batch_norm", how=OWN)
def _batch_norm(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], dtype=np.float64)
    mean, var = _per_channel(a["mean"], x.ndim), _per_channel(a["variance"], x.ndim)
    y = (x - mean) / np.sqrt(var + float(a.get("epsilon", 1e-5)))
    if a.get("gamma") is not None:
        y = y * _per_channel(a["gamma"], x.ndim)
    if a.get("beta") is not None:
        y = y + _per_channel(a["beta"], x.ndim)
    return y


@kernel("instance_norm", how=OWN)
def _instance_norm(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], dtype=np.float64)
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(a.get("epsilon", 1e-5)))
    if a.get("gamma") is not None:
        y = y * _per_channel(a["gamma"], x.ndim)
    if a.get("beta") is not None:
        y = y + _per_channel(a["beta"], x.ndim)
    return y

"""Elementwise kernels whose coremltools ``value_inference`` is missing, slow or unsafe.

- ``gelu``: EXACT mode loops over elements in Python (``np.vectorize(math.erf)``); all
  modes are written here with a vectorised erf.
- ``erf``: the same Python loop.
- ``thresholded_relu``: writes into its input array (coremltools#2795).
- ``silu``: no value_inference.
- ``softplus``, ``softplus_parametric``: value_inference computes ``log(1 + e)``, which is 0
  wherever ``e`` is below float32's epsilon (``x < -17``: torch's ``log1p`` gives 4e-8 there,
  and a later ``log`` of it is finite), and ``softplus_parametric``'s ``exp(beta * x)``
  overflows past ``beta * x = 88``. What Core ML computes there is not documented; verify
  would have reported it as Core ML's error, so the kernels compute softplus exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import WRAPPED, kernel


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised erf (scipy ships with executorch's scikit-learn dependency; torch otherwise)."""
    try:
        from scipy.special import erf as _erf

        return _erf(np.asarray(x, dtype=np.float64))
    except ImportError:  # pragma: no cover - scipy is a dependency of executorch's stack
        import torch

        return torch.special.erf(torch.from_numpy(np.asarray(x, dtype=np.float64))).numpy()


@kernel("erf", how=WRAPPED, note="value_inference loops per element in Python")
def _erf(op: Any, a: dict[str, Any]) -> np.ndarray:
    return erf(a["x"])


@kernel("gelu", how=WRAPPED, note="EXACT mode loops per element in Python")
def _gelu(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], dtype=np.float64)
    mode = a.get("mode", "EXACT")
    if mode == "TANH_APPROXIMATION":
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1 + np.tanh(inner))
    if mode == "SIGMOID_APPROXIMATION":
        return x / (1 + np.exp(-1.702 * x))
    if mode != "EXACT":
        raise NotImplementedError(f"gelu mode {mode}")
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


@kernel("silu")
def _silu(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], dtype=np.float64)
    return x / (1 + np.exp(-x))


@kernel("thresholded_relu", how=WRAPPED, note="value_inference writes into its input")
def _thresholded_relu(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = a["x"]
    return np.where(x < a["alpha"], np.zeros_like(x), x)


def _softplus_of(z: np.ndarray) -> np.ndarray:
    """``log(1 + exp(z))`` without overflow or loss of the tail (torch's own form)."""
    return np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))


@kernel("softplus", how=WRAPPED, note="value_inference loses the tail below x = -17")
def _softplus(op: Any, a: dict[str, Any]) -> np.ndarray:
    return _softplus_of(np.asarray(a["x"], dtype=np.float64))


@kernel("softplus_parametric", how=WRAPPED, note="value_inference overflows and loses the tail")
def _softplus_parametric(op: Any, a: dict[str, Any]) -> np.ndarray:
    """``alpha * softplus(beta * x)``, alpha and beta per channel (dim 1), as MIL defines it."""
    x = np.asarray(a["x"], dtype=np.float64)
    shape = [1] * x.ndim
    shape[1] = -1
    alpha = np.asarray(a["alpha"], dtype=np.float64).reshape(shape)
    beta = np.asarray(a["beta"], dtype=np.float64).reshape(shape)
    return alpha * _softplus_of(beta * x)

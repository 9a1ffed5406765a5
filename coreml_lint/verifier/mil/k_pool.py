"""``max_pool``, ``avg_pool`` and ``l2_pool`` with every pad type and ``ceil_mode``.

The output size is the program's declared shape (coremltools computed it with the
ceil-mode rule PyTorch uses). The input is padded far enough for every window: with
``-inf`` for max, zeros for the sums. The average divides by the count of real elements
(``exclude_padding_from_average``) or by the window clipped to the padded extent, which is
PyTorch's ``count_include_pad=True`` divisor, including for the ceil-mode tail window.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.k_conv import _ints, pads_of, windows
from coreml_lint.verifier.mil.registry import OWN, kernel


def _geometry(op: Any, a: dict[str, Any]) -> tuple:
    x = np.asarray(a["x"], dtype=np.float32)
    nd = x.ndim - 2
    kernel = _ints(a["kernel_sizes"], nd)
    strides = _ints(a.get("strides"), nd)
    pads = pads_of(a, x.shape[2:], kernel, strides, (1,) * nd)
    declared = op.outputs[0].shape[2:]
    if all(isinstance(d, int | np.integer) for d in declared):
        out = tuple(int(d) for d in declared)
    else:  # symbolic sizes (a dynamic program): the rule that declared them, on this input
        ceil = bool(a.get("ceil_mode", False))
        out = tuple(
            _out_size(x.shape[2 + i], kernel[i], strides[i], pads[i], ceil) for i in range(nd)
        )
    return x, kernel, strides, pads, out


def _out_size(size: int, k: int, s: int, pad: tuple, ceil: bool) -> int:
    """PyTorch's pooling output size (the last window must start inside the input or its
    leading padding in ceil mode)."""
    span = size + pad[0] + pad[1] - k
    n = -(-span // s) + 1 if ceil else span // s + 1
    if ceil and (n - 1) * s >= size + pad[0]:
        n -= 1
    return n


def _padded(x: np.ndarray, kernel: tuple, strides: tuple, pads: list, out: tuple, fill: float):
    widths = [(0, 0), (0, 0)]
    for i, (begin, _) in enumerate(pads):
        needed = (out[i] - 1) * strides[i] + kernel[i]
        widths.append((begin, max(needed - begin - x.shape[2 + i], 0)))
    return np.pad(x, widths, constant_values=fill)


def _counts(size: int, k: int, s: int, pad: tuple, n_out: int, exclude: bool) -> np.ndarray:
    """Divisor per output position along one dim."""
    starts = np.arange(n_out) * s - pad[0]
    ends = starts + k
    if exclude:
        return np.minimum(ends, size) - np.maximum(starts, 0)
    return np.minimum(ends, size + pad[1]) - starts


@kernel("max_pool", how=OWN)
def _max_pool(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, kernel, strides, pads, out = _geometry(op, a)
    xp = _padded(x, kernel, strides, pads, out, -np.inf)
    win = windows(xp, kernel, strides, (1,) * len(kernel), out)
    return win.max(axis=tuple(range(-len(kernel), 0)))


def _window_sums(x: np.ndarray, kernel, strides, pads, out) -> np.ndarray:
    xp = _padded(x, kernel, strides, pads, out, 0.0)
    win = windows(xp, kernel, strides, (1,) * len(kernel), out)
    return win.sum(axis=tuple(range(-len(kernel), 0)), dtype=np.float64)


@kernel("avg_pool", how=OWN)
def _avg_pool(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, kernel, strides, pads, out = _geometry(op, a)
    sums = _window_sums(x, kernel, strides, pads, out)
    exclude = bool(a.get("exclude_padding_from_average", False))
    divisor = np.ones((), dtype=np.float64)
    for i in range(len(kernel)):
        counts = _counts(x.shape[2 + i], kernel[i], strides[i], pads[i], out[i], exclude)
        shape = [1] * len(kernel)
        shape[i] = out[i]
        divisor = divisor * counts.reshape(shape)
    return sums / divisor


@kernel("l2_pool", how=OWN)
def _l2_pool(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, kernel, strides, pads, out = _geometry(op, a)
    return np.sqrt(_window_sums(x * x, kernel, strides, pads, out))

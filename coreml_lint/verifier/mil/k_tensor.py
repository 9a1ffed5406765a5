"""Shape and layout kernels whose ``value_inference`` is missing, wrong or slow.

- ``squeeze`` and ``slice_by_size``: value_inference can fold to the wrong shape
  (coremltools#2803); here the result is cut to what the op means.
- ``range_1d``: value_inference refuses more than 262,144 elements.
- ``band_part``: value_inference loops over every element in Python.
- ``cumsum``: value_inference fails for ``exclusive=True`` (``np.zeros(shape, data)``).
- ``reverse_sequence``: value_inference raises NotImplementedError.
- ``concat``: value_inference ignores ``interleave`` (found by this project's conformance
  test; not in mil-oracle.md).
- ``one_hot``, ``pixel_shuffle``, ``pixel_unshuffle``, ``sliding_windows``,
  ``reshape_like``: none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, WRAPPED, kernel


@kernel("squeeze", how=WRAPPED, note="value_inference can fold to the wrong shape")
def _squeeze(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    axes = a.get("axes")
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    rank = x.ndim
    drop = {int(ax) % rank for ax in np.atleast_1d(axes) if x.shape[int(ax) % rank] == 1}
    return x.reshape([d for i, d in enumerate(x.shape) if i not in drop])


@kernel("slice_by_size", how=WRAPPED, note="value_inference can fold to the wrong shape")
def _slice_by_size(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    slices = []
    for dim, begin, size in zip(
        x.shape, np.atleast_1d(a["begin"]), np.atleast_1d(a["size"]), strict=False
    ):
        start = int(begin) + dim if begin < 0 else int(begin)
        stop = dim if size == -1 else start + int(size)
        slices.append(slice(start, stop))
    return x[tuple(slices)]


@kernel("range_1d", how=WRAPPED, note="value_inference refuses > 262,144 elements")
def _range_1d(op: Any, a: dict[str, Any]) -> np.ndarray:
    return np.arange(a["start"], a["end"], a["step"])


@kernel("band_part", how=WRAPPED, note="value_inference loops per element in Python")
def _band_part(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    lower, upper = int(a.get("lower", -1)), int(a.get("upper", -1))
    m, n = x.shape[-2:]
    rows = np.arange(m)[:, None]
    cols = np.arange(n)[None, :]
    keep = np.ones((m, n), dtype=bool)
    if lower >= 0:
        keep &= rows - cols <= lower
    if upper >= 0:
        keep &= cols - rows <= upper
    return np.where(keep, x, np.zeros_like(x))


@kernel("cumsum", how=WRAPPED, note="value_inference fails when exclusive=True")
def _cumsum(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    axis = int(a.get("axis", 0))
    data = np.flip(x, axis) if a.get("reverse", False) else x
    out = np.cumsum(data, axis=axis, dtype=x.dtype)
    if a.get("exclusive", False):
        out = np.roll(out, 1, axis=axis)
        index = [slice(None)] * x.ndim
        index[axis] = 0
        out[tuple(index)] = 0
    return np.flip(out, axis) if a.get("reverse", False) else out


@kernel("reverse_sequence", how=WRAPPED, note="value_inference raises NotImplementedError")
def _reverse_sequence(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.array(a["x"])
    seq_axis, batch_axis = int(a.get("seq_axis", 0)), int(a.get("batch_axis", 0))
    out = x.copy()
    for b, length in enumerate(np.atleast_1d(a["lengths"])):
        src = [slice(None)] * x.ndim
        src[batch_axis] = b
        src[seq_axis] = slice(0, int(length))
        out[tuple(src)] = np.flip(x[tuple(src)], axis=seq_axis - (batch_axis < seq_axis))
    return out


@kernel("concat", how=WRAPPED, note="value_inference ignores interleave")
def _concat(op: Any, a: dict[str, Any]) -> np.ndarray:
    values = [np.asarray(v) for v in a["values"]]
    axis = int(a["axis"])
    if values[0].ndim == 0:
        return np.stack(values)
    if not a.get("interleave", False):
        return np.concatenate(values, axis=axis)
    axis %= values[0].ndim
    stacked = np.stack(values, axis=axis + 1)  # a0, b0, a1, b1, ... along ``axis``
    shape = list(values[0].shape)
    shape[axis] *= len(values)
    return stacked.reshape(shape)


@kernel("one_hot", how=OWN)
def _one_hot(op: Any, a: dict[str, Any]) -> np.ndarray:
    indices = np.asarray(a["indices"]).astype(np.int64)
    size = int(a["one_hot_vector_size"])
    hot = indices[..., None] == np.arange(size)
    on, off = a.get("on_value", 1), a.get("off_value", 0)
    out = np.where(hot, on, off)
    return np.moveaxis(out, -1, int(a.get("axis", -1)))


@kernel("pixel_shuffle", how=OWN)
def _pixel_shuffle(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    f = int(a["upscale_factor"])
    n, c, h, w = x.shape
    y = x.reshape(n, c // (f * f), f, f, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (f * f), h * f, w * f)


@kernel("pixel_unshuffle", how=OWN)
def _pixel_unshuffle(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    f = int(a["downscale_factor"])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // f, f, w // f, f).transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * f * f, h // f, w // f)


@kernel("sliding_windows", how=OWN)
def _sliding_windows(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    axis = int(a["axis"]) % x.ndim
    size, stride = int(a["size"]), int(a.get("stride", 1))
    windows = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)
    index = [slice(None)] * windows.ndim
    index[axis] = slice(None, None, stride)
    windows = windows[tuple(index)]  # (..., n_windows, ..., size): move size after axis
    return np.moveaxis(windows, -1, axis + 1)


@kernel("reshape_like", how=OWN)
def _reshape_like(op: Any, a: dict[str, Any]) -> np.ndarray:
    shape: list[int] = []
    for ref, begin, end, to_end in zip(
        a["ref_tensors"], a["begins"], a["ends"], a["end_masks"], strict=True
    ):
        dims = np.shape(ref)
        shape += dims[int(begin) :] if to_end else dims[int(begin) : int(end)]
    return np.reshape(a["x"], shape)
